"""Embedding neighbourhoods for the ingest classifier (``ledger.classifier.Dense``).

numpy only, no Django: the bench and the ledger's classifier service build it from the same
vectors recall uses. Neighbours are computed once for every passage, in blocks, by brute force
over L2-normalised float32 rows (a dot product is the cosine).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BLOCK = 1024
SAMPLE = 2048  # columns whose best cosines bound a row's neighbours from below


def round6(vals: np.ndarray) -> np.ndarray:
    """float32 values rounded to 6 decimals as Python's ``round(float(v), 6)`` rounds them: a
    float32 has 24 significant bits, so ``v * 1e6`` is exact in float64, ``rint`` rounds it
    exactly (half to even, as ``round`` does on an exact tie) and the division is correctly
    rounded: the nearest double to the same decimal."""
    return np.rint(vals.astype(np.float64) * 1e6) / 1e6


def _ordered_bits(vals: np.ndarray) -> np.ndarray:
    """float32 values as int64 keys in the same order (-0.0 taken as 0.0, which it equals)."""
    bits = (vals + np.float32(0)).view(np.int32).astype(np.int64)
    return np.where(bits >= 0, bits + 0x80000000, ~bits & 0xFFFFFFFF)


class DenseIndex:
    """Top-``limit`` neighbours (cosine >= ``floor``) of every passage, best first."""

    def __init__(self, ids: Sequence[str], matrix: np.ndarray, *, model: str, limit: int = 16,
                 floor: float = 0.5) -> None:
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids):
            raise ValueError(f"{len(ids)} ids but a matrix of shape {matrix.shape}")
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate passage id")
        self.model = model
        self.ids = list(ids)
        self._row = {m: i for i, m in enumerate(self.ids)}
        self._matrix = matrix
        self._neighbours: list[list[tuple[str, float]]] = []
        n = len(self.ids)
        # an id's rank among the sorted ids breaks ties, so the order never depends on the
        # platform's sort (numpy's lexsort is stable and exact on these keys)
        rank = np.empty(n, dtype=np.int64)
        rank[sorted(range(n), key=self.ids.__getitem__)] = np.arange(n)
        ids = self.ids
        sample = min(n, max(SAMPLE, limit))
        for start in range(0, n, BLOCK):
            sims = matrix[start:start + BLOCK] @ matrix.T
            rows = np.arange(len(sims))
            sims[rows, rows + start] = -np.inf  # a passage is not its own neighbour
            # A row's neighbours are its cosines at or above the floor, best first then by id,
            # the first ``limit`` of them. The ``limit``-th best of any subset of the row's
            # columns is at most the row's own ``limit``-th best, so cutting at it (and at the
            # floor) drops only cosines a full sort would have put after the first ``limit``:
            # the same neighbours, ties included, while sorting ~``limit * n / sample`` a row.
            cut = np.full((len(sims), 1), floor, dtype=sims.dtype)
            if limit <= sample:
                bound = np.partition(sims[:, :sample], sample - limit, axis=1)[:, sample - limit:sample - limit + 1]
                np.maximum(cut, bound, out=cut)
            r, c = np.divmod(np.flatnonzero(sims >= cut), n)
            vals = sims[r, c]
            if n < 1 << 20:  # one int64 key (row, cosine descending, id rank): a sort, not a lexsort
                order = np.argsort((r << 52) | ((0xFFFFFFFF - _ordered_bits(vals)) << 20) | rank[c], kind="stable")
            else:
                order = np.lexsort((rank[c], -vals, r))
            r, c, vals = r[order], c[order], vals[order]
            first = np.searchsorted(r, rows)
            top = (np.arange(len(r)) - first[r]) < limit
            c, vals = c[top], vals[top]
            bounds = np.searchsorted(r[top], np.arange(len(sims) + 1)).tolist()
            pairs = list(zip(map(ids.__getitem__, c.tolist()), round6(vals).tolist(), strict=True))
            self._neighbours.extend(pairs[bounds[i]:bounds[i + 1]] for i in range(len(sims)))

    def neighbours(self, memory_id: str) -> list[tuple[str, float]]:
        row = self._row.get(memory_id)
        return [] if row is None else self._neighbours[row]

    def cosine(self, a: str, b: str) -> float:
        return round(float(self._matrix[self._row[a]] @ self._matrix[self._row[b]]), 6)

    def vector(self, memory_id: str) -> list[float] | None:
        """The memory's unit embedding (the learned instruction detector scores it), or None."""
        row = self._row.get(memory_id)
        return None if row is None else self._matrix[row].tolist()
