"""``ledger.dense.DenseIndex``: each passage's top neighbours by cosine (at least the floor), best
first, ties by id, exactly as a full sort of every row would give them, whatever the ties."""

from __future__ import annotations

import numpy as np
import pytest

from ledger import dense
from ledger.dense import BLOCK, DenseIndex, round6


def _full_sort(ids, matrix, limit, floor):
    sims = np.vstack([matrix[s:s + BLOCK] @ matrix.T for s in range(0, len(ids), BLOCK)])  # same products
    out = []
    for i in range(len(ids)):
        row = sims[i].copy()
        row[i] = -np.inf
        best = sorted((j for j in range(len(ids)) if row[j] >= floor), key=lambda j: (-float(row[j]), ids[j]))
        out.append([(ids[j], round(float(row[j]), 6)) for j in best[:limit]])
    return out


@pytest.mark.parametrize("sample", [None, 50])  # 50: each row is cut at the best of 50 of its columns (issue 17)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize(("limit", "floor"), [(16, 0.5), (3, -1.0), (40, 0.0)])
def test_neighbours_are_a_full_sorts_best_first_ties_by_id(ties, limit, floor, sample, monkeypatch):
    if sample is not None:
        monkeypatch.setattr(dense, "SAMPLE", sample)
    rng = np.random.default_rng(7)
    n = BLOCK + 80  # two blocks
    # coarse vectors give many exact ties, also at each row's limit-th neighbour
    matrix = (rng.integers(0, 3, size=(n, 8)) + 0.01 if ties else rng.normal(size=(n, 16))).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = [f"m{rng.integers(0, 10**6):06d}-{i}" for i in range(n)]

    index = DenseIndex(ids, matrix, model="test", limit=limit, floor=floor)

    expected = _full_sort(ids, matrix, limit, floor)
    assert [index.neighbours(m) for m in ids] == expected
    assert any(expected)


def test_rounding_to_6_decimals_is_pythons_round_for_float32():
    rng = np.random.default_rng(11)
    vals = np.concatenate([rng.uniform(-1, 1, 200_000), np.arange(-256, 257) / 256,  # k / 2^m: exact ties
                           np.arange(-1_000, 1_000) / 2e6]).astype(np.float32)  # at the 7th decimal
    assert round6(vals).tolist() == [round(v, 6) for v in vals.tolist()]
