"""What the replays of a run need: the store as its agent sees it, the per-store replay cache,
the agent connector, and the per-process run context that holds them between a run's steps."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings as conf

from audits.endpoints import agent_config_resolve, egress_policy, judge_spec_resolve
from audits.engine.agents import Agent, make_agent
from audits.engine.audit import AuditParams, harm_resolver
from audits.engine.cmis import AuditEvent, events_from_incidents
from audits.engine.harm import Harm, make_harm
from audits.engine.replay import Replayer
from audits.engine.retriever import Retriever
from audits.engine.scenario import IncidentCase
from audits.models import AuditRun, ReplayCacheEntry
from audits.services.incidents import engine_incident
from interchange.records import MemoryRecord
from ledger.embedding_store import embedder_for_store, embeddings_compute, log_position, store_index
from ledger.models import Memory, Store
from ledger.recall import excluded_states


@dataclass
class StoreView:
    records: list[MemoryRecord]
    embeddings: np.ndarray
    weights: np.ndarray
    pks: dict[str, int]
    blocked: set[str]
    embedder: Any
    position: int


def store_view(store: Store) -> StoreView:
    """The store as its agent retrieves from it: signed memories, embeddings by content hash,
    live weights; quarantined ones blocked (``ledger.recall.excluded_states``).
    """
    embedder = embedder_for_store(store)
    index = store_index(store, embedder=embedder)
    if index.missing:
        # Signed but not yet embedded (no worker ran the embedding step): embed them here.
        embeddings_compute(memories=Memory.objects.filter(store=store, chain_head__isnull=False)
                           .select_related("store"), embedder=embedder)
        index = store_index(store, embedder=embedder)
    texts: dict[int, tuple[str, dict]] = {}
    pks = index.pks.tolist()
    for i in range(0, len(pks), 2000):
        for pk, text, meta in Memory.objects.filter(pk__in=pks[i:i + 2000]).values_list("pk", "text", "metadata"):
            texts[pk] = (text, meta or {})
    records = [MemoryRecord(ext, *texts[pk]) for pk, ext in zip(pks, index.external_ids)]
    excluded = excluded_states(store)  # the same rule recall applies
    blocked = {ext for ext, st in zip(index.external_ids, index.states) if st in excluded}
    return StoreView(records, index.matrix, index.weights, dict(zip(index.external_ids, pks)), blocked, embedder,
                     index.log_position)


# ---------------------------------------------------------------------------- replay cache


class DbReplayCache(MutableMapping):
    """``engine.replay.Replayer``'s cache backed by ``ReplayCacheEntry`` rows of one store.

    Reads go to an in-process layer first, preloaded with the store's entries for this agent.
    """

    def __init__(self, store_id: int, agent_hash: str, *, preload: bool = True) -> None:
        self.store_id = store_id
        self.agent_hash = agent_hash
        self.local: dict[str, dict] = {}
        self._lock = threading.Lock()
        if preload:
            for key, text, samples in ReplayCacheEntry.objects.filter(
                    store_id=store_id, agent_hash=agent_hash).values_list("key", "text", "samples").iterator():
                self.local[key] = {"text": text, "samples": samples or [text]}

    def __getitem__(self, key: str) -> dict:
        hit = self.local.get(key)
        if hit is not None:
            return hit
        row = ReplayCacheEntry.objects.filter(store_id=self.store_id, key=key).first()
        if row is None:
            raise KeyError(key)
        out = row.to_output()
        self.local[key] = out
        return out

    def __setitem__(self, key: str, value: dict) -> None:
        self.local[key] = value
        ReplayCacheEntry.objects.bulk_create(
            [ReplayCacheEntry(store_id=self.store_id, key=key, agent_hash=self.agent_hash,
                              text=value.get("text", ""), samples=list(value.get("samples") or []))],
            ignore_conflicts=True)  # another worker replayed the same thing first: same answer

    def __delitem__(self, key: str) -> None:
        raise TypeError("replay cache entries are never deleted by an audit")

    def __iter__(self) -> Iterator[str]:
        return iter(self.local)

    def __len__(self) -> int:
        return len(self.local)


# ---------------------------------------------------------------------------- run context


def agent_for(config: dict[str, Any]) -> Agent:
    """The one place an agent connector is built (tests wrap it to count calls), under the
    deployment's egress policy; ``config`` is resolved (``endpoints.agent_config_resolve``)."""
    return make_agent(config, egress=egress_policy(), max_in_flight=conf.AGENT_MAX_IN_FLIGHT)


