"""Utility check on LoCoMo: evidence recall@k before and after the quarantine.

    python bench/locomo_utility.py [--locomo FILE] [--k 5,10] [--max-questions N]
                                   [--embedder minilm|hashing] [--workdir DIR] [--json OUT]

Each LoCoMo conversation becomes one store (an agent's memory: every dialogue turn, with
``speaker: text``), imported through the product's import path. For every question with
evidence turns, recall@k is the share of its evidence turns found in the top-k of
``ledger.recall.recall``. It is measured twice on the same stores: **before** (no labels) and
**after** the ingest classifier (``ledger.classifier_service.ingest_classify``, run per store)
has appended its signed ``poison_likely`` labels. Nothing adversarial is mixed in: all LoCoMo
turns are clean, so the quarantine is only the classifier's false labels on them, and any drop
is the price of the defence. Reported too: the quarantined turn ids and how many questions had
an evidence turn among them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import ledger_env  # noqa: E402


def evidence_ids(q: dict) -> list[str]:
    out = []
    for e in q.get("evidence") or []:
        for part in str(e).replace(";", " ").replace(",", " ").split():
            if part.startswith("D") and ":" in part:
                out.append(part)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locomo", type=Path, default=ledger_env.DEFAULT_DATA / "locomo" / "locomo10.json")
    ap.add_argument("--k", default="5,10")
    ap.add_argument("--max-questions", type=int, default=0, help="0 = all questions with evidence")
    ap.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    ap.add_argument("--workdir")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    ks = sorted(int(k) for k in args.k.split(","))

    load_before = [round(x, 2) for x in os.getloadavg()]
    work = ledger_env.setup(args.workdir, embedder=args.embedder)
    from ledger.classifier_service import ACTOR, ingest_classify
    from ledger.imports import memories_import
    from ledger.models import Memory
    from ledger.recall import recall

    org = ledger_env.organization_get()
    samples = json.loads(args.locomo.read_text())
    stores, questions, turns_total = [], [], 0
    for sample in samples:
        records = []
        for key, turns in sorted(sample["conversation"].items()):
            if key.startswith("session_") and isinstance(turns, list):
                records += [{"id": t["dia_id"], "text": f"{t['speaker']}: {t['text']}"} for t in turns if t.get("text")]
        seen, unique = set(), []
        for r in records:  # a few dia_ids repeat in the source; keep the first
            if r["id"] not in seen:
                seen.add(r["id"])
                unique.append(r)
        turns_total += len(unique)
        store = ledger_env.store_fresh(org, f"locomo-{sample['sample_id']}".lower())
        payload = "\n".join(json.dumps(r) for r in unique).encode("utf-8")
        job = memories_import(store=store, data=payload, filename="locomo.jsonl", inline=True, classify=False)
        assert job.status == "done", job.errors[:3]
        stores.append(store)
        questions += [(store, q["question"], set(evidence_ids(q))) for q in sample["qa"] if evidence_ids(q)]
    if args.max_questions:
        step = max(1, len(questions) // args.max_questions)
        questions = questions[::step][: args.max_questions]

    def measure() -> tuple[dict[int, float], list[float]]:
        found = {k: 0 for k in ks}
        wanted, times = 0, []
        for store, question, evidence in questions:
            t = time.perf_counter()
            r = recall(store=store, query=question, k=max(ks))
            times.append((time.perf_counter() - t) * 1000)
            ids = [x["external_id"] for x in r["results"]]
            wanted += len(evidence)
            for k in ks:
                found[k] += len(evidence & set(ids[:k]))
        return {k: round(found[k] / wanted, 4) for k in ks}, times

    before, t_before = measure()
    for store in stores:
        ingest_classify(store=store, inline=True)
    quarantined = sorted(Memory.objects.filter(store__in=stores).exclude(epistemic_state="")
                         .values_list("store__slug", "external_id"))
    flagged = len(quarantined)
    by_store = set(quarantined)
    hit_questions = sum(1 for store, _, evidence in questions if any((store.slug, e) in by_store for e in evidence))
    after, t_after = measure()
    result = {
        "conversations": len(stores), "turns": turns_total, "questions": len(questions), "embedder": args.embedder,
        "classifier": ACTOR, "load_average_before": load_before,
        "quarantined_turns": flagged,
        "quarantined_ids": [f"{store}/{ext}" for store, ext in quarantined],
        "questions_with_quarantined_evidence": hit_questions,
        "recall_at_k_before": {str(k): v for k, v in before.items()},
        "recall_at_k_after": {str(k): v for k, v in after.items()},
        "recall_p50_ms": round(ledger_env.percentile(t_after, 50), 2),
    }
    print(f"LoCoMo evidence recall, {len(stores)} conversations ({turns_total} turns), {len(questions)} questions, "
          f"embedder {args.embedder}, classifier {ACTOR}; load average before {load_before}")
    print(f"turns quarantined by the classifier: {flagged} {result['quarantined_ids'][:10]}; "
          f"questions with a quarantined evidence turn: {hit_questions}")
    print(f"{'k':>4} {'before':>8} {'after':>8}")
    for k in ks:
        print(f"{k:>4} {before[k]:>8.4f} {after[k]:>8.4f}")
    print(f"recall p50 ms (after, end to end with the query encoding): {result['recall_p50_ms']}")
    print(f"work folder: {work}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
