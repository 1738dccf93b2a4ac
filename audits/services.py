"""Write paths of the audit: incidents, audit runs on Celery, review proposals.

An audit run is executed in three steps, coordinated through the database (the embedded
broker has no result backend, so there are no chords):

1. ``audit_run_execute`` (queue ``audit``): load the store's embedding matrix, the events and
   their harm, find near-duplicate groups, plan every CMIS replay (``engine.cmis.plan_replays``)
   and record each as a ``ReplayJobRecord``; fan the pending ones out in chunks as
   ``audit_replay_task`` (queue ``replay``).
2. ``audit_run_replay`` (queue ``replay``): replay each job of a chunk that is still pending,
   through the per-store ``ReplayCacheEntry`` cache; write the result and bump the run's
   progress in one transaction, guarded by a conditional UPDATE (``pending -> done``), so a
   redelivered chunk never counts twice. The task that sees no job left pending moves the run
   ``replay -> analysis`` with another conditional UPDATE; only the one that wins enqueues step 3.
3. ``audit_run_analyse`` (queue ``audit``): the whole engine audit (``engine.audit.run_audit``)
   with the replay cache warm — every CMIS replay is a cache hit — then graph, CAS, fusion, the
   batch, residual harm and baselines; suspect rows are replaced atomically.

A run survives a worker being killed: calling ``audit_run_execute`` again (``audit_run_resume``)
skips what is recorded and fans out only the pending jobs; a re-audit of an unchanged store hits
the replay cache for every replay.

Review: proposing appends a signed ``poison_suspect`` label, a flag (on a four-eyes organization
the memory stays in recall until a second person approves; ``ledger.recall.excluded_states`` is
the one exclusion rule); approval appends ``poison_likely``, refutation ``poison_refuted``. Who
may decide is ``review_ineligibility``; a refuted memory is proposed again only on new evidence
(``selectors.proposal_blockers``). Decisions are claimed
with a conditional UPDATE ``open -> applying`` (a double click decides once) and the label is
appended by the housekeeper worker with an idempotency key (a redelivered task appends nothing
twice); ``proposal_sync`` marks the proposal decided once its label exists.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings as conf
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from audits import selectors
from audits.engine import scenario as sc
from audits.engine.agents import Agent, make_agent
from audits.engine.audit import AuditParams, run_audit
from audits.engine.cmis import (
    SIMULATION_CHUNK,
    AuditEvent,
    ReplayJob,
    events_from_incidents,
    find_groups,
    plan_replays,
    replay_chunk,
    run_replays,
)
from audits.engine.consistency import ConsistencyBackend, make_backend
from audits.engine.harm import Harm
from audits.engine.harm import make_harm as _make_harm
from audits.engine.replay import Replayer
from audits.engine.retriever import Retriever
from audits.models import (
    AuditRun,
    AuditSuspect,
    Incident,
    ReplayCacheEntry,
    ReplayJobRecord,
    ReviewProposal,
)
from ledger.models import EpistemicLabel, Memory, Store
from orgs.models import Membership, Organization
from orgs.notifications import notification_emit, site_url
from orgs.services import activity_record

logger = logging.getLogger(__name__)

REPLAY_CHUNK = SIMULATION_CHUNK  # replay jobs per Celery task for the simulations (HTTP agents: replay_chunk)
HARMFUL = 0.5
CONSISTENCY_BACKENDS = ("rules", "cross-encoder", "onnx-conflict")

DEFAULT_AUDIT_SETTINGS: dict[str, Any] = {
    "agent": {"connector": "builtin-vote", "top_k": 5},
    "alpha": 0.6,
    "harm": None,  # default harm spec for incidents without their own
    "budget": None,  # most replays (agent calls) the CMIS plan may need; None = no limit
    "top_n": None,  # batch = top-N suspects; None = every suspect with DS >= threshold
    "threshold": 0.7,
    "combine": "max",
    "consistency": "rules",
    "group_ablation": True,
    "group_thresholds": [0.9, 0.8],
    "baselines": True,
}


# ============================================================================ permissions


def _membership(*, user, organization: Organization) -> Membership:
    membership = Membership.objects.filter(user=user, organization=organization).first()
    if membership is None:
        raise PermissionDenied("You are not a member of this organization.")
    return membership


def _require(*, user, organization: Organization, capability: str) -> None:
    """Services enforce roles themselves, so the UI, the API and commands cannot differ."""
    if user is None:  # management commands and workers act as the operator
        return
    if getattr(user, "is_superuser", False) and not Membership.objects.filter(user=user).exists():
        return
    m = _membership(user=user, organization=organization)
    allowed = {"member": True, "propose": m.can_propose, "review": m.can_review, "admin": m.is_admin}[capability]
    if not allowed:
        raise PermissionDenied(f"Your role ({m.get_role_display()}) cannot do this.")


def actor_for(user) -> str:
    return f"user:{user.get_username()}" if user is not None else "system:memaudit"


# ============================================================================ incidents


def _line_of(data: bytes, incident_id: str) -> int | None:
    # The id as a JSON string, so an id that is a substring of another's text is not matched.
    return sc.first_line_containing(data, json.dumps(incident_id).encode("utf-8"))


def incidents_validate(*, store: Store, data: bytes, filename: str) -> list[sc.Incident]:
    """Parse an upload and check it against the store; raise ``engine.scenario.ValidationError``
    naming file, line and field for every problem (unknown memory ids, ids already used)."""
    limit = getattr(conf, "MAX_UPLOAD_BYTES", 50 * 1024 * 1024)
    if len(data) > limit:
        raise sc.ValidationError([sc.Issue(filename, None, None,
                                           f"file is {len(data):,} bytes, over the {limit:,}-byte upload limit")])
    incidents = sc.parse_incidents(data, filename)
    issues: list[sc.Issue] = []
    wanted = {m for inc in incidents for m in inc.retrieved}
    known: set[str] = set()
    wanted_list = list(wanted)
    for i in range(0, len(wanted_list), 500):
        known.update(Memory.objects.filter(store=store, external_id__in=wanted_list[i:i + 500])
                     .values_list("external_id", flat=True))
    existing = set(Incident.objects.filter(store=store, external_id__in=[inc.id for inc in incidents])
                   .values_list("external_id", flat=True))
    for inc in incidents:
        unknown = [m for m in inc.retrieved if m not in known]
        if unknown:
            more = f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""
            issues.append(sc.Issue(filename, _line_of(data, inc.id), "retrieved",
                                   f"unknown memory id(s) in store {store.name!r}: "
                                   f"{', '.join(map(repr, unknown[:5]))}{more}"))
        if inc.id in existing:
            issues.append(sc.Issue(filename, _line_of(data, inc.id), "id",
                                   f"incident {inc.id!r} already exists in this store"))
    if issues:
        raise sc.ValidationError(issues)
    return incidents


def incidents_import(*, store: Store, data: bytes, filename: str, user=None) -> list[Incident]:
    """Import incidents (JSONL or a JSON array, DESIGN section 5) all or nothing."""
    _require(user=user, organization=store.organization, capability="propose")
    parsed = incidents_validate(store=store, data=data, filename=filename)
    rows = [Incident(organization=store.organization, store=store, external_id=inc.id, query=inc.query,
                     output=inc.output, retrieved=list(inc.retrieved),
                     harm=inc.harm.to_dict() if inc.harm is not None else None,
                     harm_value=inc.harm_value if inc.harm is None else None,
                     candidates=list(inc.candidates) if inc.candidates else None,
                     created_by=user)
            for inc in parsed]
    try:
        with transaction.atomic():
            Incident.objects.bulk_create(rows, batch_size=500)
    except IntegrityError as exc:  # a concurrent upload took an id between validation and insert
        raise sc.ValidationError([sc.Issue(filename, None, "id", f"an incident id is already used: {exc}")]) from exc
    return list(Incident.objects.filter(store=store, external_id__in=[r.external_id for r in rows])
                .order_by("external_id"))


def incident_create(*, store: Store, query: str, output: str, retrieved: Sequence[str],
                    harm: dict[str, Any] | None = None, external_id: str | None = None, user=None) -> Incident:
    """One incident from a form; the same checks as an upload (field names in the errors)."""
    obj: dict[str, Any] = {"id": external_id or f"inc-{uuid.uuid4().hex[:10]}", "query": query,
                           "output": output, "retrieved": list(retrieved)}
    if harm is not None:
        obj["harm"] = harm
    data = (json.dumps(obj) + "\n").encode("utf-8")
    return incidents_import(store=store, data=data, filename="form", user=user)[0]


def _engine_incident(inc: Incident) -> sc.Incident:
    return sc.Incident(inc.external_id, inc.query, inc.output, list(inc.retrieved),
                       sc.HarmSpec.from_dict(inc.harm) if inc.harm else None,
                       inc.harm_value if not inc.harm else None,
                       list(inc.candidates) if inc.candidates else None)


# ============================================================================ settings


def audit_settings_clean(raw: dict[str, Any] | None, *, organization: Organization | None = None) -> dict[str, Any]:
    """Defaults filled in and every field checked; raise Django ``ValidationError`` by field.

    The agent is a built-in simulation, the deployment's LLM (``openai-chat``), or an endpoint
    the organization's admin registered (``{"endpoint": "<name>"}``); a URL, secret or
    environment variable from the analyst is refused (``audits.endpoints``)."""
    from audits.endpoints import agent_settings_clean

    raw = dict(raw or {})
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(raw) - set(DEFAULT_AUDIT_SETTINGS))
    if unknown:
        errors.setdefault("settings", []).append(f"unknown setting(s): {', '.join(unknown)}")
    s = {**json.loads(json.dumps(DEFAULT_AUDIT_SETTINGS)), **{k: v for k, v in raw.items() if k not in unknown}}

    agent = s["agent"]
    if not isinstance(agent, dict) or not (agent.get("connector") in sc.CONNECTORS or "endpoint" in agent):
        errors.setdefault("agent", []).append(f"an object with a connector, one of {', '.join(sc.CONNECTORS)}, "
                                              'or a registered endpoint: {"endpoint": "<name>"}')
    elif (agent := agent_settings_clean(dict(agent), organization=organization, errors=errors)) is not None:
        checked = agent
        if agent["connector"] == "openai-chat" and "endpoint_id" not in agent:
            agent.setdefault("base_url", conf.LLM_BASE_URL)  # the deployment's own LLM
        elif "endpoint_id" in agent:  # the URL is the endpoint's, never stored with the run
            checked = {**agent, "base_url": "endpoint", "url": "endpoint"}
        # The connector's own checks (top_k...), with the same messages as agent.json.
        try:
            sc.parse_agent_config(checked, filename="agent")
            s["agent"] = sc.AgentConfig.from_dict(agent).to_dict()
        except sc.ValidationError as exc:
            errors.setdefault("agent", []).extend(f"{i.field}: {i.message}" if i.field else i.message
                                                  for i in exc.issues)

    def number(key: str, lo: float, hi: float, *, integer: bool = False, nullable: bool = False) -> None:
        v = s[key]
        if v is None and nullable:
            return
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi
        if integer:
            ok = ok and float(v).is_integer()
        if not ok:
            kind = "an integer" if integer else "a number"
            errors.setdefault(key, []).append(f"{kind} between {lo:g} and {hi:g}" + (", or null" if nullable else ""))
        elif integer:
            s[key] = int(v)
        else:
            s[key] = float(v)

    number("alpha", 0.0, 1.0)
    number("threshold", 0.0, 1.0)
    number("budget", 1, 10_000_000, integer=True, nullable=True)
    number("top_n", 1, 100_000, integer=True, nullable=True)
    if s["combine"] not in ("max", "sum"):
        errors.setdefault("combine", []).append("'max' or 'sum'")
    if s["consistency"] not in CONSISTENCY_BACKENDS:
        errors.setdefault("consistency", []).append(f"one of {', '.join(CONSISTENCY_BACKENDS)}")
    for key in ("group_ablation", "baselines"):
        if not isinstance(s[key], bool):
            errors.setdefault(key, []).append("true or false")
    gt = s["group_thresholds"]
    if not isinstance(gt, list) or not gt or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= 1 for x in gt):
        errors.setdefault("group_thresholds", []).append("a non-empty list of numbers in (0, 1]")
    if isinstance(s["harm"], dict):
        for k in ("url", "base_url", "api_key", "api_key_env", "headers"):
            if k in s["harm"]:
                errors.setdefault("harm", []).append(
                    f"{k}: not accepted in audit settings; the llm-judge harm uses the deployment's LLM "
                    'or a registered openai-chat endpoint: {"endpoint": "<name>"}')
        judge = s["harm"].get("endpoint")
        if judge is not None and not (isinstance(judge, str) and organization is not None and
                                      organization.agent_endpoints.filter(name=judge, connector="openai-chat").exists()):
            errors.setdefault("harm", []).append(f"endpoint: no openai-chat agent endpoint named {judge!r} "
                                                 "in this organization")
    if s["harm"] is not None and not errors.get("harm"):
        try:
            s["harm"] = sc.parse_harm_spec(s["harm"], filename="settings").to_dict()
        except sc.ValidationError as exc:
            errors.setdefault("harm", []).extend(i.message for i in exc.issues)
    if errors:
        raise DjangoValidationError(errors)
    return s


# ============================================================================ runs


def audit_run_create(*, store: Store, incident_ids: Iterable[int], settings: dict[str, Any] | None = None,
                     user=None, enqueue: bool = True) -> AuditRun:
    """Validate, record and enqueue an audit of ``store`` against the given incidents.

    ``enqueue=False`` leaves it pending for ``audit_run_now`` (the ``audit`` command)."""
    _require(user=user, organization=store.organization, capability="propose")
    clean = audit_settings_clean(settings, organization=store.organization)
    ids = list(dict.fromkeys(int(i) for i in incident_ids))
    if not ids:
        raise DjangoValidationError({"incident_ids": ["choose at least one incident"]})
    incidents = list(Incident.objects.filter(pk__in=ids, store=store))
    if len(incidents) != len(ids):
        missing = sorted(set(ids) - {i.pk for i in incidents})
        raise DjangoValidationError({"incident_ids": [f"not incidents of this store: {missing}"]})
    if clean["harm"] is None:
        no_harm = [i.external_id for i in incidents if not i.harm and i.harm_value is None]
        if no_harm:
            raise DjangoValidationError({"harm": [f"incidents without a harm spec need a default harm: {no_harm[:5]}"]})
    with transaction.atomic():
        run = AuditRun.objects.create(organization=store.organization, store=store, settings=clean, created_by=user)
        run.incidents.set(incidents)
        if enqueue:
            transaction.on_commit(lambda: _enqueue_execute(run.pk))
    return run


def _enqueue_execute(run_id: int) -> None:
    from audits.tasks import audit_run_task

    audit_run_task.delay(run_id)


def audit_run_resume(*, audit_run_id: int, user=None) -> AuditRun:
    """Pick a stopped or failed run up where its records say it is (nothing is recomputed)."""
    run = AuditRun.objects.get(pk=audit_run_id)
    _require(user=user, organization=run.organization, capability="propose")
    if run.status == AuditRun.Status.DONE:
        return run
    AuditRun.objects.filter(pk=run.pk).exclude(status=AuditRun.Status.DONE).update(
        status=AuditRun.Status.PENDING, error="")
    _enqueue_execute(run.pk)
    run.refresh_from_db()
    return run


def audit_runs_resume_unfinished() -> int:
    """Re-drive every run still pending or running (a worker was killed, a broker lost its
    messages). Safe while another worker still holds some of its jobs: a job is recorded once
    (conditional UPDATE), the analysis starts once, and replays come from the cache."""
    ids = list(AuditRun.objects.filter(status__in=[AuditRun.Status.PENDING, AuditRun.Status.RUNNING])
               .values_list("pk", flat=True))
    for run_id in ids:
        _enqueue_execute(run_id)
    return len(ids)


def audit_run_fail(*, audit_run_id: int, error: str) -> None:
    AuditRun.objects.filter(pk=audit_run_id).exclude(status=AuditRun.Status.DONE).update(
        status=AuditRun.Status.FAILED, error=error[:5000], finished_at=timezone.now())
    _CONTEXTS.drop(audit_run_id)


# ---------------------------------------------------------------------------- store view


@dataclass
class StoreView:
    records: list[sc.MemoryRecord]
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
    from ledger.embedding_store import (
        embedder_for_store,
        embeddings_compute,
        store_index,
    )
    from ledger.recall import excluded_states

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
    records = [sc.MemoryRecord(ext, *texts[pk]) for pk, ext in zip(pks, index.external_ids)]
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
    from audits.endpoints import egress_policy

    return make_agent(config, egress=egress_policy(), max_in_flight=conf.AGENT_MAX_IN_FLIGHT)


def _consistency_backend(name: str) -> ConsistencyBackend:
    return make_backend(name)


@dataclass
class RunContext:
    run_id: int
    view: StoreView
    incidents: list[sc.Incident]
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


def _params(s: dict[str, Any]) -> AuditParams:
    return AuditParams(top_k=int(s["agent"].get("top_k", 5)), alpha=float(s["alpha"]), combine=s["combine"],
                       group_ablation=bool(s["group_ablation"]),
                       group_thresholds=tuple(float(x) for x in s["group_thresholds"]),
                       batch_threshold=float(s["threshold"]), top_n=s["top_n"], baselines=bool(s["baselines"]))


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


def _run_context(run: AuditRun) -> RunContext:
    from ledger.embedding_store import log_position

    key = (run.pk, run.created_at.isoformat(), log_position(run.organization_id))
    ctx = _CONTEXTS.get(key)
    if ctx is not None:
        return ctx
    s = run.settings
    view = store_view(run.store)
    incidents = [_engine_incident(i) for i in run.incidents.order_by("external_id")]
    from audits.endpoints import agent_config_resolve, egress_policy, judge_spec_resolve

    agent = agent_for(agent_config_resolve(s["agent"], organization=run.organization))
    policy = egress_policy()

    def make_harm(spec, *, embedder):  # the llm-judge harm speaks through the same egress policy
        d = spec.to_dict() if hasattr(spec, "to_dict") else dict(spec)
        if d.get("type") == "llm-judge":
            d = judge_spec_resolve(d, organization=run.organization)
        return _make_harm(d, embedder=embedder, egress=policy)

    default_harm = make_harm(s["harm"], embedder=view.embedder) if s["harm"] else None
    harms: dict[str, Harm] = {}

    def harm_for(inc: sc.Incident) -> Harm:
        if inc.harm is not None:
            k = json.dumps(inc.harm.to_dict(), sort_keys=True)
            if k not in harms:
                harms[k] = make_harm(inc.harm, embedder=view.embedder)
            return harms[k]
        if default_harm is not None:
            return default_harm
        if inc.harm_value is not None:
            # The observed harm is given; replays are judged against the observed output.
            k = "similarity-default"
            if k not in harms:
                harms[k] = make_harm({"type": "similarity"}, embedder=view.embedder)
            return harms[k]
        raise ValueError(f"incident {inc.id!r} has no harm spec and the run has no default harm")

    params = _params(s)
    retriever = Retriever(view.records, view.embeddings, view.weights, embedder=view.embedder, blocked=view.blocked)
    cache = DbReplayCache(run.store_id, agent.config_hash())
    replayer = Replayer(agent, retriever, params.top_k, cache)
    events = events_from_incidents(incidents, harm_for)
    ctx = RunContext(run.pk, view, incidents, agent, default_harm, harm_for, events, retriever, replayer, params)
    _CONTEXTS.put(key, ctx)
    return ctx


def _chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


# ---------------------------------------------------------------------------- step 1


def audit_run_execute(*, audit_run_id: int) -> None:
    """Step 1 (queue ``audit``): plan the replays and fan out the pending ones. Idempotent."""
    from audits.tasks import audit_analysis_task, audit_replay_task

    run = AuditRun.objects.select_related("store").get(pk=audit_run_id)
    if run.status == AuditRun.Status.DONE:
        return
    now = timezone.now()
    AuditRun.objects.filter(pk=run.pk).exclude(status=AuditRun.Status.DONE).update(
        status=AuditRun.Status.RUNNING, started_at=run.started_at or now, error="")
    run.refresh_from_db()
    try:
        if not run.jobs.exists():
            fingerprint = audit_run_fingerprint(run)
            AuditRun.objects.filter(pk=run.pk).update(stage=AuditRun.Stage.PREPARE, fingerprint=fingerprint)
            if _reuse_finished_analysis(run, fingerprint):
                return
            ctx = _run_context(run)
            p = ctx.params
            candidates = list(dict.fromkeys(m for ev in ctx.events for m in ev.retrieved
                                            if m in ctx.retriever.index))
            groups = find_groups(candidates, ctx.retriever, thresholds=p.group_thresholds) \
                if p.group_ablation else []
            jobs = plan_replays(ctx.events, groups, group_ablation=p.group_ablation)
            budget = run.settings.get("budget")
            if budget is not None and len(jobs) > budget:
                raise _AuditError(f"the CMIS plan needs {len(jobs)} replays, over the budget of {budget}; "
                                  "raise the budget or audit fewer incidents")
            with transaction.atomic():
                ReplayJobRecord.objects.bulk_create(
                    [ReplayJobRecord(run=run, job_id=j.job_id, event_id=j.event_id, kind=j.kind, target=j.target,
                                     removed=list(j.removed)) for j in jobs],
                    batch_size=500, ignore_conflicts=True)
                AuditRun.objects.filter(pk=run.pk).update(
                    replays_total=run.jobs.count(), replays_done=0, stage=AuditRun.Stage.REPLAY,
                    results={"groups": [{"id": g.id, "members": list(g.members), "threshold": g.threshold}
                                        for g in groups],
                             "memories": len(ctx.view.records), "quarantined": len(ctx.view.blocked)})
        elif run.stage in (AuditRun.Stage.QUEUED, AuditRun.Stage.PREPARE):
            AuditRun.objects.filter(pk=run.pk).update(stage=AuditRun.Stage.REPLAY)
    except _AuditError as exc:
        audit_run_fail(audit_run_id=run.pk, error=str(exc))
        return
    pending = list(run.jobs.filter(status=ReplayJobRecord.Status.PENDING).values_list("job_id", flat=True))
    if not pending:
        run.refresh_from_db()
        if run.stage == AuditRun.Stage.ANALYSIS:
            # Resuming a run whose analysis was lost with its worker: run it again (idempotent).
            audit_analysis_task.delay(run.pk)
        else:
            _maybe_start_analysis(run.pk)
        return
    http_agent = run.settings.get("agent", {}).get("connector") in ("openai-chat", "webhook")
    for chunk in _chunks(pending, replay_chunk(conf.AGENT_MAX_IN_FLIGHT) if http_agent else REPLAY_CHUNK):
        audit_replay_task.delay(run.pk, list(chunk))


# ---------------------------------------------------------------------------- analysis reuse

_ENGINE_DIGEST: str | None = None


def _engine_digest() -> str:
    """A digest of the engine's source, so a changed algorithm never reuses old results."""
    global _ENGINE_DIGEST
    if _ENGINE_DIGEST is None:
        from pathlib import Path

        import audits.engine

        h = hashlib.sha256()
        for path in sorted(Path(audits.engine.__file__).parent.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        _ENGINE_DIGEST = h.hexdigest()
    return _ENGINE_DIGEST


def audit_run_fingerprint(run: AuditRun) -> str:
    """1. the store's ledger state: the organization's log size (every genesis, weight change
    and label is a log leaf) and the store's signed-memory count; 2. the incidents' contents;
    3. the run's settings; 4. the engine's code. Equal fingerprints give equal analyses."""
    from ledger.models import LogLeaf

    log_size = LogLeaf.objects.filter(organization_id=run.organization_id).count()
    signed = Memory.objects.filter(store_id=run.store_id, chain_head__isnull=False).count()
    incidents = sorted(
        (i.external_id, i.query, i.output, list(i.retrieved), i.harm, i.harm_value, i.candidates)
        for i in run.incidents.all())
    payload = json.dumps({"store": run.store_id, "log": log_size, "signed": signed, "incidents": incidents,
                          "settings": run.settings, "engine": _engine_digest()}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def _reuse_finished_analysis(run: AuditRun, fingerprint: str) -> bool:
    """Copy the analysis of a finished run with the same fingerprint; True when it did."""
    source = (AuditRun.objects.filter(store_id=run.store_id, fingerprint=fingerprint, status=AuditRun.Status.DONE)
              .exclude(pk=run.pk).order_by("-finished_at").first())
    if source is None:
        return False
    t0 = time.perf_counter()
    results = dict(source.results)
    results["reused_from"] = source.pk
    results["agent_calls"] = 0
    results["timings"] = {**results.get("timings", {}), "reuse_wall": time.perf_counter() - t0}
    with transaction.atomic():
        if not AuditRun.objects.filter(pk=run.pk, status=AuditRun.Status.RUNNING).update(
                status=AuditRun.Status.DONE, stage=AuditRun.Stage.FINISHED, results=results,
                replays_total=source.replays_total, replays_done=source.replays_total, finished_at=timezone.now()):
            return True  # someone else finished it meanwhile
        AuditSuspect.objects.bulk_create([
            AuditSuspect(run=run, memory_id=s.memory_id, rank=s.rank, ds=s.ds, cmis=s.cmis,
                         cmis_ci_low=s.cmis_ci_low, cmis_ci_high=s.cmis_ci_high, cmis_hat=s.cmis_hat, cas=s.cas,
                         cas_hat=s.cas_hat, per_event=s.per_event, signals=s.signals, in_batch=s.in_batch)
            for s in source.suspects.all()], batch_size=500)
    notification_emit(organization_id=run.organization_id, event="audit.finished", payload=_finished_payload(run))
    return True


class _AuditError(Exception):
    """A problem with the run itself (budget, no memories): the run fails with this message."""


# ---------------------------------------------------------------------------- step 2


def audit_run_replay(*, audit_run_id: int, job_ids: Sequence[str]) -> int:
    """Step 2 (queue ``replay``): replay the chunk's pending jobs; return how many this call did."""
    run = AuditRun.objects.select_related("store").get(pk=audit_run_id)
    if run.status != AuditRun.Status.RUNNING:
        return 0
    records = list(run.jobs.filter(job_id__in=list(job_ids), status=ReplayJobRecord.Status.PENDING))
    done = 0
    if records:
        ctx = _run_context(run)
        jobs = [ReplayJob(rec.job_id, rec.event_id, rec.kind, rec.target, tuple(rec.removed)) for rec in records]
        # The chunk's agent calls are in flight together (bounded per endpoint by
        # AGENT_MAX_IN_FLIGHT); results are recorded here, in job order, on this connection.
        outcomes = run_replays(jobs, ctx.evmap, ctx.replayer)
        for rec, (result, agent_call, error) in zip(records, outcomes):
            if error is not None:
                raise error  # the replays recorded before it are kept; a resume goes on from there
            payload = {**result.to_dict(), "agent_call": agent_call}
            with transaction.atomic():
                n = ReplayJobRecord.objects.filter(pk=rec.pk, status=ReplayJobRecord.Status.PENDING).update(
                    status=ReplayJobRecord.Status.DONE, result=payload)
                if n == 1:
                    # Only the writer that moved the job to done counts it: never twice.
                    AuditRun.objects.filter(pk=run.pk).update(replays_done=F("replays_done") + 1)
                    done += 1
    _maybe_start_analysis(run.pk)
    return done


def _maybe_start_analysis(run_id: int) -> None:
    """Whoever sees no job left pending claims the analysis; exactly one claim succeeds."""
    from audits.tasks import audit_analysis_task

    if ReplayJobRecord.objects.filter(run_id=run_id, status=ReplayJobRecord.Status.PENDING).exists():
        return
    n = AuditRun.objects.filter(pk=run_id, status=AuditRun.Status.RUNNING, stage=AuditRun.Stage.REPLAY).update(
        stage=AuditRun.Stage.ANALYSIS)
    if n == 1:
        transaction.on_commit(lambda: audit_analysis_task.delay(run_id))


# ---------------------------------------------------------------------------- step 3


def audit_run_analyse(*, audit_run_id: int) -> None:
    """Step 3 (queue ``audit``): graph, CAS, fusion, batch, residual harm, baselines."""
    run = AuditRun.objects.select_related("store").get(pk=audit_run_id)
    if run.status != AuditRun.Status.RUNNING:
        return
    t0 = time.perf_counter()
    ctx = _run_context(run)
    if not ctx.view.records:
        audit_run_fail(audit_run_id=run.pk, error="the store has no signed memories to audit")
        return
    jobs = list(run.jobs.values_list("status", "result"))
    cmis_calls = sum(1 for st, r in jobs if st == ReplayJobRecord.Status.DONE and r and r.get("agent_call"))
    result = run_audit(ctx.view.records, ctx.view.embeddings, ctx.view.weights, ctx.incidents, ctx.agent,
                       ctx.harm_for, ctx.params, ctx.replayer.cache, embedder=ctx.view.embedder, blocked=ctx.view.blocked,
                       backend=_consistency_backend(run.settings["consistency"]), nli_cache=ctx.nli_cache)
    pks = ctx.view.pks
    batch = set(result.batch)
    suspects = [AuditSuspect(run=run, memory_id=pks[s.id], rank=s.rank, ds=s.ds, cmis=s.cmis,
                             cmis_ci_low=s.ci_low, cmis_ci_high=s.ci_high, cmis_hat=s.cmis_hat, cas=s.cas,
                             cas_hat=s.cas_hat, per_event=_jsonable(s.per_event), signals=_jsonable(s.signals),
                             in_batch=s.id in batch)
                for s in result.suspects if s.id in pks]
    data = result.to_dict()
    data.pop("suspects", None)
    data = _jsonable(data)
    # run_audit counts the agent calls it made; with the cache warm those are the residual and
    # baseline replays only. The CMIS replays were made (or found cached) in step 2.
    data["agent_calls"] = cmis_calls + result.agent_calls
    data["cmis_agent_calls"] = cmis_calls + result.cmis_agent_calls
    data["analysis_agent_calls"] = result.agent_calls
    data["memories"] = len(ctx.view.records)
    data["quarantined"] = len(ctx.view.blocked)
    data["batch_external_ids"] = list(result.batch)
    data["timings"]["analysis_wall"] = time.perf_counter() - t0
    if run.started_at:
        data["timings"]["run_wall"] = (timezone.now() - run.started_at).total_seconds()
    with transaction.atomic():
        locked = AuditRun.objects.select_for_update().filter(pk=run.pk, status=AuditRun.Status.RUNNING).first()
        if locked is None:
            return
        AuditSuspect.objects.filter(run=run).delete()
        AuditSuspect.objects.bulk_create(suspects, batch_size=500)
        AuditRun.objects.filter(pk=run.pk).update(
            status=AuditRun.Status.DONE, stage=AuditRun.Stage.FINISHED, results=data, finished_at=timezone.now(),
            replays_done=F("replays_total"))
        notification_emit(organization_id=run.organization_id, event="audit.finished", payload=_finished_payload(run))
    _CONTEXTS.drop(run.pk)


def _finished_payload(run: AuditRun) -> dict:
    """What a finished-audit notification says: ids and counts, never memory text."""
    return {"audit_run": run.pk, "store": run.store_id, "status": "done",
            "suspects": AuditSuspect.objects.filter(run=run).count(), "url": site_url(f"/audits/{run.pk}/")}


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=_json_default))


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (set, tuple)):
        return list(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "__dict__"):
        return o.__dict__
    return str(o)


