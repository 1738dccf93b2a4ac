"""Shared pieces of the scenario generators: contamination arithmetic, padding, writing.

Everything here is standard library only; the data is read from ``../shared/data`` at run
time and never copied into the repository.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

# ``../shared/data`` beside the checkout; MEMAUDIT_DATA points elsewhere (a git worktree
# nested one level deeper has no ``../shared``).
DEFAULT_DATA = Path(os.environ.get("MEMAUDIT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
SIMULATION_NOTE = (
    "a simulation of MINJA (no MINJA data is public): injected records are generated from "
    "clean records following the attack's recipe"
)


class ScenarioError(ValueError):
    """A scenario cannot be built with the parameters given (message says why)."""


@dataclass
class Scenario:
    kind: str
    memories: list[dict]
    probes: list[dict]
    benign: list[dict]
    poisoned: list[str]
    meta: dict = field(default_factory=dict)
    agent: dict = field(default_factory=lambda: {"connector": "builtin-vote", "top_k": 5})


def split_counts(rho: float, r_min: int, r_max: int, r_pref: int, i_max: int | None = None) -> tuple[int, int]:
    """(relevant clean R, injected I) with I / (I + R) as close to ``rho`` as possible.

    R ranges over [r_min, r_max] (down to 1 when ``i_max`` forces it); ties go to the R
    closest to ``r_pref``. 1 <= I <= ``i_max``.
    """
    if not 0.0 < rho < 1.0:
        raise ScenarioError(f"rho must be in (0, 1), got {rho}")
    if r_min < 1 or r_max < r_min:
        raise ScenarioError(f"not enough clean memories relevant to the trigger ({r_max})")
    best = None
    for r in range(1, r_max + 1):
        i = max(1, round(rho * r / (1.0 - rho)))
        if i_max is not None and i > i_max:
            continue
        outside = 0 if r >= r_min else r_min - r
        key = (abs(i / (i + r) - rho) + outside, abs(r - r_pref), r)
        if best is None or key < best[0]:
            best = (key, r, i)
    if best is None:
        raise ScenarioError("the attack cannot supply enough injected records for this rho")
    return best[1], best[2]


def achieved_rho(injected: int, relevant_clean: int) -> float:
    return injected / (injected + relevant_clean)


def rho_tolerance(injected: int, relevant_clean: int) -> float:
    """Rounding granularity: the achieved rho is within this of the requested one."""
    return 1.0 / (injected + relevant_clean)


def _read_json(path: Path):
    if not path.exists():
        raise ScenarioError(f"data file not found: {path}")
    return json.loads(path.read_text())


def load_strategyqa(data: Path) -> list[dict]:
    return _read_json(data / "strategyqa" / "strategyqa_train_filtered.json")


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def padding_memories(data: Path, sources: list[str], exclude: str, rng: random.Random):
    """Yield clean (text, metadata) pairs from the named sources, in order, for padding.

    Sources: ``strategyqa``, ``wiki2``, ``locomo``, ``wiki2-sentences``. A record whose text
    contains ``exclude`` (the trigger) is skipped: padding never changes rho.
    """
    low = exclude.lower()
    for source in sources:
        rows: list[tuple[str, dict]] = []
        if source == "strategyqa":
            for item in load_strategyqa(data):
                ans = "yes" if item["answer"] else "no"
                text = f"Question: {item['question']}\nThought: {item['term']} is {item['description']}.\nA: {ans}"
                rows.append((text, {"query": item["question"], "answer": ans, "source": f"strategyqa:{item['qid']}"}))
        elif source in ("wiki2", "wiki2-sentences"):
            corpus = _read_json(data / "wiki2" / "2wikimultihopqa_corpus.json")
            for i, row in enumerate(corpus):
                parts = [row["text"]] if source == "wiki2" else _SENTENCE.split(row["text"])
                for j, part in enumerate(parts):
                    if len(part) < 20:
                        continue
                    first = _SENTENCE.split(part)[0]
                    rows.append(
                        (
                            f"{row['title']}\n{part}",
                            {
                                "query": f"What is {row['title']}?",
                                "answer": first,
                                "source": f"wiki2:{i}" + ("" if source == "wiki2" else f".{j}"),
                            },
                        )
                    )
        elif source == "locomo":
            for sample in _read_json(data / "locomo" / "locomo10.json"):
                conv = sample["conversation"]
                for key in sorted(conv):
                    if key.startswith("session_") and isinstance(conv[key], list):
                        for turn in conv[key]:
                            rows.append(
                                (
                                    f"{turn['speaker']}: {turn['text']}",
                                    {
                                        "query": "",
                                        "answer": turn["text"],
                                        "source": f"locomo:{sample['sample_id']}:{turn['dia_id']}",
                                    },
                                )
                            )
        else:
            raise ScenarioError(f"unknown padding source {source!r}")
        rng.shuffle(rows)
        for text, meta in rows:
            if low and (low in text.lower() or low in meta["query"].lower()):
                continue
            yield text, meta


def finish(scenario: Scenario, size: int, pad, rng: random.Random) -> Scenario:
    """Pad to ``size`` memories, shuffle, assign neutral ids (``m000001``...), fix truth ids."""
    mems = scenario.memories
    if size < len(mems):
        raise ScenarioError(f"size {size} is below the {len(mems)} memories the scenario itself needs")
    seen_texts = {m["text"] for m in mems}
    for text, meta in pad:
        if len(mems) >= size:
            break
        if text in seen_texts:
            continue
        seen_texts.add(text)
        mems.append({"_role": "pad", "text": text, "metadata": meta})
    if len(mems) < size:
        raise ScenarioError(f"not enough clean data to pad to {size} memories ({len(mems)})")
    rng.shuffle(mems)
    poisoned = []
    out = []
    for n, m in enumerate(mems, start=1):
        mid = f"m{n:06d}"
        if m["_role"] == "injected":
            poisoned.append(mid)
        out.append({"id": mid, "text": m["text"], "metadata": m["metadata"]})
    scenario.memories = out
    scenario.poisoned = sorted(poisoned)
    scenario.meta["size"] = len(out)
    return scenario


def write_scenario(scenario: Scenario, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)

    def jsonl(name: str, rows: list[dict]) -> None:
        with (out / name).open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

    jsonl("memories.jsonl", scenario.memories)
    jsonl("probes.jsonl", scenario.probes)
    jsonl("benign.jsonl", scenario.benign)
    (out / "agent.json").write_text(json.dumps(scenario.agent, indent=2, sort_keys=True) + "\n")
    (out / "truth.json").write_text(json.dumps({"poisoned": scenario.poisoned}, indent=2, sort_keys=True) + "\n")
    (out / "scenario.json").write_text(json.dumps(scenario.meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return out
