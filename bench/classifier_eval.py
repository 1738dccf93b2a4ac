"""Evaluate the ingest-time classifier on the MutMem PoisonedRAG adaptation.

Clean memories: the clean passages of PoisonedRAG NQ (``clean_top5_joined`` split on newlines,
plus ``gt_passages``), the 2WikiMultihopQA corpus passages (title line + text) and every LoCoMo
dialogue turn. Poisons: all 500 ``adv_texts`` of ``nq_adv_targeted.json`` (100 targets x 5).
All of them are classified together as one batch, as the ledger does for a store.

    python bench/classifier_eval.py [--data DIR] [--json OUT] [--split all|tune|holdout]
                                    [--set name=value ...]

``--split tune`` keeps the poisons of the even-numbered half of the targets (sorted by id),
``holdout`` the other half; the clean memories are the same in both. Thresholds were chosen on
``tune``; ``holdout`` shows whether they carry over. Data is read at run time from
``../shared/data`` (or ``--data``) and never copied into the repository.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger import classifier  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load_clean(data: Path) -> list[tuple[str, str]]:
    clean: list[tuple[str, str]] = []
    ctx = json.loads((data / "poisonedrag" / "nq_clean_context.json").read_text())
    for key in sorted(ctx):
        for i, line in enumerate(ctx[key]["clean_top5_joined"].split("\n")):
            if line.strip():
                clean.append((f"nq-{key}-c{i}", line))
        for i, text in enumerate(ctx[key]["gt_passages"]):
            clean.append((f"nq-{key}-g{i}", text))
    wiki = json.loads((data / "wiki2" / "2wikimultihopqa_corpus.json").read_text())
    for i, row in enumerate(wiki):
        clean.append((f"wiki-{i}", f"{row['title']}\n{row['text']}"))
    locomo = json.loads((data / "locomo" / "locomo10.json").read_text())
    for sample in locomo:
        for key in sorted(sample["conversation"]):
            turns = sample["conversation"][key]
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    clean.append((f"locomo-{sample['sample_id']}-{turn['dia_id']}", turn["text"]))
    return clean


def load_poisons(data: Path, split: str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    adv = json.loads((data / "poisonedrag" / "nq_adv_targeted.json").read_text())
    targets = sorted(adv)
    if split == "tune":
        targets = targets[0::2]
    elif split == "holdout":
        targets = targets[1::2]
    poisons, target_of = [], {}
    for key in targets:
        for i, text in enumerate(adv[key]["adv_texts"]):
            pid = f"adv-{key}-{i}"
            poisons.append((pid, text))
            target_of[pid] = key
    return poisons, target_of


def dense_index(passages: list[tuple[str, str]]):
    """MiniLM neighbourhoods of the passages (vectors cached in var/bench/embeddings.npz)."""
    from bench.audit_bench import CachedEmbedder
    from ledger.dense import DenseIndex

    embedder = CachedEmbedder()
    matrix = embedder.encode_cached([text for _, text in passages])
    if embedder.encoded:
        embedder.save()
    return DenseIndex([pid for pid, _ in passages], matrix, model=embedder.model_name)


def evaluate(data: Path, split: str = "all", params: classifier.Params | None = None,
             embedder: str = "minilm") -> dict:
    clean = load_clean(data)
    poisons, target_of = load_poisons(data, split)
    params = params or classifier.DEFAULT_PARAMS
    started = time.perf_counter()
    dense = dense_index(clean + poisons) if embedder == "minilm" else None
    dense_seconds = time.perf_counter() - started
    flags = classifier.classify(clean + poisons, params=params, dense=dense)
    seconds = time.perf_counter() - started
    flagged = {f.memory_id for f in flags}
    poison_hits = sorted(flagged & set(target_of))
    per_target = Counter(target_of[p] for p in poison_hits)
    n_targets = len(set(target_of.values()))
    clean_ids = {cid for cid, _ in clean}
    false_pos = sorted(flagged & clean_ids)
    return {
        "classifier": f"{classifier.CLASSIFIER_NAME}@{classifier.CLASSIFIER_VERSION}",
        "split": split,
        "embedder": embedder,
        "poison_labelled": len(poison_hits),
        "poison_total": len(poisons),
        "targets_fully_covered": sum(1 for v in per_target.values() if v == 5),
        "targets_4of5_covered": sum(1 for v in per_target.values() if v >= 4),
        "targets_any": len(per_target),
        "targets_total": n_targets,
        "clean_flagged": len(false_pos),
        "clean_total": len(clean),
        "clean_flagged_per_10k": round(len(false_pos) / len(clean) * 10_000, 2),
        "false_positive_ids": false_pos,
        "seconds": round(seconds, 2),
        "dense_index_seconds": round(dense_seconds, 2),
        "example_reason": flags[0].reason if flags else "",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    ap.add_argument("--split", choices=["all", "tune", "holdout", "both"], default="both")
    ap.add_argument("--embedder", choices=["minilm", "none"], default="minilm",
                    help="embeddings for the classifier's paraphrase-aware steps (none: lexical only)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a classifier threshold (experiments only)",
    )
    args = ap.parse_args(argv)
    if not (args.data / "poisonedrag" / "nq_adv_targeted.json").exists():
        print(f"data not found under {args.data}", file=sys.stderr)
        return 2
    overrides = {}
    fields = {f.name: f.type for f in dataclasses.fields(classifier.Params)}
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in fields:
            ap.error(f"unknown threshold {name!r}")
        overrides[name] = type(getattr(classifier.DEFAULT_PARAMS, name))(value)
    params = dataclasses.replace(classifier.DEFAULT_PARAMS, **overrides)
    splits = ["all", "tune", "holdout"] if args.split == "both" else [args.split]
    results = [evaluate(args.data, s, params, args.embedder) for s in splits]
    header = (
        f"{'split':8} {'poison labelled':>16} {'targets covered':>16} {'>=4/5':>6} "
        f"{'clean flagged':>18} {'per 10k':>8} {'seconds':>8}"
    )
    print(f"{results[0]['classifier']}  (PoisonedRAG NQ adv_texts vs NQ/2Wiki/LoCoMo clean)")
    print(header)
    for r in results:
        print(
            f"{r['split']:8} {r['poison_labelled']:>9} / {r['poison_total']:<4} "
            f"{r['targets_fully_covered']:>9} / {r['targets_total']:<4} "
            f"{r['targets_4of5_covered']:>6} "
            f"{r['clean_flagged']:>8} / {r['clean_total']:<7} "
            f"{r['clean_flagged_per_10k']:>8} {r['seconds']:>8}"
        )
    print("target: clean flagged <= 1 per 10,000 (MutMem: 4 of 18,808); example reason:")
    print("  " + results[0]["example_reason"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