def audit_run_now(*, audit_run_id: int) -> AuditRun:
    """Run all three steps in this process (commands, tests); the same code the workers run."""
    audit_run_execute(audit_run_id=audit_run_id)
    run = AuditRun.objects.get(pk=audit_run_id)
    if run.status == AuditRun.Status.RUNNING:
        pending = list(run.jobs.filter(status=ReplayJobRecord.Status.PENDING).values_list("job_id", flat=True))
        if pending:
            audit_run_replay(audit_run_id=audit_run_id, job_ids=pending)
        run.refresh_from_db()
        if run.status == AuditRun.Status.RUNNING:
            audit_run_analyse(audit_run_id=audit_run_id)
    run.refresh_from_db()
    return run


# ============================================================================ review


def _label_append_enqueue(*, proposal_id: int) -> None:
    """Ask the housekeeper worker (the only process holding signing keys) to sign the labels the
    proposal's recorded state calls for. The message names the proposal only: the housekeeper
    rebuilds the label from the row and re-checks who decided (``ledger.decisions``)."""
    from audits.tasks import proposals_sync_task
    from ledger.tasks import label_append_task

    # Once the housekeeper has signed, the linked sync marks the proposal decided, so nobody
    # has to open the review queue for it to leave "applying".
    label_append_task.apply_async(kwargs={"decision": f"proposal:{proposal_id}"}, link=proposals_sync_task.si())


