"""bench/recall_bench.py --memories at a tiny size with the hashing embedder: real passages are
placed among the synthetic rows, each query set is scored on its own, an exhaustive setting finds
the exact top k in its pool, and a setting is chosen on the tune sets only."""

from __future__ import annotations

import argparse

import pytest

from bench import recall_bench
from bench.ledger_env import DEFAULT_DATA

pytest.importorskip("faiss")
pytest.importorskip("hnswlib")

pytestmark = pytest.mark.skipif(
    not (DEFAULT_DATA / "poisonedrag").is_dir() or not (DEFAULT_DATA / "locomo").is_dir(),
    reason=f"evaluation data not found under {DEFAULT_DATA} (never copied into the repo)",
)


def test_real_rows_among_synthetic_ones_scored_per_query_set_pool_and_final(tmp_path):
    from ledger.embeddings import HashingEmbedder

    args = argparse.Namespace(memories=3000, base=50, queries=8, k=5, workdir=str(tmp_path), data=DEFAULT_DATA,
                              real_subset=400, compare="product,hnsw:8:40,ivf:sqrt,hybrid:8:40:16/32:sqrt", ef="16,64",
                              nprobe="1,55", tune_sets="locomo,synthetic-even", target=0.98, build_threads="1,2")
    texts = recall_bench.real_texts(DEFAULT_DATA)
    qs = recall_bench.questions(DEFAULT_DATA)[:8]
    out = recall_bench.synthetic(args, texts, qs, enc=HashingEmbedder(dim=384))

    assert out["real_rows"] == 400 and sum(out["real_rows_by_source"].values()) == 400
    assert set(out["query_sets"]) == {"locomo", "nq", "strategyqa", "synthetic-even", "synthetic-odd"}
    assert out["query_sets"]["synthetic-odd"]["exact_cosine_top_in_real_rows"] == 0.0  # noisy seed copies
    assert out["exact_checked_by_search"] == 10  # _exact_top agrees with brute-force _search
    ivf = next(c for c in out["compared"] if c["spec"] == "ivf:55")
    assert set(ivf["build_seconds_by_threads"]) == {1, 2} and ivf["rows_indexed"] == 3000
    exhaustive = next(r for r in ivf["settings"] if r["nprobe"] == 55)
    assert all(s["pool_recall"] == 1.0 and s["final_recall"] == 1.0 for s in exhaustive["sets"].values())
    # Chosen on the tune sets alone: the smallest nprobe reaching the target on both of them.
    narrow = next(r for r in ivf["settings"] if r["nprobe"] == 1)
    tune_met = all(narrow["sets"][s]["pool_recall"] >= 0.98 for s in ("locomo", "synthetic-even"))
    assert ivf["chosen"] == {"nprobe": 1 if tune_met else 55}
    assert {c["index"] for c in out["compared"]} >= {"product (ledger.ann)", "hnsw M=8 efc=40", "ivf nlist=55"}

    again = recall_bench.synthetic(args, texts, qs, enc=HashingEmbedder(dim=384))  # vectors cached in the workdir
    assert again["query_sets"] == out["query_sets"]
    assert len(list(tmp_path.glob("real-subset-400-*.npy"))) == 1
