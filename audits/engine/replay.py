"""Counterfactual replay: f(q, R(q, M \\ S)) with a cache (DESIGN section 4).

The cache key is (query hash, retrieved ids in order, agent config hash): two removal sets
that lead to the same retrieved list share one agent call. The cache is any mutable mapping
from str to a JSON-serialisable dict — a dict in process, a database table on the Django side.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Collection, MutableMapping, Sequence
from typing import Any

from .agents import Agent, AgentOutput
from .retriever import RetrievedMemory, Retriever


def replay_key(query: str, retrieved_ids: Sequence[str], agent_hash: str) -> str:
    qh = hashlib.sha256(query.encode("utf-8")).hexdigest()
    blob = "\x00".join([qh, "\x1f".join(retrieved_ids), agent_hash])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Replayer:
    """Retrieve over M \\ exclude, then ask the agent — or the cache — for the output."""

    def __init__(self, agent: Agent, retriever: Retriever, top_k: int,
                 cache: MutableMapping[str, Any] | None = None) -> None:
        self.agent = agent
        self.retriever = retriever
        self.top_k = top_k
        self.cache: MutableMapping[str, Any] = {} if cache is None else cache
        self.agent_hash = agent.config_hash()
        self.calls = 0
        self.cache_hits = 0
        self._lock = threading.Lock()

    def replay(self, query: str, exclude: Collection[str] = (),
               candidates: Sequence[str] | None = None
               ) -> tuple[list[RetrievedMemory], AgentOutput]:
        retrieved = self.retriever.retrieve(query, self.top_k, exclude)
        return retrieved, self._answer(query, retrieved, [m.id for m in retrieved], candidates)

    def answer_alone(self, query: str, memory: RetrievedMemory,
                     candidates: Sequence[str] | None = None) -> AgentOutput:
        """f(q, {m}): the agent given this one memory (cached like any replay)."""
        return self._answer(query, [memory], [memory.id, "\x1ealone"], candidates)

    def _answer(self, query: str, memories: list[RetrievedMemory], key_ids: list[str],
                candidates: Sequence[str] | None) -> AgentOutput:
        """The agent's output for these memories, from the cache when ``key_ids`` were seen."""
        key = replay_key(query, key_ids + list(candidates or ()), self.agent_hash)
        hit = self.cache.get(key)
        if hit is not None:
            with self._lock:
                self.cache_hits += 1
            return AgentOutput.from_dict(hit)
        out = self.agent.answer(query, memories, candidates)
        with self._lock:
            self.calls += 1
        self.cache[key] = out.to_dict()
        return out