def _label_for_key(*, memory_id: int, key: str) -> EpistemicLabel | None:
    # The key is also written into the signed evidence, so the label can be found from here
    # whatever the ledger keeps on the side.
    return EpistemicLabel.objects.filter(memory_id=memory_id, evidence__idempotency_key=key).order_by("seq").first()


class ProposedBatch(list):
    """The proposals a call created (a list, as before), and ``skipped``: {memory id: why not}."""

    def __init__(self, created: Iterable[ReviewProposal] = (), skipped: dict[int, str] | None = None) -> None:
        super().__init__(created)
        self.skipped: dict[int, str] = dict(skipped or {})


def proposals_create_from_run(*, audit_run: AuditRun, user, memory_ids: Iterable[int] | None = None,
                              reason: str = "") -> ProposedBatch:
    """Propose the run's batch (or the chosen suspects) for review; append ``poison_suspect``.

    Memories that ``proposal_blockers`` names are skipped; the answer's ``skipped`` says why.
    """
    _require(user=user, organization=audit_run.organization, capability="propose")
    if audit_run.status != AuditRun.Status.DONE:
        raise DjangoValidationError({"audit_run": ["the audit has not finished"]})
    suspects = audit_run.suspects.select_related("memory")
    # The engine's verdict per batch member (issue 16): only poison-like members are proposed
    # as poison_suspect by default; honest errors are left for an explicit choice.
    verdicts = (audit_run.results or {}).get("verdicts") or {}
    if memory_ids is None:
        suspects = suspects.filter(in_batch=True)
        honest = [ext for ext, v in verdicts.items() if v.get("verdict") == "honest-error"]
        if honest:
            suspects = suspects.exclude(memory__external_id__in=honest)
    else:
        wanted = {int(m) for m in memory_ids}
        suspects = suspects.filter(memory_id__in=wanted)
        found = set(suspects.values_list("memory_id", flat=True))
        if found != wanted:
            raise DjangoValidationError({"memory_ids": [f"not suspects of this run: {sorted(wanted - found)}"]})
    suspects = list(suspects)
    created: list[ReviewProposal] = []
    actor = actor_for(user)
    with transaction.atomic():
        # Decided under the lock of the memories' rows, so two clicks cannot both pass the checks.
        list(Memory.objects.select_for_update().filter(pk__in=[s.memory_id for s in suspects]).values_list("pk"))
        skipped = selectors.proposal_blockers(audit_run=audit_run, suspects=suspects)
        for s in suspects:
            if s.memory_id in skipped:
                continue
            scores = {"rank": s.rank, "ds": s.ds, "cmis": s.cmis, "cas": s.cas, "in_batch": s.in_batch}
            why = reason or (f"Audit #{audit_run.pk}: rank {s.rank}, DS {s.ds:.3f} "
                             f"(CMIS {s.cmis:.3f}, CAS {s.cas:.3f})")
            v = verdicts.get(s.memory.external_id)
            if v and not reason:
                why += f"; {v['verdict']}: " + "; ".join(v.get("reasons", [])[:3])
            p = ReviewProposal.objects.create(
                organization=audit_run.organization, store=audit_run.store, memory=s.memory,
                source=ReviewProposal.Source.AUDIT, audit_run=audit_run, reason=why, scores=scores,
                proposed_by=user, proposed_by_actor=actor, idempotency_key=f"proposal-{uuid.uuid4().hex}")
            created.append(p)

        def enqueue() -> None:
            from ledger.tasks import tree_head_after_labels_task

            for p in created:
                _label_append_enqueue(proposal_id=p.pk)
            if created:  # after the batch (one housekeeper worker, FIFO): a tree head covering its labels
                tree_head_after_labels_task.delay(audit_run.organization_id)
            for p in created:
                proposal_sync(proposal_id=p.pk)

        transaction.on_commit(enqueue)
    if created and audit_run.organization_id:
        activity_record(organization=audit_run.organization, verb="review.proposed", actor=user,
                        target=f"audit #{audit_run.pk}",
                        detail={"proposals": [p.pk for p in created], "skipped": len(skipped)})
    return ProposedBatch([ReviewProposal.objects.get(pk=p.pk) for p in created], skipped)


