"""AUC of each CAS signal on real PoisonedRAG data (poison passages vs clean passages).

Store: for each of the 100 NQ targets, its 5 adversarial passages (positives) and its clean
passages — `clean_top5_joined` split on newlines (lines under 4 words, formula fragments,
dropped) and `gt_passages` (negatives), de-duplicated, embedded with all-MiniLM-L6-v2.
With --background N, N passages of 2WikiMultihopQA are added as unlabelled clean background
(a realistic store around the suspects); the AUC is still over the PoisonedRAG passages.

Also the pair AUC of the rules backend as DESIGN section 4 frames it: (poison, ground-truth
passage) pairs against (clean passage, ground-truth passage) pairs of the same target.

    .venv/bin/python bench/cas_auc.py [--data ../shared/data] [--background 6119] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audits.engine.consistency import RulesBackend
from audits.engine.graph import (
    DEFAULT_SIGNAL_WEIGHTS,
    SIGNALS,
    build_graph,
    combine_signals,
    compute_cas,
)
from ledger.embeddings import Embedder

COMBOS = {
    "rel_tight+tight": {"relative_tightness": 1.0, "tightness": 1.0},
    "rel_tight+gap": {"relative_tightness": 1.0, "cluster_gap": 1.0},
    "rel_tight+gap+dup": {"relative_tightness": 1.0, "cluster_gap": 1.0, "dup_count": 1.0},
    "rel_tight+tight+gap+dup": {"relative_tightness": 1.0, "tightness": 1.0, "cluster_gap": 0.5,
                                "dup_count": 0.5},
}


def auc(pos: list[float], neg: list[float]) -> float:
    """Mann-Whitney AUC with ties counted half."""
    if not pos or not neg:
        return float("nan")
    allv = np.concatenate([pos, neg])
    order = allv.argsort(kind="mergesort")
    ranks = np.empty(len(allv))
    sv = allv[order]
    i = 0
    while i < len(sv):
        j = i
        while j + 1 < len(sv) and sv[j + 1] == sv[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    rp = ranks[: len(pos)].sum()
    return float((rp - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def load(data: Path) -> tuple[list[str], list[int], dict[str, dict]]:
    adv = json.loads((data / "poisonedrag/nq_adv_targeted.json").read_text())
    clean = json.loads((data / "poisonedrag/nq_clean_context.json").read_text())
    texts: list[str] = []
    labels: list[int] = []
    seen: set[str] = set()
    per_target: dict[str, dict] = {}
    for key, item in adv.items():
        c = clean[key]
        lines = [ln.strip() for ln in c["clean_top5_joined"].split("\n") if len(ln.split()) >= 4]
        per_target[key] = {"adv": item["adv_texts"], "clean": lines, "gt": c["gt_passages"]}
        for t, y in [(t, 1) for t in item["adv_texts"]] + [(t, 0) for t in lines + c["gt_passages"]]:
            if t not in seen:
                seen.add(t)
                texts.append(t)
                labels.append(y)
    return texts, labels, per_target


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data"))
    ap.add_argument("--background", type=int, default=0)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    data = Path(args.data)
    if not (data / "poisonedrag").is_dir():
        sys.exit(f"no PoisonedRAG data under {data}")
    t0 = time.time()
    texts, labels, per_target = load(data)
    n_labelled = len(texts)
    if args.background:
        wiki = json.loads((data / "wiki2/2wikimultihopqa_corpus.json").read_text())
        for p in wiki[: args.background]:
            t = f"{p['title']}: {p['text']}"
            if t not in set(texts[:n_labelled]):
                texts.append(t)
    emb = Embedder()
    E = emb.encode(texts)
    ids = [f"m{i}" for i in range(len(texts))]
    items = dict(zip(ids, texts))
    scope = ids[:n_labelled]
    mg = build_graph(ids, E, scope, k=args.k, tau=0.3, dup_threshold=0.8)
    rules = RulesBackend()
    cas, signals = compute_cas(mg, rules, items)
    pos_ids = [i for i, y in zip(scope, labels) if y == 1]
    neg_ids = [i for i, y in zip(scope, labels) if y == 0]
    rows = {}
    for name in SIGNALS:
        s = signals[name]
        rows[name] = auc([s[i] for i in pos_ids], [s[i] for i in neg_ids])
    rows["CAS (default weights)"] = auc([cas[i] for i in pos_ids], [cas[i] for i in neg_ids])
    paper = combine_signals(signals, {"contradiction": 1.0})
    for label, w in COMBOS.items():
        comb = combine_signals(signals, w)
        rows[f"combo {label}"] = auc([comb[i] for i in pos_ids], [comb[i] for i in neg_ids])
    rows["CAS paper-only (contradiction)"] = auc([paper[i] for i in pos_ids],
                                                 [paper[i] for i in neg_ids])
    # Pair AUC of the rules backend (poison vs gt) against (clean vs gt).
    pos_pairs, neg_pairs = [], []
    for t in per_target.values():
        for g in t["gt"]:
            pos_pairs += [(a, g) for a in t["adv"]]
            neg_pairs += [(c, g) for c in t["clean"] if c != g]
    pc = [c for _, c in rules.pair_scores(pos_pairs)]
    nc = [c for _, c in rules.pair_scores(neg_pairs)]
    rows["rules pair contradiction (poison|clean vs gt)"] = auc(pc, nc)
    result = {
        "store": {"labelled": n_labelled, "poison": len(pos_ids), "clean": len(neg_ids),
                  "background": len(texts) - n_labelled, "k": args.k, "model": emb.model_name},
        "auc": rows,
        "weights": DEFAULT_SIGNAL_WEIGHTS,
        "seconds": round(time.time() - t0, 1),
    }
    print(f"store: {result['store']}")
    print(f"{'signal':<48} AUC")
    for k, v in rows.items():
        print(f"{k:<48} {v:.3f}")
    print(f"({result['seconds']} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