@dataclass
class RunContext:
    run_id: int
    view: StoreView
    incidents: list[IncidentCase]
    agent: Agent
    default_harm: Harm | None
    harm_for: Any
    events: list[AuditEvent]
    retriever: Retriever
    replayer: Replayer
    params: AuditParams
    nli_cache: dict = field(default_factory=dict)

    @property
    def evmap(self) -> dict[str, AuditEvent]:
        return {ev.id: ev for ev in self.events}


def audit_params(s: dict[str, Any]) -> AuditParams:
    return AuditParams(top_k=int(s["agent"].get("top_k", 5)), alpha=float(s["alpha"]),
                       fit_alpha=bool(s.get("fit_alpha", True)), combine=s["combine"],
                       group_ablation=bool(s["group_ablation"]),
                       group_thresholds=tuple(float(x) for x in s["group_thresholds"]),
                       batch_threshold=float(s["threshold"]), top_n=s["top_n"], baselines=bool(s["baselines"]),
                       max_calls=s.get("budget"))


class _ContextCache:
    """Per-process contexts, so the chunks of one run a worker takes build the retriever once."""

    def __init__(self, size: int = 4) -> None:
        self.items: OrderedDict[tuple, RunContext] = OrderedDict()
        self.size = size
        self.lock = threading.Lock()

    def get(self, key: tuple) -> RunContext | None:
        with self.lock:
            ctx = self.items.get(key)
            if ctx is not None:
                self.items.move_to_end(key)
            return ctx

    def put(self, key: tuple, ctx: RunContext) -> None:
        with self.lock:
            self.items[key] = ctx
            while len(self.items) > self.size:
                self.items.popitem(last=False)

    def drop(self, run_id: int) -> None:
        with self.lock:
            for k in [k for k in self.items if k[0] == run_id]:
                del self.items[k]


_CONTEXTS = _ContextCache()


def run_context(run: AuditRun) -> RunContext:
    """The run's context, built once per process (per run, creation time and ledger position)."""
    key = (run.pk, run.created_at.isoformat(), log_position(run.organization_id))
    ctx = _CONTEXTS.get(key)
    if ctx is not None:
        return ctx
    s = run.settings
    view = store_view(run.store)
    incidents = [engine_incident(i) for i in run.incidents.order_by("external_id")]
    agent = agent_for(agent_config_resolve(s["agent"], organization=run.organization))
    policy = egress_policy()

    def harm_of(spec, *, embedder):  # the llm-judge harm speaks through the same egress policy
        d = spec.to_dict() if hasattr(spec, "to_dict") else dict(spec)
        if d.get("type") == "llm-judge":
            d = judge_spec_resolve(d, organization=run.organization)
        return make_harm(d, embedder=embedder, egress=policy)

    default_harm = harm_of(s["harm"], embedder=view.embedder) if s["harm"] else None
    # An incident with only an observed harm value: replays are judged against the observed output.
    harm_for = harm_resolver(lambda d: harm_of(d, embedder=view.embedder), default=default_harm,
                             observed={"type": "similarity"})

    params = audit_params(s)
    retriever = Retriever(view.records, view.embeddings, view.weights, embedder=view.embedder, blocked=view.blocked)
    cache = DbReplayCache(run.store_id, agent.config_hash())
    replayer = Replayer(agent, retriever, params.top_k, cache)
    events = events_from_incidents(incidents, harm_for)
    ctx = RunContext(run.pk, view, incidents, agent, default_harm, harm_for, events, retriever, replayer, params)
    _CONTEXTS.put(key, ctx)
    return ctx