def _proposal_for(*, organization: Organization, proposal_id: int) -> ReviewProposal:
    # Another organization's proposal does not exist for this one (the views answer 404).
    return ReviewProposal.objects.select_related("store", "memory", "organization", "proposed_by").get(
        pk=proposal_id, organization=organization)


def review_ineligibility(*, proposal: ReviewProposal, user, decision: str,
                         membership: Membership | None = None) -> str | None:
    """Why ``user`` may not take ``decision`` on ``proposal`` under its organization's rules now
    (None: they may). The one place the four-eyes rules live; the queue and the decision use it.

    On a four-eyes organization (``Organization.four_eyes``, set by an org admin):
    - the proposer decides nothing on their own proposal;
    - an account the proposer brought in (``Membership.invited_by``) less than
      ``REVIEW_INVITE_COOLDOWN_HOURS`` ago cannot approve the proposer's proposal: an admin
      could otherwise approve through a sock puppet whose password they were shown.
    """
    organization = proposal.organization
    if user is None or not organization.four_eyes:
        return None
    if proposal.proposed_by_id is not None and proposal.proposed_by_id == user.pk:
        return "four-eyes: you proposed this, so another reviewer must decide it"
    if decision == ReviewProposal.Decision.APPROVE and proposal.proposed_by_id is not None:
        if membership is None:
            membership = Membership.objects.filter(organization=organization, user=user).first()
        hours = int(getattr(conf, "REVIEW_INVITE_COOLDOWN_HOURS", 72))
        if (membership is not None and membership.invited_by_id == proposal.proposed_by_id
                and membership.created_at > timezone.now() - timedelta(hours=hours)):
            proposer = proposal.proposed_by.get_username() if proposal.proposed_by else "the proposer"
            return (f"four-eyes: your account was invited by {proposer} less than {hours} hours ago, so you "
                    f"cannot approve {proposer}'s proposal; another reviewer must")
    return None


