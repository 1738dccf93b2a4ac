"""The store's retriever, as replay sees it (DESIGN section 5).

score(m) = cos(q, m) × live weight(m), over the memories allowed: not quarantined (`blocked`)
and not removed in this replay (`exclude`). A removed memory is replaced by the next one, as in
the real agent. Embedding rows are L2-normalised, so cosine is a dot product.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from interchange.records import MemoryRecord


class QueryEncoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class RetrievedMemory:
    id: str
    text: str
    score: float
    rank: int
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


class Retriever:
    """Top-k retrieval over an in-memory matrix; argpartition keeps 100k memories fast."""

    def __init__(
        self,
        memories: Sequence[MemoryRecord],
        embeddings: np.ndarray,
        weights: Sequence[float] | np.ndarray | None = None,
        *,
        embedder: QueryEncoder | None = None,
        blocked: Collection[str] = (),
        query_cache_size: int = 4096,
    ) -> None:
        if len(memories) != len(embeddings):
            raise ValueError("memories and embeddings differ in length")
        self.memories = list(memories)
        self.ids = [m.id for m in self.memories]
        self.index = {mid: i for i, mid in enumerate(self.ids)}
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        w = np.ones(len(self.ids), dtype=np.float32) if weights is None else np.asarray(
            weights, dtype=np.float32)
        if w.shape != (len(self.ids),):
            raise ValueError("weights must have one value per memory")
        self.weights = w
        self.embedder = embedder
        self.blocked = frozenset(blocked)
        self._allowed = np.ones(len(self.ids), dtype=bool)
        for mid in blocked:
            if mid in self.index:
                self._allowed[self.index[mid]] = False
        self._qcache: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._qcache_size = query_cache_size

    def __len__(self) -> int:
        return len(self.ids)

    def query_vector(self, query: str) -> np.ndarray:
        if self.embedder is None:
            raise ValueError("this retriever has no embedder; pass a query vector")
        return np.asarray(self.embedder.encode([query])[0], dtype=np.float32)

    def scores(self, qvec: np.ndarray) -> np.ndarray:
        """Weighted cosine of every memory; blocked ones get -inf."""
        s = (self.embeddings @ np.asarray(qvec, dtype=np.float32)) * self.weights
        return np.where(self._allowed, s, -np.inf)

    def _ranked_prefix(self, query: str | np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices and scores of the `depth` best allowed memories, best first (cached per query)."""
        key = query if isinstance(query, str) else None
        if key is not None and key in self._qcache:
            idx, sc = self._qcache[key]
            if len(idx) >= depth or len(idx) == int(self._allowed.sum()):
                self._qcache.move_to_end(key)
                return idx, sc
        qvec = self.query_vector(query) if isinstance(query, str) else query
        s = self.scores(qvec)
        n_allowed = int(np.isfinite(s).sum())
        depth = min(max(depth, 1), n_allowed)
        if depth == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if depth < len(s):
            part = np.argpartition(-s, depth - 1)[:depth]
        else:
            part = np.arange(len(s))
        # Stable tie-break by store order, so equal scores rank the same on every run.
        order = np.lexsort((part, -s[part]))
        idx = part[order]
        idx = idx[np.isfinite(s[idx])]
        sc = s[idx]
        if key is not None:
            self._qcache[key] = (idx, sc)
            if len(self._qcache) > self._qcache_size:
                self._qcache.popitem(last=False)
        return idx, sc

    def retrieve(self, query: str | np.ndarray, k: int,
                 exclude: Collection[str] = ()) -> list[RetrievedMemory]:
        """Top-k allowed memories for a query (text or vector), skipping `exclude`."""
        excl = {self.index[e] for e in exclude if e in self.index}
        depth = k + len(excl)
        # Fetch a little deeper than needed so a growing exclude set reuses the cached prefix.
        idx, sc = self._ranked_prefix(query, max(depth, 2 * k))
        out: list[RetrievedMemory] = []
        for i, s in zip(idx.tolist(), sc.tolist()):
            if i in excl:
                continue
            m = self.memories[i]
            out.append(RetrievedMemory(m.id, m.text, float(s), len(out) + 1, m.metadata))
            if len(out) == k:
                break
        return out
