"""Approximate nearest neighbours for large stores (no Django import).

An HNSW graph (``hnswlib``, inner product over L2-normalised float32 rows, so the score is the
cosine) keyed by the memory's primary key. It only proposes candidates: recall re-scores them
exactly (cosine x live weight against the store's matrix), applies the projection (quarantine
states) and widens the candidate pool until it has k allowed results, so the graph never decides
what a receipt lists, only which rows are looked at.

Memories are append-only and a memory's content never changes, so a key's vector never changes
either: the graph grows by ``add`` (incremental; nothing is ever removed or replaced) and is
persisted to one file per store and model (``save``; written to a temporary name, then renamed).
``open`` reloads it and checks a sample of its vectors against the matrix it must describe (a
file left from another database, or from another model, is rebuilt rather than trusted).
"""

from __future__ import annotations

import os
import threading

import numpy as np

M = 16  # graph degree: recall@5 >= 0.98 at 200k (bench/recall_bench.py --ann-only)
EF_CONSTRUCTION = 100
EF_SEARCH = 128
SAMPLE = 32  # vectors compared with the matrix when a saved graph is reopened


def available() -> bool:
    try:
        import hnswlib  # noqa: F401  # local: optional library, probed
    except ImportError:
        return False
    return True


class AnnIndex:
    """One store's HNSW graph over (primary key, vector); safe to share between threads."""

    def __init__(self, dim: int, *, capacity: int = 1024, index=None) -> None:
        import hnswlib  # local: optional library, only stores over RECALL_ANN_MIN need it

        self.dim = dim
        if index is None:
            index = hnswlib.Index(space="ip", dim=dim)
            index.init_index(max_elements=max(capacity, 1024), ef_construction=EF_CONSTRUCTION, M=M)
        index.set_num_threads(1)
        self._index = index
        self._lock = threading.Lock()
        self._keys = np.sort(np.asarray(index.get_ids_list(), dtype=np.int64)) if index.get_current_count() else \
            np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._keys)

    def missing(self, pks: np.ndarray) -> np.ndarray:
        """Positions in ``pks`` whose key is not in the graph yet: a binary search of each in the
        sorted keys, O(k log n) for k keys (a few new rows after a ledger write cost microseconds)."""
        pks = np.asarray(pks, dtype=np.int64)
        keys = self._keys
        if not len(keys):
            return np.arange(len(pks))
        at = np.minimum(np.searchsorted(keys, pks), len(keys) - 1)
        return np.flatnonzero(keys[at] != pks)

    def add(self, pks: np.ndarray, vectors: np.ndarray, *, threads: int = 1) -> int:
        """Insert the rows whose key is absent; returns how many were inserted."""
        pks = np.asarray(pks, dtype=np.int64)
        todo = self.missing(pks)
        if not len(todo):
            return 0
        new, first = np.unique(pks[todo], return_index=True)  # a key given twice is inserted once
        todo = todo[first]
        with self._lock:
            need = len(self._keys) + len(todo)
            if need > self._index.get_max_elements():
                self._index.resize_index(max(need, 2 * self._index.get_max_elements()))
            self._index.add_items(np.ascontiguousarray(vectors[todo], dtype=np.float32), pks[todo],
                                  num_threads=threads)
            self._keys = np.insert(self._keys, np.searchsorted(self._keys, new), new)
        return len(todo)

    def search(self, q: np.ndarray, n: int, *, ef: int = EF_SEARCH) -> np.ndarray:
        """Keys of (about) the ``n`` nearest rows by cosine, nearest first."""
        n = min(n, len(self._keys))
        if n <= 0:
            return np.empty(0, dtype=np.int64)
        with self._lock:
            self._index.set_ef(max(ef, n))
            try:
                labels, _ = self._index.knn_query(np.asarray(q, dtype=np.float32).reshape(1, -1), k=n, num_threads=1)
            except RuntimeError:  # fewer than n reachable: the caller falls back to brute force
                return np.empty(0, dtype=np.int64)
        return labels[0].astype(np.int64)

    def save(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with self._lock:
            self._index.save_index(tmp)
        os.replace(tmp, path)

    @classmethod
    def open(cls, path: str, *, dim: int, pks: np.ndarray, matrix: np.ndarray) -> AnnIndex | None:
        """The graph saved at ``path`` if it describes these rows (a sample of its vectors equals
        the matrix's rows with the same key), else None."""
        import hnswlib  # local: optional library, only stores over RECALL_ANN_MIN need it

        if not os.path.exists(path):
            return None
        try:
            index = hnswlib.Index(space="ip", dim=dim)
            index.load_index(path)
        except (RuntimeError, OSError, ValueError):
            return None
        ann = cls(dim, index=index)
        return ann if ann.matches(pks, matrix) else None

    def matches(self, pks: np.ndarray, matrix: np.ndarray) -> bool:
        """Every key of the graph is among ``pks`` and a sample of its vectors equals those rows
        (a graph from a database that was reset, or from another model, does not)."""
        if not len(self._keys):
            return True
        known = np.flatnonzero(np.isin(pks, self._keys))
        if len(known) != len(self._keys):
            return False
        sample = np.random.default_rng(len(known)).choice(known, size=min(SAMPLE, len(known)), replace=False)
        with self._lock:
            saved = np.asarray(self._index.get_items(pks[sample].tolist()), dtype=np.float32)
        return saved.shape == matrix[sample].shape and bool(np.allclose(saved, matrix[sample], atol=1e-5))