def _decide(*, organization: Organization, proposal_id: int, user, reason: str, decision: str) -> ReviewProposal:
    _require(user=user, organization=organization, capability="review")
    reason = (reason or "").strip()
    if not reason:
        raise DjangoValidationError({"reason": ["a reason is required"]})
    p = _proposal_for(organization=organization, proposal_id=proposal_id)
    blocked = review_ineligibility(proposal=p, user=user, decision=decision)
    if blocked:
        raise DjangoValidationError({"proposal": [blocked]})
    with transaction.atomic():
        n = ReviewProposal.objects.filter(pk=p.pk, status=ReviewProposal.Status.OPEN).update(
            status=ReviewProposal.Status.APPLYING, decision=decision, decided_by=user, decision_reason=reason,
            decided_at=timezone.now())
        if n != 1:
            # Someone (or a double click) got there first: the first decision stands.
            p.refresh_from_db()
            if p.decision == decision:
                return proposal_sync(proposal_id=p.pk)
            raise DjangoValidationError({"proposal": [f"already decided: {p.get_status_display().lower()}"]})
        p.refresh_from_db()
        activity_record(organization=organization, verb=f"review.{decision}", actor=user,
                        target=f"proposal #{p.pk}", detail={"memory": p.memory_id, "reason": reason[:500]})
        transaction.on_commit(lambda: _label_append_enqueue(proposal_id=p.pk))
    return proposal_sync(proposal_id=p.pk)


