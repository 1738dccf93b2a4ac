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
        take = min(limit + 1, n)
        for start in range(0, n, BLOCK):
            sims = matrix[start:start + BLOCK] @ matrix.T
            rows = np.arange(len(sims))
            sims[rows, rows + start] = -np.inf  # a passage is not its own neighbour
            tops = np.argpartition(-sims, take - 1, axis=1)[:, :take] if take < n else np.tile(np.arange(n), (len(sims), 1))
            for row, top in zip(sims, tops, strict=True):
                # best first; ties by id so the order never depends on the platform's sort
                order = sorted(top.tolist(), key=lambda j: (-float(row[j]), self.ids[j]))
                self._neighbours.append([(self.ids[j], round(float(row[j]), 6)) for j in order[:limit]
                                         if float(row[j]) >= floor])

    def neighbours(self, memory_id: str) -> list[tuple[str, float]]:
        row = self._row.get(memory_id)
        return [] if row is None else self._neighbours[row]

    def cosine(self, a: str, b: str) -> float:
        return round(float(self._matrix[self._row[a]] @ self._matrix[self._row[b]]), 6)

    def vector(self, memory_id: str) -> list[float] | None:
        """The memory's unit embedding (the learned instruction detector scores it), or None."""
        row = self._row.get(memory_id)
        return None if row is None else self._matrix[row].tolist()
