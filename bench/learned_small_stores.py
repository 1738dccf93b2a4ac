"""Clean memories the learned instruction detector labels in stores too small for a store bar.

    python bench/learned_small_stores.py [--data ../shared/data] [--weights FILE ...] [--size 100]

``ledger.classifier.learned.embedding_injections`` raises its bar to the store's own median + z_min
robust deviations only in a store of at least ``min_store`` passages; below that the model's
absolute threshold decides alone. This scores the 12,650 clean memories of
``bench/classifier_eval.py`` (real MiniLM vectors, cached in var/bench/embeddings.npz) in shuffled
stores of ``--size`` passages (seed 0) with each weights file (default: the shipped one) and
prints how many it labels, per 10,000, and the first few texts. ``--sets`` prints the other side:
each labelled set of ``bench/instruction_set.py`` as a small store of its own (its injections and
hard negatives), what the learned detector labels of each.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def small_store_flags(data: Path, weights: Path | None, size: int) -> dict:
    from bench.classifier_eval import dense_index, load_clean
    from ledger.classifier.learned import MODEL_FILE, embedding_injections, load_model

    model = load_model(str(weights or MODEL_FILE))
    if size >= model.min_store:
        raise SystemExit(f"--size must be under the model's min_store ({model.min_store})")
    clean = load_clean(data)
    dense = dense_index(clean)
    order = list(range(len(clean)))
    random.Random(0).shuffle(order)
    flagged: dict = {}
    for start in range(0, len(order), size):
        flagged.update(embedding_injections([clean[i] for i in order[start:start + size]], dense, model=model))
    texts = dict(clean)
    return {"weights": str(weights or MODEL_FILE), "threshold": model.threshold, "store_size": size,
            "clean": len(clean), "labelled": len(flagged), "per_10000": round(len(flagged) / len(clean) * 1e4, 2),
            "examples": [texts[mid][:100] for mid in sorted(flagged)[:5]]}


def small_store_sets(weights: Path | None) -> dict:
    from bench.audit_bench import CachedEmbedder
    from bench.classifier_eval import VectorIndex
    from bench.instruction_set import SETS, set_passages
    from ledger.classifier.instruction import instruction_markers
    from ledger.classifier.learned import MODEL_FILE, embedding_injections, load_model

    model = load_model(str(weights or MODEL_FILE))
    emb = CachedEmbedder()
    out = {}
    for name, (injections, negatives) in SETS.items():
        items = set_passages(injections, negatives)
        dense = VectorIndex([mid for mid, _ in items], emb.encode_cached([t for _, t in items]), model=emb.model_name)
        hits = set(embedding_injections(items, dense, model=model))
        either = hits | {mid for mid, text in items if instruction_markers(text)}
        out[name] = {f"{kind}{by}": f"{sum(m.startswith(prefix) for m in found)} / {len(total)}"
                     for kind, prefix, total in (("injections", "inj-", injections), ("hard_negatives", "neg-", negatives))
                     for by, found in (("", hits), (" learned or rules", either))}
    if emb.encoded:
        emb.save()
    return {"weights": str(weights or MODEL_FILE), "learned_labels_by_set": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--weights", type=Path, action="append", help="an instruction_model.json (repeatable)")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--sets", action="store_true", help="also each labelled set as a small store of its own")
    args = ap.parse_args(argv)
    for weights in args.weights or [None]:
        print(json.dumps(small_store_flags(args.data, weights, args.size)))
        if args.sets:
            print(json.dumps(small_store_sets(weights)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