def proposal_approve(*, organization: Organization, proposal_id: int, user, reason: str) -> ReviewProposal:
    """Approve: the housekeeper appends a signed ``poison_likely``; the memory leaves recall."""
    return _decide(organization=organization, proposal_id=proposal_id, user=user, reason=reason,
                   decision=ReviewProposal.Decision.APPROVE)


def proposal_refute(*, organization: Organization, proposal_id: int, user, reason: str) -> ReviewProposal:
    """Refute: the housekeeper appends a signed ``poison_refuted``; the memory returns to recall."""
    return _decide(organization=organization, proposal_id=proposal_id, user=user, reason=reason,
                   decision=ReviewProposal.Decision.REFUTE)


def _bulk(fn, *, organization: Organization, proposal_ids: Iterable[int], user, reason: str) -> dict[str, Any]:
    done, skipped = [], []
    for pid in dict.fromkeys(int(i) for i in proposal_ids):
        try:
            done.append(fn(organization=organization, proposal_id=pid, user=user, reason=reason).pk)
        except ReviewProposal.DoesNotExist:
            skipped.append({"id": pid, "error": "not found"})
        except DjangoValidationError as exc:
            skipped.append({"id": pid, "error": "; ".join(exc.messages)})
    if done:  # queued after the batch's labels: a tree head that covers them
        from ledger.tasks import tree_head_after_labels_task

        transaction.on_commit(lambda: tree_head_after_labels_task.delay(organization.pk))
    return {"decided": done, "skipped": skipped}


