"""Embedding neighbourhoods for the ingest classifier (``ledger.classifier.Dense``).

numpy only, no Django: the bench and the ledger's classifier service build it from the same
vectors recall uses. Neighbours are computed once for every passage, in blocks, by brute force
over L2-normalised float32 rows (a dot product is the cosine).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BLOCK = 1024


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
        for start in range(0, n, BLOCK):
            sims = matrix[start:start + BLOCK] @ matrix.T
            rows = np.arange(len(sims))
            sims[rows, rows + start] = -np.inf  # a passage is not its own neighbour
            # only cosines at or above the floor can be neighbours: sort just those, per row
            # best first then by id, and keep each row's first ``limit``
            keep = sims >= floor
            if limit < n and np.count_nonzero(keep) > 4 * limit * len(sims):  # a low floor: cut at each
                kth = np.partition(sims, n - limit, axis=1)[:, n - limit:n - limit + 1]  # row's limit-th best,
                keep &= sims >= kth  # ties with it kept, so the cut is exact
            r, c = np.nonzero(keep)
            vals = sims[r, c]
            order = np.lexsort((rank[c], -vals, r))
            r, c, vals = r[order], c[order], vals[order]
            first = np.searchsorted(r, rows)
            top = (np.arange(len(r)) - first[r]) < limit
            r, c, vals = r[top], c[top], vals[top]
            bounds = np.searchsorted(r, np.arange(len(sims) + 1))
            ids = self.ids
            for i in range(len(sims)):
                lo, hi = bounds[i], bounds[i + 1]
                self._neighbours.append([(ids[j], round(float(v), 6)) for j, v in zip(c[lo:hi].tolist(),
                                                                                    vals[lo:hi].tolist(), strict=True)])

    def neighbours(self, memory_id: str) -> list[tuple[str, float]]:
        row = self._row.get(memory_id)
        return [] if row is None else self._neighbours[row]

    def cosine(self, a: str, b: str) -> float:
        return round(float(self._matrix[self._row[a]] @ self._matrix[self._row[b]]), 6)

    def vector(self, memory_id: str) -> list[float] | None:
        """The memory's unit embedding (the learned instruction detector scores it), or None."""
        row = self._row.get(memory_id)
        return None if row is None else self._matrix[row].tolist()
