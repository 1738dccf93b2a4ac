"""The instruction rules alone (3.2 patterns + the structural scorer; no vectors) on clean text.

    python bench/instruction_clean.py --data /work/shared/data

Two counts (docs/benchmarks.md 1c): (1) distinct clean texts an instruction rule labels: the
12,650 clean memories of section 1, every 2WikiMultihopQA sentence (split after . ! ?), the
StrategyQA questions and descriptions, the EHRAgent logs; (2) honest memories of every scenario
family (``bench/scenarios/families.py``, rho 0.4, seed 0, size 400) the rules label, and how many
of the families' poisons they label. A family whose data is absent is named and skipped.
Written in the 3.11 session; 3.10's "39,116 texts" were counted by a script not kept, so this
one's total differs (its sentence split is its own).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.classifier_eval import DEFAULT_DATA, load_clean  # noqa: E402
from bench.scenarios import ScenarioError  # noqa: E402
from bench.scenarios.families import FAMILIES, build_family  # noqa: E402
from ledger.classifier.instruction import instruction_markers  # noqa: E402


def clean_texts(data: Path) -> list[str]:
    texts = [t for _, t in load_clean(data)]
    for row in json.loads((data / "wiki2" / "2wikimultihopqa_corpus.json").read_text()):
        texts += [s for s in re.split(r"(?<=[.!?])\s+", row["text"]) if s.strip()]
    for name in ("strategyqa_train_filtered.json", "strategyqa_test.json"):
        for row in json.loads((data / "strategyqa" / name).read_text()):
            texts += [row["question"]] + ([row["description"]] if row.get("description") else [])
    texts += [p.read_text(errors="replace") for p in sorted((data / "ehragent" / "logs").glob("*"))]
    return list(dict.fromkeys(texts))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args(argv)
    texts = clean_texts(args.data)
    started = time.process_time()
    flagged = [(t, m) for t in texts if (m := instruction_markers(t))]
    print(f"clean texts {len(texts)}: labelled {len(flagged)} ({time.process_time() - started:.1f} s CPU)")
    for text, marks in flagged:
        print(f"  clean: {text[:140]!r} -> {marks}")
    honest = honest_flagged = poisons = poisons_flagged = 0
    for name in FAMILIES:
        try:
            sc = build_family(name, rho=0.4, seed=0, size=400, data=args.data)
        except ScenarioError as exc:
            print(f"  family {name} skipped: {exc}")
            continue
        planted = set(sc.poisoned)
        for mem in sc.memories:
            marks = instruction_markers(mem["text"])
            if mem["id"] in planted:
                poisons, poisons_flagged = poisons + 1, poisons_flagged + bool(marks)
            else:
                honest, honest_flagged = honest + 1, honest_flagged + bool(marks)
                if marks:
                    print(f"  honest ({name}): {mem['text'][:140]!r} -> {marks}")
    print(f"scenario honest memories {honest}: labelled {honest_flagged}; poisons labelled {poisons_flagged} / {poisons}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