def proposals_approve_bulk(*, organization: Organization, proposal_ids: Iterable[int], user,
                           reason: str) -> dict[str, Any]:
    """Approve each; returns ``{"decided": [ids], "skipped": [{"id", "error"}]}``. Permission
    and a missing reason fail the whole call; per-proposal problems only skip that one."""
    _require(user=user, organization=organization, capability="review")
    if not (reason or "").strip():
        raise DjangoValidationError({"reason": ["a reason is required"]})
    return _bulk(proposal_approve, organization=organization, proposal_ids=proposal_ids, user=user, reason=reason)


def proposals_refute_bulk(*, organization: Organization, proposal_ids: Iterable[int], user,
                          reason: str) -> dict[str, Any]:
    _require(user=user, organization=organization, capability="review")
    if not (reason or "").strip():
        raise DjangoValidationError({"reason": ["a reason is required"]})
    return _bulk(proposal_refute, organization=organization, proposal_ids=proposal_ids, user=user, reason=reason)


def proposal_sync(*, proposal_id: int) -> ReviewProposal:
    """Record labels the housekeeper has appended: the flag on an open proposal, the decision
    on an applying one (``applying -> approved/refuted``, once)."""
    p = ReviewProposal.objects.get(pk=proposal_id)
    if p.flag_label_id is None:
        flag = _label_for_key(memory_id=p.memory_id, key=p.flag_key)
        if flag is not None:
            ReviewProposal.objects.filter(pk=p.pk, flag_label__isnull=True).update(flag_label=flag)
    if p.status == ReviewProposal.Status.APPLYING:
        label = _label_for_key(memory_id=p.memory_id, key=p.decision_key)
        if label is not None:
            final = ReviewProposal.Status.APPROVED if p.decision == ReviewProposal.Decision.APPROVE else \
                ReviewProposal.Status.REFUTED
            ReviewProposal.objects.filter(pk=p.pk, status=ReviewProposal.Status.APPLYING).update(
                status=final, label=label)
    p.refresh_from_db()
    return p


