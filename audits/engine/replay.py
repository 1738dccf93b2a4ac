"""Counterfactual replay: f(q, R(q, M \\ S)) with a cache (DESIGN section 4).

The cache key is (query hash, retrieved ids in order, agent config hash): two removal sets
that lead to the same retrieved list share one agent call. The cache is any mutable mapping
from str to a JSON-serialisable dict — a dict in process, a database table on the Django side.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Collection, Iterator, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .agents import Agent, AgentOutput
from .retriever import RetrievedMemory, Retriever


class BudgetExhausted(RuntimeError):
    """A replay needed an agent call past ``Replayer.limit`` (the audit's call budget); nothing
    was called. The stage that asked keeps what it had decided before (``audit.analyse``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the audit's budget of {limit} agent calls is spent")
        self.limit = limit


def replay_key(query: str, retrieved_ids: Sequence[str], agent_hash: str) -> str:
    qh = hashlib.sha256(query.encode("utf-8")).hexdigest()
    blob = "\x00".join([qh, "\x1f".join(retrieved_ids), agent_hash])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class ReplayOutcome:
    """One replay of ``Replayer.replay_many``: its retrieval, and the output or the error."""

    retrieved: list[RetrievedMemory]
    output: AgentOutput | None
    agent_call: bool  # this replay made the agent call (False: a cache hit, or a repeat in the batch)
    error: BaseException | None = None


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
        # The most agent calls (``calls``) this replayer may reach; None: no limit. A replay past
        # it raises ``BudgetExhausted`` before calling; cache hits are always answered.
        self.limit: int | None = None
        self._lock = threading.Lock()

    @contextmanager
    def holding(self, n: int) -> Iterator[None]:
        """Replays inside stop ``n`` calls short of ``limit``: kept for what must follow them
        (the residual harm of a stage's additions)."""
        if self.limit is None or n <= 0:
            yield
            return
        self.limit -= n
        try:
            yield
        finally:
            self.limit += n

    def replay(self, query: str, exclude: Collection[str] = (),
               candidates: Sequence[str] | None = None
               ) -> tuple[list[RetrievedMemory], AgentOutput]:
        retrieved = self.retriever.retrieve(query, self.top_k, exclude)
        return retrieved, self._answer(query, retrieved, [m.id for m in retrieved], candidates)

    def answer_alone(self, query: str, memory: RetrievedMemory,
                     candidates: Sequence[str] | None = None) -> AgentOutput:
        """f(q, {m}): the agent given this one memory (cached like any replay)."""
        return self.answer_alone_each([(query, memory, candidates)])[0]

    def _answer(self, query: str, memories: list[RetrievedMemory], key_ids: list[str],
                candidates: Sequence[str] | None) -> AgentOutput:
        """The agent's output for these memories, from the cache when ``key_ids`` were seen."""
        key = replay_key(query, key_ids + list(candidates or ()), self.agent_hash)
        hit = self.cache.get(key)
        if hit is not None:
            with self._lock:
                self.cache_hits += 1
            return AgentOutput.from_dict(hit)
        if self.limit is not None and self.calls >= self.limit:
            raise BudgetExhausted(self.limit)
        out = self.agent.answer(query, memories, candidates)
        with self._lock:
            self.calls += 1
        self.cache[key] = out.to_dict()
        return out

    def replay_each(self, requests: Sequence[tuple[str, Collection[str], Sequence[str] | None]]
                    ) -> list[tuple[list[RetrievedMemory], AgentOutput]]:
        """``replay`` for each request, the agent calls in flight together (``replay_iter``):
        (retrieved, output) per request, in order; the first replay's error is raised."""
        out = []
        for o in self.replay_many(requests):
            if o.error is not None:
                raise o.error
            out.append((o.retrieved, o.output))
        return out

    def replay_many(self, requests: Sequence[tuple[str, Collection[str], Sequence[str] | None]], *,
                    max_in_flight: int | None = None) -> list[ReplayOutcome]:
        return list(self.replay_iter(requests, max_in_flight=max_in_flight))

    def replay_iter(self, requests: Sequence[tuple[str, Collection[str], Sequence[str] | None]], *,
                    max_in_flight: int | None = None) -> Iterator[ReplayOutcome]:
        """``replay`` for each (query, exclude, candidates), with the agent calls in flight together.

        Yields in request order, each as soon as it and those before it are answered, so a
        caller records results as they come (a worker killed mid-batch loses only what it had
        not yet yielded; the cache keeps every answer it consumed). Results, order, cache entries
        and call/hit counts are those of calling ``replay`` on each in turn: the first replay of
        a key not cached is the call, later ones are hits. Only the agent calls run on the pool
        (at most ``max_in_flight``, by default the agent's own bound: 1 for the CPU-bound
        simulations, which then run lazily one by one exactly as before); retrieval and the
        cache stay on the calling thread, so a database-backed cache keeps the caller's
        connection. A failed call is yielded as that replay's ``error`` (and its repeats').
        """
        plans = []
        for query, exclude, candidates in requests:
            retrieved = self.retriever.retrieve(query, self.top_k, exclude)
            key = replay_key(query, [m.id for m in retrieved] + list(candidates or ()), self.agent_hash)
            plans.append((query, retrieved, candidates, key))
        return self._answer_iter(plans, max_in_flight)

    def answer_alone_each(self, requests: Sequence[tuple[str, RetrievedMemory, Sequence[str] | None]]
                          ) -> list[AgentOutput]:
        """``answer_alone`` for each (query, memory, candidates), the agent calls in flight
        together as in ``replay_each`` (the same cache keys, counts and budget); the first
        error is raised."""
        plans = [(query, [memory], candidates,
                  replay_key(query, [memory.id, "\x1ealone"] + list(candidates or ()), self.agent_hash))
                 for query, memory, candidates in requests]
        out = []
        for o in self._answer_iter(plans, None):
            if o.error is not None:
                raise o.error
            out.append(o.output)
        return out

    def _answer_iter(self, plans: list[tuple[str, list[RetrievedMemory], Sequence[str] | None, str]],
                     max_in_flight: int | None) -> Iterator[ReplayOutcome]:
        """The agent's output for each planned (query, memories shown, candidates, cache key), in
        order, the calls not cached in flight together (``replay_iter`` says how)."""
        limit = max(1, int(max_in_flight or getattr(self.agent, "max_in_flight", 1) or 1))
        cached: dict[str, AgentOutput] = {}
        todo: dict[str, tuple[str, list[RetrievedMemory], Sequence[str] | None]] = {}
        for query, retrieved, candidates, key in plans:
            if key in cached or key in todo:
                continue
            hit = self.cache.get(key)
            if hit is not None:
                cached[key] = AgentOutput.from_dict(hit)
            else:
                todo[key] = (query, retrieved, candidates)
        if self.limit is not None and self.calls + len(todo) > self.limit:
            raise BudgetExhausted(self.limit)  # all or none: no call of this batch is made

        def call(item: tuple[str, tuple]) -> tuple[str, AgentOutput | None, Exception | None]:
            key, (query, retrieved, candidates) = item
            try:
                return key, self.agent.answer(query, retrieved, candidates), None
            except Exception as exc:  # yielded with its replay
                return key, None, exc

        pool = ThreadPoolExecutor(max_workers=min(limit, len(todo)), thread_name_prefix="replay") \
            if limit > 1 and len(todo) > 1 else None
        # Both yield in submission order = the order each key first appears in the plans.
        answers = iter(pool.map(call, todo.items()) if pool is not None else map(call, todo.items()))
        done: dict[str, AgentOutput] = {}
        failed: dict[str, Exception] = {}
        try:
            for _query, retrieved, _candidates, key in plans:
                if key in todo and key not in done and key not in failed:
                    got, out, err = next(answers)
                    assert got == key
                    if err is not None:
                        failed[key] = err
                    else:
                        done[key] = out
                        self.cache[key] = out.to_dict()
                        with self._lock:
                            self.calls += 1
                        yield ReplayOutcome(retrieved, out, True)
                        continue
                if key in failed:
                    yield ReplayOutcome(retrieved, None, False, failed[key])
                    continue
                with self._lock:
                    self.cache_hits += 1
                yield ReplayOutcome(retrieved, done[key] if key in done else cached[key], False)
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