def proposals_sync(*, organization: Organization | None = None) -> int:
    """Sync every proposal waiting on the housekeeper; return how many got decided."""
    qs = ReviewProposal.objects.filter(Q(status=ReviewProposal.Status.APPLYING) | Q(
        status=ReviewProposal.Status.OPEN, flag_label__isnull=True, source=ReviewProposal.Source.AUDIT))
    if organization is not None:
        qs = qs.filter(organization=organization)
    n = 0
    for pid, before in qs.values_list("pk", "status"):
        if proposal_sync(proposal_id=pid).status != before:
            n += 1
    return n


def proposals_requeue(*, organization: Organization | None = None) -> int:
    """Send again the labels of proposals still applying (a lost message, a purged queue).

    Safe to repeat: the idempotency key makes a second delivery append nothing."""
    qs = ReviewProposal.objects.filter(status=ReviewProposal.Status.APPLYING)
    if organization is not None:
        qs = qs.filter(organization=organization)
    n = 0
    for p in qs.select_related("decided_by"):
        _label_append_enqueue(proposal_id=p.pk)
        n += 1
    return n


def classifier_flags_sync(*, organization: Organization) -> int:
    """Bring the ingest classifier's ``poison_likely`` labels into the review queue.

    The classifier labels directly (the memory already left recall); the reviewer confirms
    (approve) or refutes. One proposal per flagged memory; returns how many were added.
    """
    flagged = (Memory.objects.filter(organization=organization, epistemic_state=EpistemicLabel.Label.LIKELY)
               .exclude(review_proposals__isnull=False).values_list("pk", "store_id"))
    added = 0
    for memory_id, store_id in flagged:
        last = EpistemicLabel.objects.filter(memory_id=memory_id).order_by("-seq").first()
        if last is None or last.actor.startswith("user:") or last.label != EpistemicLabel.Label.LIKELY:
            continue
        try:
            with transaction.atomic():
                ReviewProposal.objects.create(
                    organization=organization, store_id=store_id, memory_id=memory_id,
                    source=ReviewProposal.Source.CLASSIFIER, reason=last.reason, scores=last.evidence or {},
                    proposed_by=None, proposed_by_actor=last.actor, flag_label=last,
                    idempotency_key=f"classifier-{last.pk}")
            added += 1
        except IntegrityError:  # a concurrent sync added it
            continue
    return added
