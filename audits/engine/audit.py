"""In-process orchestration of one audit (MemAudit, DESIGN section 4).

1. Events from the incidents (reference harm h(q*, y*)).
2. CMIS: near-duplicate groups, the replay plan, every replay, combination.
3. MCG over the scope (candidates and group members, plus neighbours) and CAS.
4. Fusion into DS, one batch decided after all events, residual-harm verification; the
   conditional rounds, the pattern expansion and peeling (`_peel`: an incident's harm-carrying
   records taken out layer by layer where more planted copies than one retrieval holds refill
   it); then (issue 16) the format-free reach (`reach.reach`), a poison/honest-error verdict per
   batch member (`verdict.judge`), the collateral check over clean questions synthesised from
   non-suspect memories, and how much CAS moved the ranking (`signal_influence`) — reported,
   additive fields of `AuditResult`.
5. Baselines removing as many memories, each with its own residual harm.

The Django/Celery layer runs the same pieces distributed (`cmis.plan_replays` fan-out,
`cmis.combine_cmis`, `graph.compute_cas`, `fusion.*`); this module only wires them.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from interchange.records import MemoryRecord

from .agents import Agent
from .baselines import run_baselines
from .cmis import (
    AuditEvent,
    CmisScore,
    Group,
    ReplayJob,
    ReplayResult,
    combine_cmis,
    events_from_incidents,
    find_groups,
    plan_replays,
    replay_all,
    run_replays,
)
from .consistency import CachedBackend, ConsistencyBackend, RulesBackend
from .expansion import (
    answer_slot,
    answered_otherwise,
    content_meets_harm,
    expand_batch,
    harmful_alone,
    record_query,
    records_on,
    text_asserts,
)
from .fusion import Suspect, auc, decide_batch, fit_alpha, fuse, residual_harm
from .graph import MemoryGraph, build_graph, compute_cas, graph_for_plot
from .harm import Harm, HarmSpec, make_harm
from .reach import answer_units, carries_answer, claim_spans, mentions, same_answer, says_nothing, slot_given
from .reach import reach as format_free_reach
from .replay import BudgetExhausted, Replayer
from .retriever import QueryEncoder, Retriever
from .scenario import IncidentCase
from .verdict import HONEST_ERROR, POISON_LIKE, bridge_said, judge
from .words import occurrences, same_question, stated_question

ProgressCb = Callable[[str, int, int], None]


@dataclass
class AuditParams:
    top_k: int = 5
    alpha: float = 0.6  # the paper's fusion weight; with fit_alpha, the most CAS can get
    fit_alpha: bool = True  # fit α per store from its own evidence (fusion.fit_alpha)
    combine: str = "max"
    group_ablation: bool = True
    group_thresholds: tuple[float, ...] = (0.9, 0.8)
    knn_k: int = 10
    tau: float = 0.3
    dup_threshold: float = 0.8
    signal_weights: dict[str, float] | None = None
    full_store_graph: bool = False
    batch_threshold: float = 0.7
    top_n: int | None = None
    residual_rounds: int = 3
    conditional_rounds: int = 2
    # Peeling (`_peel`): for an incident still harmful, the harm-carrying records it retrieves are
    # taken out layer by layer, at most this many layers (0 turns it off).
    peel_layers: int = 6
    # Pattern expansion (engine/expansion.py): rounds (0 turns it off), the answer-slot
    # agreement a record needs with a confirmed poison, the shortest answer that is a pattern.
    expansion_rounds: int = 4
    expansion_agreement: float = 0.6
    expansion_min_tokens: int = 3
    expansion_dormant: bool = True
    # Harm reach (expansion step 2b): records whose content meets a seed's harm, nearer the
    # seeds than a random clean sample on some feature; any answer shape, no metadata needed.
    expansion_harm_reach: bool = True
    group_credit_filter: bool = True
    baselines: bool = True
    baseline_residual: bool = True
    seed: int = 0
    # Issue 16: a poison/honest-error verdict per batch member, the collateral check (clean
    # questions synthesised from non-suspect memories, replayed with and without the batch;
    # 0 turns it off) and the per-run report of how much CAS moved the ranking.
    verdicts: bool = True
    collateral_questions: int = 20
    # Format-free reach (engine/reach.py): from poison-like seeds to unobserved poisons by shape
    # and replay; at most `reach_candidates` a pass that cost agent calls, `reach_support` records must carry the
    # store's answer once a candidate's group is out. 0 candidates turns it off.
    reach_candidates: int = 60
    reach_support: int = 2
    # Cosines (MiniLM scale; set on TUNE sqa-plain-distinct, see reach.py): a planted copy is at
    # least `copy_cos` near the record it copies; a supporter at least `support_cos` near the query.
    copy_cos: float = 0.7
    support_cos: float = 0.4
    # The most agent calls the whole audit may make, CMIS replays included; None: `call_budget`'s
    # default for its number of incidents. See `_Budget` for what is cut, in which order.
    max_calls: int | None = None


# Issue 16: an audit of 5 incidents stays within 600 agent calls (about 10 minutes at 1 s a call on
# a local model); more incidents get more, in proportion.
MIN_CALL_BUDGET = 600
CALLS_PER_INCIDENT = 120


def call_budget(n_incidents: int, explicit: int | None = None) -> int:
    """The most agent calls an audit of ``n_incidents`` may make: ``explicit`` (the analyst's
    setting) when given, else max(600, 120 per incident)."""
    return int(explicit) if explicit is not None else max(MIN_CALL_BUDGET, CALLS_PER_INCIDENT * n_incidents)


class _Budget:
    """The audit's agent calls by stage, and its call budget on the replayer.

    The CMIS plan (checked against the budget before it runs, by the caller) and the first
    residual (the batch decision) are never cut. From then on every replay counts against the
    budget: the exploratory stages (conditional rounds, pattern expansion, joined copies, the
    reach) stop ``reserve`` calls short of it, so that the collateral check of the batch still
    runs; the baselines' residuals come last. Out of calls, a conditional or expansion round,
    or a reach candidate, is left unfinished and adds nothing; the rounds and groups finished
    before it stand, and each stage holds back the calls its own residual needs
    (``Replayer.holding``). A stage is named in ``cut`` when the budget stopped it; one that
    ran out anyway (``BudgetExhausted`` reaching ``run``) is dropped whole, the batch, residual
    and ranking it started from kept."""

    def __init__(self, replayer: Replayer, *, limit: int, spent: int, base: int) -> None:
        self.replayer = replayer
        self.limit = limit
        self.spent = spent  # calls made before `base` elsewhere (the workers' CMIS replays)
        self.base = base  # replayer.calls when this audit's first call on it was not yet made
        self.by_stage: dict[str, int] = {}
        self.cut: list[str] = []

    def used(self) -> int:
        return self.spent + self.replayer.calls - self.base

    def run(self, stage: str, fn: Callable[[], Any], *, ranked: list[Suspect] | None = None,
            reserve: int = 0, enforce: bool = True) -> Any:
        """``fn()`` with its calls counted under ``stage``, never closer than ``reserve`` to the
        budget (``enforce=False``: not limited). None when the budget stopped it (``ranked``,
        which the stage may change in place, is then restored)."""
        r = self.replayer
        c0 = r.calls
        if enforce:
            r.limit = self.base - self.spent + self.limit - reserve
        snapshot = copy.deepcopy(ranked) if ranked is not None and enforce else None
        try:
            return fn()
        except BudgetExhausted:
            if ranked is not None and snapshot is not None:
                ranked[:] = snapshot
            self.cut.append(stage)
            return None
        finally:
            r.limit = None
            self.by_stage[stage] = self.by_stage.get(stage, 0) + r.calls - c0

    def report(self) -> dict[str, Any]:
        return {"limit": self.limit, "used": self.used(), "by_stage": dict(self.by_stage),
                "cut": list(dict.fromkeys(self.cut))}


@dataclass
class AuditResult:
    suspects: list[Suspect]
    batch: list[str]
    residual: dict[str, Any]
    residual_rounds: list[dict[str, Any]]
    baselines: dict[str, dict[str, Any]]
    graph: dict[str, Any]
    groups: list[Group]
    events: list[dict[str, Any]]
    agent_calls: int
    cmis_agent_calls: int
    replays: int
    timings: dict[str, float] = field(default_factory=dict)
    cmis: dict[str, CmisScore] = field(default_factory=dict)
    cas: dict[str, float] = field(default_factory=dict)
    # Additive (issue 16): verdicts per batch member, the collateral check, CAS influence.
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    collateral: dict[str, Any] = field(default_factory=dict)
    signal_influence: dict[str, Any] = field(default_factory=dict)
    # Honest errors as proposed corrections (issue 16): not `poison_suspect`; see `corrections`.
    corrections: list[dict[str, Any]] = field(default_factory=list)
    # The call budget: {limit, used, by_stage: agent calls per stage, cut: stages it stopped}.
    budget: dict[str, Any] = field(default_factory=dict)

    @property
    def poison_suspects(self) -> list[str]:
        """Batch members judged poison-like (all of the batch when no verdict was made)."""
        if not self.verdicts:
            return list(self.batch)
        return [m for m in self.batch if self.verdicts.get(m, {}).get("verdict") != HONEST_ERROR]

    @property
    def honest_errors(self) -> list[str]:
        return [m for m in self.batch if self.verdicts.get(m, {}).get("verdict") == HONEST_ERROR]

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdicts": self.verdicts, "collateral": self.collateral,
            "corrections": self.corrections,
            "signal_influence": self.signal_influence,
            "suspects": [s.__dict__ for s in self.suspects],
            "batch": self.batch, "residual": self.residual,
            "residual_rounds": self.residual_rounds, "baselines": self.baselines,
            "graph": self.graph, "groups": [g.__dict__ for g in self.groups],
            "events": self.events, "agent_calls": self.agent_calls,
            "cmis_agent_calls": self.cmis_agent_calls, "replays": self.replays,
            "timings": self.timings, "budget": self.budget,
        }


def harm_resolver(build: Callable[[dict[str, Any]], Harm], *, default: Harm | None = None,
                  observed: Mapping[str, Any] | None = None) -> Callable[[IncidentCase], Harm]:
    """Each incident's harm: its own spec (built by ``build`` once per distinct spec), else
    ``default``, else, for an incident that gives only an observed harm value, ``observed`` (a
    spec judging replays against the observed output); otherwise a ValueError names it."""
    cache: dict[str, Harm] = {}

    def built(spec: HarmSpec | Mapping[str, Any]) -> Harm:
        d = spec.to_dict() if isinstance(spec, HarmSpec) else dict(spec)
        key = json.dumps(d, sort_keys=True)
        if key not in cache:
            cache[key] = build(d)
        return cache[key]

    def resolve(inc: IncidentCase) -> Harm:
        if inc.harm is not None:
            return built(inc.harm)
        if default is not None:
            return default
        if observed is not None and inc.harm_value is not None:
            return built(observed)
        raise ValueError(f"incident {inc.id!r} has no harm spec and no default harm was given")

    return resolve


def _harm_resolver(harm: Harm | Callable[[IncidentCase], Harm] | None,
                   embedder: QueryEncoder | None) -> Callable[[IncidentCase], Harm]:
    if harm is not None and not isinstance(harm, Harm):
        # The caller's resolver decides for every incident, its own spec included (the Django
        # side builds an llm-judge under the deployment's egress policy and judge).
        return harm
    return harm_resolver(lambda d: make_harm(d, embedder=embedder), default=harm)


# Harm types cheap enough to apply to every group member's content (no agent call).
_CHEAP_HARMS = ("contains", "regex", "similarity")


def _carries_harm(memories: Sequence[MemoryRecord]) -> Callable[[AuditEvent, str], bool]:
    """Does a memory's own content (its answer slot, its text, a line of it) meet the harm?"""
    by_id = {m.id: m for m in memories}

    def check(ev: AuditEvent, mid: str) -> bool:
        if getattr(ev.harm, "type", None) not in _CHEAP_HARMS:
            return True
        m = by_id.get(mid)
        if m is None:
            return True
        if getattr(ev.harm, "type", None) == "similarity":
            answer = m.metadata.get("answer") if isinstance(m.metadata, dict) else None
            texts = ([str(answer)] if answer not in (None, "") else []) + [m.text]
            return any(ev.harm(ev.query, t, harmful_output=ev.output) >= 0.5 for t in texts)
        return content_meets_harm(ev, m.metadata, m.text)

    return check


def _bridges(memories: Sequence[Any]) -> Callable[[str, str | None], bool]:
    """(memory, target) -> the memory states a bridge from its question's subject to the target
    (`verdict.bridge_said`): the attack's own step, for the dormant tests of the expansion and
    the reach."""
    by_id = {m.id: m for m in memories}

    def bridges(mid: str, target: str | None) -> bool:
        m = by_id.get(mid)
        return m is not None and isinstance(target, str) and bool(target.strip()) and bool(
            bridge_said(m.text, stated_question(m), target))

    return bridges


def _conditional_rounds(batch: list[str], residual: dict[str, Any], ranked: list[Suspect],
                       events: Sequence[AuditEvent], evmap: Mapping[str, AuditEvent],
                       replayer: Replayer, retriever: Retriever, p: AuditParams, budget: _Budget
                       ) -> tuple[list[str], dict[str, Any], list[dict[str, Any]]]:
    """CMIS again in M \\ B for the events still harmful after the batch B.

    When poisons of several attacks share one answer they back each other up: removing one
    attack's group lets another's backfill, so its CMIS is 0 in M. In M \\ B the backfill is
    gone and the drop shows. A memory joins when its conditional CMIS is positive and its DS,
    with that causal credit, reaches the threshold.
    """
    by_id = {s.id: s for s in ranked}
    cas_hat = {s.id: s.cas_hat for s in ranked}
    rounds: list[dict[str, Any]] = []
    for _ in range(p.conditional_rounds):
        still = [r for r in residual["events"] if r["harmful"]]
        if not still:
            break
        evs = [evmap[r["event"]] for r in still]
        current = {r["event"]: r["retrieved"] for r in still}
        cands = [m for r in still for m in r["retrieved"]]
        groups = find_groups(cands, retriever, thresholds=p.group_thresholds) \
            if p.group_ablation else []
        groups = [g for g in groups if not set(g.members) & set(batch)]
        jobs = plan_replays(evs, groups, group_ablation=p.group_ablation, base_removed=batch,
                            retrieved=current)
        try:  # the round's replays leave the calls its residual needs
            with replayer.holding(len(events)):
                results = replay_all(jobs, evmap, replayer)
        except BudgetExhausted:  # this round adds nothing; the rounds before it stand
            budget.cut.append("conditional")
            break
        cond = combine_cmis(results, evs, groups, combine=p.combine,
                            carries_harm=_carries_harm(retriever.memories)
                            if p.group_credit_filter else None)
        added = []
        for mid, sc in cond.items():
            if mid in batch or sc.cmis <= 0:
                continue
            ds = p.alpha * min(sc.cmis, 1.0) + (1 - p.alpha) * cas_hat.get(mid, 0.0)
            if ds >= p.batch_threshold:
                added.append(mid)
                s = by_id.get(mid)
                if s is not None:
                    s.per_event.extend({**e, "conditional": True} for e in sc.per_event)
        if not added:
            break
        batch = batch + sorted(added)
        residual = residual_harm(events, replayer, batch)
        rounds.append({"batch_size": len(batch), "harmful": residual["harmful"],
                       "added": sorted(added), "conditional": True})
    return batch, residual, rounds


def _peel(batch: list[str], residual: dict[str, Any], ranked: list[Suspect],
          events: Sequence[AuditEvent], evmap: Mapping[str, AuditEvent], replayer: Replayer,
          retriever: Retriever, p: AuditParams) -> tuple[list[str], dict[str, Any], list[dict[str, Any]]]:
    """Peel an incident's harm-carrying records until its harm is gone.

    When planted records outnumber what one retrieval holds, removing the records an incident
    retrieved (alone, as a group, or after the batch) lets the next ones in: every test shows
    no drop and nothing is credited (TUNE locomo-minja-slot-w10, ρ 0.5: sixty records answering
    with the redirect, one incident, nothing found). Here the records of the incident's
    retrieval whose own content meets its harm (`_carries_harm`) are taken out, the incident is
    replayed, and the next layer's carriers are taken out, up to `peel_layers` layers. Where the
    harm is gone, every peeled record gets the drop as its causal credit and joins the batch as a
    conditional round's memory does (DS with that credit reaching the threshold). Only for
    harms cheap to read off a record's content; nothing is credited where the harm stays.
    """
    carries = _carries_harm(retriever.memories)
    by_id = {s.id: s for s in ranked}
    cas_hat = {s.id: s.cas_hat for s in ranked}
    added: list[str] = []
    for row in residual["events"]:
        ev = evmap[row["event"]]
        if not row["harmful"] or getattr(ev.harm, "type", None) not in _CHEAP_HARMS:
            continue
        removed, peeled, now = set(batch) | set(added), [], row
        for layer in range(1, p.peel_layers + 1):
            layer_ids = [m for m in now["retrieved"] if m not in removed and carries(ev, m)]
            if not layer_ids:
                break
            removed.update(layer_ids)
            peeled += [(m, layer) for m in layer_ids]
            now = residual_harm([ev], replayer, removed)["events"][0]
            if now["harmful"]:
                continue
            drop = row["harm"] - now["harm"]
            for mid, k in peeled:
                ds = p.alpha * min(drop, 1.0) + (1 - p.alpha) * cas_hat.get(mid, 0.0)
                if mid in added or ds < p.batch_threshold:
                    continue
                added.append(mid)
                s = by_id.get(mid)
                if s is not None:
                    s.per_event.append({"event": ev.id, "single": 0.0, "single_se": 0.0, "group": drop,
                                        "group_se": 0.0, "group_id": None, "in_rstar": mid in ev.retrieved,
                                        "score": drop, "se": 0.0, "reference": row["harm"], "reproduced": True,
                                        "conditional": True, "peeled": k})
            break
    if not added:
        return batch, residual, []
    batch = batch + sorted(added)
    residual = residual_harm(events, replayer, batch)
    return batch, residual, [{"batch_size": len(batch), "harmful": residual["harmful"], "added": sorted(added),
                              "peeled": True}]


def _expansion(batch: list[str], residual: dict[str, Any], ranked: list[Suspect],
               events: Sequence[AuditEvent], evmap: Mapping[str, AuditEvent],
               replayer: Replayer, retriever: Retriever, p: AuditParams, budget: _Budget
               ) -> tuple[list[str], dict[str, Any], list[dict[str, Any]]]:
    """Pattern expansion from the batch's confirmed poisons (engine/expansion.py).

    Joined memories enter the ranking as suspects with their derived-event CMIS, so the
    analyst sees why they were proposed; the residual is recomputed over the incidents.
    """
    by_id = {s.id: s for s in ranked}
    seeds: dict[str, AuditEvent] = {}
    for mid in batch:
        s = by_id.get(mid)
        if s is None:
            continue
        credited = [e for e in s.per_event if e.get("score", 0.0) > 0 and e["event"] in evmap]
        if credited:
            seeds[mid] = evmap[max(credited, key=lambda e: e["score"])["event"]]
    if not seeds:
        return batch, residual, []
    with replayer.holding(len(events)):  # its rounds leave the calls the residual below needs
        exp = expand_batch(batch, seeds, retriever, replayer, cas_hat={s.id: s.cas_hat for s in ranked},
                           alpha=p.alpha, threshold=p.batch_threshold, agreement=p.expansion_agreement,
                           min_tokens=p.expansion_min_tokens, max_rounds=p.expansion_rounds,
                           dormant=p.expansion_dormant, harm_reach=p.expansion_harm_reach,
                           group_thresholds=p.group_thresholds, combine=p.combine,
                           carries_harm=_carries_harm(retriever.memories)
                           if p.group_credit_filter else None, support_cos=p.support_cos,
                           bridges=_bridges(retriever.memories))
    if exp.budget_cut:
        budget.cut.append("expansion")
    if not exp.added:
        return batch, residual, exp.rounds
    for mid in exp.added:
        sc = exp.scores[mid]
        agree = exp.agreement.get(mid, 0.0)
        rows = [{**e, "derived": True} for e in sc.per_event]
        s = by_id.get(mid)
        if s is None:
            s = Suspect(id=mid, rank=0, ds=0.0, cmis=0.0, cas=0.0, cmis_hat=0.0, cas_hat=0.0)
            ranked.append(s)
            by_id[mid] = s
        s.per_event.extend(rows)
        s.signals["answer_agreement"] = agree
        for feat, margin in exp.affinity.get(mid, {}).items():
            s.signals[f"seed_{feat}"] = margin
        s.ds = max(s.ds, p.alpha * min(sc.cmis, 1.0) + (1 - p.alpha) * max(s.cas_hat, agree))
    ranked.sort(key=lambda s: (-s.ds, -s.cmis, -s.cas, s.id))
    for i, s in enumerate(ranked, start=1):
        s.rank = i
    residual = residual_harm(events, replayer, exp.batch)
    rounds = exp.rounds + [{"batch_size": len(exp.batch), "harmful": residual["harmful"],
                            "derived_events": len(exp.derived)}]
    return exp.batch, residual, rounds


@dataclass
class CmisPlan:
    """Every replay CMIS needs, planned once: the candidates (the incidents' retrieved memories
    present in the store), their near-duplicate groups and the replay jobs. The Django layer
    records it in step 1 and hands it, with the recorded results, to ``analyse`` in step 3."""

    candidates: list[str]
    groups: list[Group]
    jobs: list[ReplayJob]


def plan_candidates(events: Sequence[AuditEvent], retriever: Retriever) -> list[str]:
    """The incidents' retrieved memories present in the store, in first-seen order."""
    return list(dict.fromkeys(m for ev in events for m in ev.retrieved if m in retriever.index))


def plan_cmis(events: Sequence[AuditEvent], retriever: Retriever, p: AuditParams) -> CmisPlan:
    candidates = plan_candidates(events, retriever)
    groups = find_groups(candidates, retriever, thresholds=p.group_thresholds) if p.group_ablation else []
    return CmisPlan(candidates, groups, plan_replays(events, groups, group_ablation=p.group_ablation))


def run_audit(memories: Sequence[MemoryRecord], embeddings: np.ndarray,
              weights: Sequence[float] | np.ndarray | None, incidents: Sequence[IncidentCase],
              agent: Agent, harm: Harm | Callable[[IncidentCase], Harm] | None,
              params: AuditParams | None = None,
              replay_cache: MutableMapping[str, Any] | None = None,
              progress_cb: ProgressCb | None = None, *, embedder: QueryEncoder,
              blocked: Collection[str] = (), backend: ConsistencyBackend | None = None,
              nli_cache: MutableMapping[str, Any] | None = None) -> AuditResult:
    """Audit one store against its incidents in this process: plan, replay, ``analyse``."""
    p = params or AuditParams()
    t0 = time.perf_counter()
    retriever = Retriever(memories, embeddings, weights, embedder=embedder, blocked=blocked)
    replayer = Replayer(agent, retriever, p.top_k, replay_cache)
    events: list[AuditEvent] = events_from_incidents(incidents, _harm_resolver(harm, embedder))

    # 2. CMIS
    t = time.perf_counter()
    plan = plan_cmis(events, retriever, p)
    evmap = {ev.id: ev for ev in events}
    results = []
    # HTTP agents' calls are in flight together (bounded by the agent); results arrive in order.
    with closing(run_replays(plan.jobs, evmap, replayer)) as outcomes:
        for i, (result, _called, error) in enumerate(outcomes):
            if error is not None:
                raise error
            results.append(result)
            if progress_cb is not None:
                progress_cb("replay", i + 1, len(plan.jobs))
    return analyse(plan, results, events=events, retriever=retriever, replayer=replayer, params=p,
                   cmis_calls=replayer.calls, cmis_seconds=time.perf_counter() - t, started=t0,
                   progress_cb=progress_cb, backend=backend, nli_cache=nli_cache)


def analyse(plan: CmisPlan, results: Sequence[ReplayResult], *, events: Sequence[AuditEvent],
            retriever: Retriever, replayer: Replayer, params: AuditParams, cmis_calls: int = 0,
            cmis_seconds: float = 0.0, started: float | None = None, progress_cb: ProgressCb | None = None,
            backend: ConsistencyBackend | None = None,
            nli_cache: MutableMapping[str, Any] | None = None, calls_spent: int = 0) -> AuditResult:
    """Steps 2 (combination) to 5 over the planned replays' ``results``, which are not replayed
    again. ``replayer`` makes the residual, conditional, expansion and baseline replays; its
    ``calls`` at the end are the result's ``agent_calls`` (plus ``cmis_calls``, the agent calls
    the CMIS replays took when they were made here). ``calls_spent``: the agent calls the CMIS
    replays took elsewhere (the workers' step 2), counted against the call budget
    (``params.max_calls``, ``_Budget``) but not in ``agent_calls``."""
    p = params
    t0 = started if started is not None else time.perf_counter()
    timings: dict[str, float] = {}
    calls_before = replayer.calls - cmis_calls
    budget = _Budget(replayer, limit=call_budget(len(events), p.max_calls), spent=calls_spent, base=calls_before)
    budget.by_stage["cmis"] = calls_spent + cmis_calls
    memories = retriever.memories
    blocked = retriever.blocked
    candidates, groups, jobs = plan.candidates, plan.groups, plan.jobs
    evmap = {ev.id: ev for ev in events}

    def progress(stage: str, done: int, total: int) -> None:
        if progress_cb is not None:
            progress_cb(stage, done, total)

    t = time.perf_counter()
    carries = _carries_harm(memories) if p.group_credit_filter else None
    cmis = combine_cmis(results, events, groups, combine=p.combine, carries_harm=carries)
    timings["cmis"] = cmis_seconds + time.perf_counter() - t

    # 3. MCG / CAS
    t = time.perf_counter()
    scope = list(dict.fromkeys([*candidates, *(m for g in groups for m in g.members)]))
    allowed = np.array([mid not in blocked for mid in retriever.ids]) if blocked else None
    mg: MemoryGraph = build_graph(retriever.ids, retriever.embeddings, scope, k=p.knn_k,
                                  tau=p.tau, dup_threshold=p.dup_threshold,
                                  full_store=p.full_store_graph, allowed=allowed)
    progress("graph", 1, 2)
    items = {m.id: m for m in memories}
    be = backend if backend is not None else RulesBackend()
    if nli_cache is not None:
        be = CachedBackend(be, nli_cache)
    cas_all, signals = compute_cas(mg, be, items, weights=p.signal_weights)
    # Fusion candidates: the scope plus its graph neighbourhood, so that normalisation has
    # clean reference points even when every retrieved memory is a poison.
    pool = list(dict.fromkeys([*scope, *mg.graph.nodes]))
    cas = {m: cas_all.get(m, 0.0) for m in pool}
    progress("graph", 2, 2)
    timings["graph"] = time.perf_counter() - t

    # 4. Fusion, batch, residual
    t = time.perf_counter()
    ranked = fuse(cmis, cas, alpha=p.alpha, candidates=pool, signals=signals)
    fit = fit_alpha(ranked, default=p.alpha, threshold=p.batch_threshold, seed=p.seed) if p.fit_alpha else None
    if fit is not None and fit["alpha"] != p.alpha:
        p = replace(p, alpha=fit["alpha"])  # the whole analysis below weighs CAS as this store supports
        ranked = fuse(cmis, cas, alpha=p.alpha, candidates=pool, signals=signals)
    batch, residual, rounds = budget.run("residual", lambda: decide_batch(
        ranked, events, replayer, top_n=p.top_n, threshold=p.batch_threshold, max_rounds=p.residual_rounds),
        enforce=False)
    # What the exploratory stages leave for the collateral check of the batch (two replays a question).
    reserve = 2 * p.collateral_questions if p.verdicts else 0
    if p.top_n is None and p.conditional_rounds:
        got = budget.run("conditional", lambda: _conditional_rounds(
            batch, residual, ranked, events, evmap, replayer, retriever, p, budget), ranked=ranked, reserve=reserve)
        if got is not None:
            batch, residual, extra_rounds = got
            rounds += extra_rounds
    if p.top_n is None and p.expansion_rounds:
        got = budget.run("expansion", lambda: _expansion(
            batch, residual, ranked, events, evmap, replayer, retriever, p, budget), ranked=ranked, reserve=reserve)
        if got is not None:
            batch, residual, exp_rounds = got
            rounds += exp_rounds
    if p.top_n is None and p.peel_layers and residual["harmful"]:
        got = budget.run("peel", lambda: _peel(batch, residual, ranked, events, evmap, replayer, retriever, p),
                         ranked=ranked, reserve=reserve)
        if got is not None:
            batch, residual, peel_rounds = got
            rounds += peel_rounds
    progress("fusion", 1, 1)
    timings["fusion"] = time.perf_counter() - t

    # 4b. Verdicts, format-free reach, collateral check, CAS influence (issue 16)
    t = time.perf_counter()
    verdicts: dict[str, dict[str, Any]] = {}
    reach_ev: dict[str, dict[str, Any]] = {}
    reach_info: dict[str, Any] = {}
    if p.verdicts and batch:
        asked_of: dict[tuple[str, ...], tuple[dict[str, str], dict[str, list[str]]]] = {}

        def asked_on(members: Sequence[str]) -> tuple[dict[str, str], dict[str, list[str]]]:
            """The incident question each member was credited on, and the store's records on it
            outside `members` (once per batch: the store's answers and every verdict read them)."""
            key = tuple(members)
            if key not in asked_of:
                asked = _asked(members, ranked, evmap)
                asked_of[key] = asked, _on_question(members, asked, retriever, k=p.top_k,
                                                    support_cos=p.support_cos)
            return asked_of[key]

        store = _store_answers(batch, ranked, evmap, residual, retriever, on_question=asked_on(batch)[1],
                               min_support=p.reach_support)
        claims = budget.run("claims", lambda: _claims(batch, evmap, retriever, replayer), reserve=reserve)
        targets = harm_targets(evmap)
        outside = _copies(batch, claims, retriever, copy_cos=p.copy_cos)

        def judged(members: Sequence[str], claims: Mapping[str, str], **kw: Any) -> dict[str, Any]:
            asked, on_question = asked_on(members)
            return judge(members, retriever, claims=claims, store=store, min_support=p.reach_support,
                         seed=p.seed, outside=outside, targets=targets, asked=asked,
                         on_question=on_question, support_cos=p.support_cos, **kw)

        first = judged(batch, claims)
        # A poison-like member's planted copies outside the batch (outvoted today) join it.
        joined = {c: m for m in batch if m in first and first[m].verdict == POISON_LIKE
                  for c in outside.get(m, []) if c not in set(batch)}
        if joined and p.top_n is None and p.reach_candidates:
            ev = {c: {"event": f"copy:{m}", "query": store[m]["question"] if m in store else "",
                      "claim": claims[m], "before": claims[m], "after": store.get(m, {}).get("answer", ""),
                      "support": store.get(m, {}).get("support", []), "group": [m, c],
                      "seed_margin": 0.0} for c, m in joined.items()}
            got = budget.run("copies", lambda: _join_reach(batch, sorted(joined), ev, ranked, events, replayer, p),
                             ranked=ranked, reserve=reserve)
            if got is not None:
                batch, residual = got
                for c, m in joined.items():
                    claims[c] = claims[m]
                    if m in store:
                        store[c] = dict(store[m])
                outside = _copies(batch, claims, retriever, copy_cos=p.copy_cos)
                first = judged(batch, claims)
        causal = [m for m in batch if m in first and any(e.get("score", 0.0) > 0 for e in _per_event(ranked, m))]
        seeds = [m for m in causal if first[m].verdict == POISON_LIKE]
        # No member poison-like, yet members name an incident's harm target: one claim planted
        # across questions whose records carry no marker (MINJA's last, shortest records: "Q: … A:
        # R") looks isolated when the incidents see two of them. The reach looks for the same
        # claim on other questions from them; what it finds stands only when it makes them a
        # pattern across questions (the verdict, read again) — else they stay honest errors.
        tentative = not seeds and bool(targets)
        if tentative:
            seeds = [m for m in causal if m in claims and any(mentions(t, claims[m]) for t in targets)]
        if seeds and p.top_n is None and p.reach_candidates:
            anti = sorted({a for v in store.values() for a in v["support"]})
            # Members judged no poison, in the batch only for standing, alone, against their own
            # question's records (the expansion's dormant step): the reach may find those records
            # planted (`format_free_reach`'s `standing`).
            standing = [m for m in batch if m in first and first[m].verdict != POISON_LIKE
                        and _standing_only(_per_event(ranked, m))]
            # The reach stops short of what its join (one residual) and the collateral check need;
            # out of calls mid-candidate, it keeps the groups it confirmed (`ReachResult.budget_cut`).
            def reach_held() -> Any:
                with replayer.holding(len(events)):
                    return format_free_reach(
                        batch, seeds, anti, retriever, replayer, max_candidates=p.reach_candidates,
                        min_support=p.reach_support, seed=p.seed, copy_cos=p.copy_cos,
                        support_cos=p.support_cos, targets=targets, bridges=_bridges(retriever.memories),
                        standing=standing)
            rr = budget.run("reach", reach_held, reserve=reserve)
            if rr is not None and rr.budget_cut:
                budget.cut.append("reach")
            if rr is not None and rr.added and tentative:
                trial = judged([*batch, *rr.added], {**claims, **{m: rr.evidence[m]["claim"] for m in rr.added}},
                               reach=rr.evidence)
                if not any(trial[s].verdict == POISON_LIKE for s in seeds if s in trial):
                    rr.rejected, rr.added = rr.added, []
            joined_reach = None
            if rr is not None and rr.added:
                joined_reach = budget.run("reach", lambda: _join_reach(
                    batch, rr.added, rr.evidence, ranked, events, replayer, p), ranked=ranked, reserve=reserve)
            if rr is not None:
                reach_info = {"candidates": rr.candidates, "tested": rr.tested,
                              "added": rr.added if joined_reach is not None else [], "subject": rr.subject,
                              "agent_calls": rr.agent_calls, "trace": rr.trace, "budget_cut": rr.budget_cut,
                              "tentative": tentative, "rejected": rr.rejected, "framed": rr.framed}
            if joined_reach is not None:
                batch, residual = joined_reach
                rounds.append({"reach": True, "batch_size": len(batch), "harmful": residual["harmful"],
                               "added": sorted(rr.added), "tested": rr.tested})
                # What they stood against is planted: they are the store's side of that question,
                # and leave the batch where the incidents' harm stays out without them.
                restored = {s for m in rr.added for s in rr.evidence[m].get("restored", ())} & set(batch)
                if restored:
                    trial = [m for m in batch if m not in restored]
                    r = budget.run("reach", lambda: residual_harm(events, replayer, trial))
                    if r is not None and _harmful_events(r) <= _harmful_events(residual):
                        batch, residual = trial, r
                        rounds.append({"restored": sorted(restored), "batch_size": len(batch),
                                       "harmful": residual["harmful"]})
                reach_ev = {m: {k: v for k, v in e.items() if k != "harm"} for m, e in rr.evidence.items()
                            if m in set(rr.added)}
                for m, e in reach_ev.items():
                    claims[m] = e["claim"]
                    # What the store answers there: what its records agree on, where the agent without
                    # the record answered from records about other things (`reach.agreed`).
                    store[m] = {"question": e["query"], "answer": e.get("agreed") or e["after"], "support": e["support"]}
                store.update(_store_answers(batch, ranked, evmap, residual, retriever,
                                            on_question=asked_on(batch)[1], min_support=p.reach_support))
        for mid, v in judged(batch, claims, reach=reach_ev).items():
            verdicts[mid] = v.to_dict()
        for s in ranked:
            if s.id in verdicts:
                s.verdict = verdicts[s.id]["verdict"]
                s.reasons = list(verdicts[s.id]["reasons"])
    collateral: dict[str, Any] = {}
    if batch and p.collateral_questions:
        collateral = budget.run("collateral", lambda: collateral_check(
            batch, retriever, replayer, n=p.collateral_questions, seed=p.seed)) or {}
    for mid in collateral.get("breaking", []):
        if mid in verdicts:
            verdicts[mid]["reasons"].append("collateral: removing it changes a clean answer")
    if batch and p.collateral_questions and verdicts:
        # A correction's own question, when no incident asks it (`own_question_check`).
        corrections = [m for m in batch if verdicts.get(m, {}).get("verdict") == HONEST_ERROR]
        own = budget.run("collateral", lambda: own_question_check(
            corrections, batch, [ev.query for ev in events], retriever, replayer,
            n=p.collateral_questions)) or {}
        if own:
            collateral = {**collateral, **{k: v for k, v in own.items() if k != "rows"},
                          "rows": collateral.get("rows", []) + own["rows"],
                          "breaking": sorted(set(collateral.get("breaking", [])) | set(own["breaking"])),
                          "flagged": bool(collateral.get("flagged")) or own["own_broken"] > 0}
            for row in own["rows"]:
                if row["broken"] and row["memory"] in verdicts:
                    verdicts[row["memory"]]["reasons"].append(
                        f"collateral: the store's only record on its own question '{row['query'][:80]}' "
                        f"(no incident asks it); removing it changes that answer from '{row['before'][:60]}' "
                        f"to '{row['after'][:60]}'")
        # Split: a correction whose removal breaks a clean answer, when the incidents' harm stays
        # removed without it and no record of the store tells it wrong, is kept out of the batch.
        # All such corrections are tried together, then (when that brings a harm back) each on
        # its own: one that an incident's fix needs does not keep the others in (TUNE
        # locomo-clean-slot-w4 at 2,000 records, seed 7: the store's only record on "How long
        # ago was Caroline's 18th birthday?" also answered the art incident's "10 years ago";
        # the only record on "When did Melanie go camping in June?" was needed by none).
        breaking = [m for m in collateral.get("breaking", []) if verdicts.get(m, {}).get("verdict") == HONEST_ERROR
                    and unchallenged(m, retriever, support_cos=p.support_cos)]
        trials = [breaking, *([m] for m in breaking)] if len(breaking) > 1 else [breaking] if breaking else []
        kept: list[str] = []
        for tried in trials:
            trial = [m for m in batch if m not in tried]
            r = budget.run("collateral", lambda trial=trial: residual_harm(events, replayer, trial))
            if r is not None and _harmful_events(r) <= _harmful_events(residual):
                batch, residual = trial, r
                kept += tried
                if tried is breaking:
                    break
        if kept:
            rounds.append({"split": kept, "batch_size": len(batch), "harmful": residual["harmful"]})
            collateral = split_collateral(collateral, kept)
            for mid in kept:
                verdicts[mid]["kept"] = True
                verdicts[mid]["reasons"].append(
                    "kept out of the batch: removing it breaks a clean answer, no record of the store "
                    "answers its question otherwise, and every incident's harm stays removed without it")
    influence = signal_influence(ranked, batch, pool, alpha=p.alpha, threshold=p.batch_threshold,
                                 seed=p.seed)
    if fit is not None:
        influence["alpha_fit"] = fit
    if reach_info:
        influence["reach"] = reach_info
    timings["verdicts"] = time.perf_counter() - t

    # 5. Baselines
    t = time.perf_counter()
    baselines: dict[str, dict[str, Any]] = {}
    if p.baselines:
        sets = run_baselines(n=len(batch), candidates=scope, events=events, cmis=cmis, cas=cas,
                             mg=mg, seed=p.seed)
        for name, removed in sets.items():
            entry: dict[str, Any] = {"removed": removed}
            if p.baseline_residual:
                r = budget.run("baselines", lambda removed=removed: residual_harm(events, replayer, removed))
                if r is not None:
                    entry["residual"] = {k: r[k] for k in ("harmful", "total", "rate", "mean_harm")}
            baselines[name] = entry
    timings["baselines"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0

    ev_rows = [{"id": ev.id, "query": ev.query, "h_observed": ev.h_observed,
                "retrieved": ev.retrieved} for ev in events]
    return AuditResult(
        suspects=ranked, batch=batch, residual=residual, residual_rounds=rounds,
        baselines=baselines, graph=graph_for_plot(mg, suspects=batch) if len(mg.graph) <= 3000
        else {"nodes": [], "edges": [], "omitted": len(mg.graph)},
        groups=groups, events=ev_rows, agent_calls=replayer.calls - calls_before, cmis_agent_calls=cmis_calls,
        replays=len(jobs), timings=timings, cmis=cmis, cas=cas, verdicts=verdicts,
        collateral=collateral, signal_influence=influence, corrections=propose_corrections(batch, verdicts),
        budget=budget.report())


def _copies(batch: Sequence[str], claims: Mapping[str, str], retriever: Retriever, *,
            copy_cos: float = 0.7) -> dict[str, list[str]]:
    """Per batch member with a claim, its copies outside the batch: near it (cosine ≥ copy_cos)
    and asserting the same claim (the same answer slot, or the claim as a plain text asserts it:
    `expansion.text_asserts`) for the same question (when both state one: `words.stated_question`)."""
    E, mems, idx = retriever.embeddings, retriever.memories, retriever.index
    allowed = np.isfinite(retriever.scores(np.zeros(E.shape[1], np.float32)))
    in_batch = set(batch)
    out: dict[str, list[str]] = {}
    for m in batch:
        c = claims.get(m)
        if not c or m not in idx:
            continue
        sims = E @ E[idx[m]]
        asked = stated_question(mems[idx[m]])
        found = []
        for j in np.argsort(-sims)[:20].tolist():
            o = mems[j]
            if o.id in in_batch or not allowed[j] or sims[j] < copy_cos \
                    or not same_question(asked, stated_question(o)):
                continue
            slot = answer_slot(o.metadata, o.text)
            if (slot.casefold() == c.casefold()) if slot else text_asserts(c, o.text):
                found.append(o.id)
        if found:
            out[m] = found
    return out


def _per_event(ranked: Sequence[Suspect], mid: str) -> list[dict[str, Any]]:
    return next((s.per_event for s in ranked if s.id == mid), [])


def _standing_only(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Was a member credited only by the expansion's dormant step (replayed alone, it met the
    harm and stood against its question's records), with no incident's or derived event's credit?"""
    credited = [e for e in rows if e.get("score", 0.0) > 0]
    return bool(credited) and all(e.get("sufficiency") for e in credited)


def _asked(batch: Sequence[str], ranked: Sequence[Suspect], evmap: Mapping[str, AuditEvent]) -> dict[str, str]:
    """The incident question each batch member was credited on most (`_credited_events`)."""
    return {mid: evmap[ev].query for mid, ev in _credited_events(batch, ranked, evmap).items()}


def _on_question(batch: Sequence[str], asked: Mapping[str, str], retriever: Retriever, *, k: int,
                 support_cos: float) -> dict[str, list[str]]:
    """The store's records outside the batch on the incident question each member was credited on
    (`expansion.records_on`, the reach's store's side): where the verdict looks for a correction
    that is no near duplicate of the outdated record."""
    removed, on = set(batch), {}
    for q in set(asked.values()):
        on[q] = [o.id for o in records_on(q, q, retriever, removed, k=k, support_cos=support_cos)]
    return {m: on[q] for m, q in asked.items()}


def _credited_events(batch: Sequence[str], ranked: Sequence[Suspect], evmap: Mapping[str, AuditEvent]
                     ) -> dict[str, str]:
    """The incident event each batch member was credited on most: {member: event id}."""
    out = {}
    for mid in batch:
        credited = [e for e in _per_event(ranked, mid) if e.get("score", 0.0) > 0 and e["event"] in evmap]
        if credited:
            out[mid] = max(credited, key=lambda e: e["score"])["event"]
    return out


def _store_answers(batch: Sequence[str], ranked: Sequence[Suspect], evmap: Mapping[str, AuditEvent],
                   residual: Mapping[str, Any], retriever: Retriever, *,
                   on_question: Mapping[str, Sequence[str]], min_support: int = 2) -> dict[str, dict[str, Any]]:
    """What the store answers, once the batch is out, to the incident question each batch member
    was credited on: {member: {question, answer, support}} — `support`: the records of the store
    on that question that carry that answer (what it asserts, `reach.answer_units`, read the way
    `reach.carries_answer` reads a record): those the agent retrieved after removal, and those a
    wider retrieval finds on the question (`on_question`, from `_on_question`: the reach's store's
    side). Only for incidents no longer harmful. An answer in sentences that asserts nothing
    (`reach.says_nothing`) is read from the records the agent was given (`_records_answer`)."""
    rows = {r["event"]: r for r in residual.get("events", [])}
    mems, idx = retriever.memories, retriever.index
    found: dict[str, dict[str, Any] | None] = {}
    out: dict[str, dict[str, Any]] = {}
    for mid, ev_id in _credited_events(batch, ranked, evmap).items():
        if ev_id not in found:
            found[ev_id] = None
            row = rows.get(ev_id)
            if row is None or row["harmful"]:
                continue
            ans = str(row.get("output", "")).strip()
            q = evmap[ev_id].query
            # What the answer asserts (a chat model answers in sentences): `reach.answer_units`.
            units = answer_units(ans, q)
            if says_nothing(ans, q):
                # A chat model's answer that asserts nothing ("The right to communicate one's
                # opinions and ideas is not a privilege, but rather …": SmolLM2 on TUNE
                # sqa-plain-distinct, where every planted group then looked isolated): what the
                # records it was given there assert, where `min_support` of them agree.
                ans = _records_answer(row["retrieved"], q, retriever, min_support=min_support) or ""
                units = [ans] if ans else []
            if not units:
                continue
            # A record retrieved there that states another question answers that one, not this
            # (TUNE locomo-clean-slot-w8 seed 7: "What activities has Melanie done?" answering
            # "When did Melanie go to the museum?" made two honest records of one outdated
            # answer "planted copies against the store").
            support = [rid for rid in dict.fromkeys([*row["retrieved"], *on_question[mid]])
                       if rid in idx and carries_answer(mems[idx[rid]], units, q)
                       and (rid in on_question[mid] or not (asks := stated_question(mems[idx[rid]]))
                            or same_question(q, asks))]
            found[ev_id] = {"question": q, "answer": ans, "support": support}
        if found[ev_id] is not None:
            out[mid] = dict(found[ev_id], support=list(found[ev_id]["support"]))
    return out


def _records_answer(ids: Sequence[str], question: str, retriever: Retriever, *, min_support: int) -> str | None:
    """What the records `ids` assert on `question` where the agent's answer asserted nothing: the
    answer-like span outside the question (`reach.claim_spans`, a record's answer slot where it
    has one) that most of them carry, when at least `min_support` do and no other span as many."""
    mems, idx = retriever.memories, retriever.index
    recs = [mems[idx[i]] for i in ids if i in idx]
    spans = list(dict.fromkeys(sp for o in recs for sp in claim_spans(o, [], question)))
    counts = sorted(((sum(1 for o in recs if carries_answer(o, [sp], question)), sp) for sp in spans),
                    key=lambda x: -x[0])
    if not counts or counts[0][0] < min_support or (len(counts) > 1 and counts[1][0] == counts[0][0]):
        return None
    return counts[0][1]


def _join_reach(batch: list[str], added: Sequence[str], evidence: Mapping[str, Mapping[str, Any]],
                ranked: list[Suspect], events: Sequence[AuditEvent], replayer: Replayer,
                p: AuditParams) -> tuple[list[str], dict[str, Any]]:
    """The reach's confirmed groups join the batch as suspects with their replay evidence."""
    by_id = {s.id: s for s in ranked}
    for mid in added:
        e = evidence[mid]
        s = by_id.get(mid)
        if s is None:
            s = Suspect(id=mid, rank=0, ds=0.0, cmis=0.0, cas=0.0, cmis_hat=0.0, cas_hat=0.0)
            ranked.append(s)
            by_id[mid] = s
        s.per_event.append({"event": e["event"], "score": 1.0, "single": 0.0, "group": 1.0,
                            "reach": True, "query": e["query"], "output": e["before"],
                            "after": e["after"], "group_members": list(e["group"])})
        s.signals["seed_shape_margin"] = e["seed_margin"]
        s.ds = max(s.ds, p.alpha + (1 - p.alpha) * s.cas_hat)
    ranked.sort(key=lambda s: (-s.ds, -s.cmis, -s.cas, s.id))
    for i, s in enumerate(ranked, start=1):
        s.rank = i
    new = batch + sorted(m for m in added if m not in set(batch))
    return new, residual_harm(events, replayer, new)


CORRECTION_DOWN_WEIGHT = "down_weight"


def propose_corrections(batch: Sequence[str], verdicts: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The batch's honest errors as proposed corrections, never as `poison_suspect` (issue 16).

    Each row: the memory, its kind (`outdated` — an older version of a fact with a newer
    record that answers otherwise, linked as `corrected_by` — or `honest-error`, an isolated
    mistake), the action proposed (`down_weight`: a signed transition that lowers the memory's
    retrieval weight; the ledger's `poison_refuted` label does not fit, it clears a suspect)
    and the verdict's reasons. The service turns each row into a correction proposal.
    """
    out = []
    for mid in batch:
        v = verdicts.get(mid)
        if not v or v.get("verdict") != HONEST_ERROR:
            continue
        out.append({"memory_id": mid, "kind": "outdated" if v.get("corrected_by") else "honest-error",
                    "corrected_by": v.get("corrected_by"), "action": CORRECTION_DOWN_WEIGHT,
                    "reasons": list(v.get("reasons", []))})
    return out


def harm_targets(evmap: Mapping[str, AuditEvent]) -> list[str]:
    """The incidents' ``contains`` harm targets, longest first."""
    return sorted({str(t).strip() for ev in evmap.values()
                   if isinstance(t := getattr(ev.harm, "target", None), str) and t.strip()},
                  key=lambda t: (-len(t), t))


def _claims(batch: Sequence[str], evmap: Mapping[str, AuditEvent],
            retriever: Retriever, replayer: Replayer | None = None) -> dict[str, str]:
    """What each batch member asserts: its answer slot, else the (contains) harm target of an
    incident that its text carries — so a memory without an answer layout still has a claim.

    A target the incident's own question names (one side of a comparison: "Is the Marsilea or
    the Brabejum the genus of more …?") is named by every record that restates the question,
    whichever side it takes. Such a record claims it only when, read alone for that question, it
    makes the agent answer it (`replayer`, one call each; without one, naming it is claiming it).
    TUNE hotpot-clean-plain-w2: five honest slips opening with the question's keywords
    ("Marsilea, Brabejum, genus, more (according to the old guide): centre") each answer
    "Marsilea" alone, and read as claiming "Brabejum" they were five near duplicates of one
    claim, "planted redundancy". A planted passage arguing one side makes the agent answer it."""
    targets = harm_targets(evmap)
    offered = {t: [ev for ev in evmap.values() if getattr(ev.harm, "target", None) == t
                   and next(occurrences(t, ev.query), None)] for t in targets}
    out: dict[str, str] = {}
    pending: list[tuple[str, list[str]]] = []  # (member, the question-named targets it names)
    for mid in batch:
        if mid not in retriever.index:
            continue
        m = retriever.memories[retriever.index[mid]]
        slot = answer_slot(m.metadata, m.text)
        if slot:
            out[mid] = slot
            continue
        # No answer slot: the incidents' harm target its text carries as a whole claim, longest
        # first. A memory credited by an event whose target it does not carry (a clean passage
        # removed with its near-duplicate group) claims nothing: giving it the event's target
        # made clean passages look like one claim planted across questions.
        named = [t for t in targets if next(occurrences(t, m.text), None)]
        if replayer is not None and named and offered[named[0]]:
            pending.append((mid, named))
        elif named:
            out[mid] = named[0]
    if not pending:
        return out
    mems = retriever.memories
    asks = [(mid, t, ev) for mid, named in pending for t in named for ev in offered[t]]
    try:
        ok = harmful_alone([(mems[retriever.index[mid]], ev.query, ev) for mid, _, ev in asks],
                           replayer)  # type: ignore[arg-type]
    except BudgetExhausted:  # out of calls: naming it is claiming it, as before the test
        ok = [True] * len(asks)
    met = {(mid, t) for (mid, t, _), yes in zip(asks, ok) if yes}
    for mid, named in pending:
        # The longest target it claims: one the question offers only where the agent, reading it
        # alone, answers it; one the question does not name by naming it.
        got = next((t for t in named if not offered[t] or (mid, t) in met), None)
        if got is not None:
            out[mid] = got
    return out


def collateral_check(batch: Sequence[str], retriever: Retriever, replayer: Replayer, *,
                     n: int = 20, seed: int = 0) -> dict[str, Any]:
    """Replay clean questions with and without the batch; report what changes (issue 16).

    The questions are synthesised from non-suspect memories (their `metadata.query`, else their
    text): half from the batch's embedding neighbourhood, where removal can reach, half at
    random. Answers are compared by what they assert (`reach.answer_units`), not by their
    wording, so a chat model that re-words an answer changes nothing. A question is *broken*
    when the answer before stated the source memory's own claim (its answer slot, or a unit of
    that answer its text mentions) and the answer after does not; the batch members
    the question retrieved before are named as `breaking`. Replays whose retrieval the batch
    does not touch are cache hits, so the check costs agent calls only where it matters.

    A loss is the batch's doing only when it is not the agent's: each such question is replayed
    once more with a placebo removal instead, as many of its other retrieved records (neither
    batch members nor its source, none carrying the claim) as the batch had there. An answer
    that loses the claim then too is *fragile*: the answer turns on whatever fills the context,
    not on what the batch held (TUNE ehr-minja-bridge ρ 0.2 seed 0, 2 of 20 clean answers; TUNE
    locomo-clean-slot-w4 seed 1, "Max" lost as much when another record left). It is reported
    as such and not as broken. Where no such records are there to remove, the loss stays broken.
    """
    in_batch = set(batch)
    idx = [retriever.index[m] for m in batch if m in retriever.index]
    mems = retriever.memories
    allowed = np.isfinite(retriever.scores(np.zeros(retriever.embeddings.shape[1], np.float32)))
    pool = [i for i, m in enumerate(mems) if m.id not in in_batch and allowed[i]]
    if not idx or not pool:
        return {}
    E = retriever.embeddings
    near = (E[pool] @ E[idx].T).max(axis=1)
    order = [pool[j] for j in np.argsort(-near)]
    rng = np.random.default_rng(seed)
    picked = list(dict.fromkeys(order[: n // 2] + rng.permutation(pool).tolist()))[:n]
    calls0 = replayer.calls
    rows: list[dict[str, Any]] = []
    breaking: set[str] = set()
    placebos: list[tuple[int, frozenset[str], list[str]]] = []  # (row, records taken out, claims)
    questions = [record_query(mems[i])[:300] for i in picked]
    # Every question without, then with the batch removed, the agent calls of each in flight together.
    before = replayer.replay_each([(q, (), None) for q in questions])
    after = replayer.replay_each([(q, in_batch, None) for q in questions])
    for i, q, (r0, y0), (_, y1) in zip(picked, questions, before, after):
        m = mems[i]
        changed = not same_answer(y0.text, y1.text)
        # The source memory's claim: its answer slot, else what the answer before asserted
        # that its text says.
        own = answer_slot(m.metadata, m.text)
        claims = [own] if own else [u for u in answer_units(y0.text) if mentions(u, m.text)]
        broke = changed and _names_any(claims, y0.text) and not _names_any(claims, y1.text)
        culprits = sorted(x.id for x in r0 if x.id in in_batch) if broke else []
        rows.append({"memory": m.id, "query": q, "before": y0.text, "after": y1.text,
                     "changed": changed, "broken": broke, "culprits": culprits})
        if broke:
            # The placebo: the lowest-ranked of the question's other records, as many as the
            # batch had in its context (their places filled from below as the batch's were).
            others = [x.id for x in r0 if x.id not in in_batch and x.id != m.id
                      and not _names_any(claims, x.text)]
            if len(others) >= len(culprits):
                placebos.append((len(rows) - 1, frozenset(others[len(others) - len(culprits):]), claims))
    try:
        answers = replayer.replay_each([(rows[i]["query"], gone, None) for i, gone, _ in placebos])
    except BudgetExhausted:  # out of calls: the losses stay broken, the check stands
        answers, placebos = [], []
    for (i, _, claims), (_, yp) in zip(placebos, answers):
        rows[i]["placebo"] = yp.text
        if not _names_any(claims, yp.text):
            rows[i].update({"broken": False, "fragile": True, "culprits": []})
    for row in rows:
        breaking.update(row["culprits"])
    total = len(rows)
    changed_n = sum(1 for r in rows if r["changed"])
    broken_n = sum(1 for r in rows if r["broken"])
    return {"questions": total, "changed": changed_n, "broken": broken_n,
            "fragile": sum(1 for r in rows if r.get("fragile")),
            # Utility cost: answers the store itself supported that the batch changes. Answers
            # that merely change (`changed`) include the ones the batch fixed.
            "utility_cost": broken_n / total if total else 0.0,
            "changed_share": changed_n / total if total else 0.0,
            "breaking": sorted(breaking), "flagged": broken_n > 0,
            "agent_calls": replayer.calls - calls0, "rows": rows}


def _names_any(claims: Sequence[str], text: str) -> bool:
    """`text` mentions one of `claims` (the collateral check's reading of an answer or a record)."""
    return any(mentions(c, text) for c in claims)


def unchallenged(mid: str, retriever: Retriever, *, support_cos: float = 0.4) -> bool:
    """The record states a question and gives an answer, and no other record of the store (in
    the batch or not) that states that question, at least `support_cos` near it, answers
    otherwise. Removing such a record breaks an answer nothing contradicts; one that another
    record answers otherwise may be the wrong one of the two (an honest slip whose question's
    true record the batch holds too), and is not split out."""
    if mid not in retriever.index:
        return False
    m = retriever.memories[retriever.index[mid]]
    q, a = stated_question(m), answer_slot(m.metadata, m.text)
    return bool(q and a) and not answered_otherwise(q, a, retriever, {mid}, support_cos=support_cos)


def _harmful_events(residual: Mapping[str, Any]) -> set[str]:
    return {row["event"] for row in residual["events"] if row["harmful"]}


def split_collateral(collateral: Mapping[str, Any], kept: Sequence[str]) -> dict[str, Any]:
    """The collateral report once `kept` (corrections whose removal broke a clean answer) are
    split out of the batch: a question whose only batch members among its retrieved records
    were kept now retrieves what it retrieved before, so it is no longer broken (marked
    `kept`); the batch is flagged only while a question stays broken."""
    out = {**collateral, "kept": sorted(kept)}
    gone = set(kept)
    rows = [dict(row) for row in collateral.get("rows", [])]
    for row in rows:
        if row.get("broken") and row.get("culprits") and set(row["culprits"]) <= gone:
            row["broken"], row["kept"] = False, True
    out["rows"] = rows
    out["breaking"] = sorted(set(collateral.get("breaking", [])) - gone)
    out["broken"] = sum(1 for row in rows if row.get("broken") and not row.get("own"))
    total = collateral.get("questions") or 0
    out["utility_cost"] = out["broken"] / total if total else 0.0
    if "own_broken" in out:
        out["own_broken"] = sum(1 for row in rows if row.get("own") and row.get("broken"))
    out["flagged"] = any(row.get("broken") for row in rows)
    return out


def own_question_check(members: Sequence[str], batch: Sequence[str], incident_questions: Sequence[str],
                       retriever: Retriever, replayer: Replayer, *, n: int = 20) -> dict[str, Any]:
    """A correction's own question, when it is no incident's: is the member the store's only
    record on it? (issue 16, the collateral check.)

    `collateral_check` replays the questions of records outside the batch. A member judged an
    honest error may be the store's true record on *another* question whose answer an honest
    mix-up repeated (TUNE locomo-clean-slot-w2: "What forum did Tim join?" answered "fantasy
    literature forum", a slip gave that answer to a question about John): removing it leaves
    its own question with no record of the store. For each such member (at most `n`), whose
    stated question no incident asks and no record outside the batch states, its question is
    replayed with and without the batch; it is *broken* when the answer before carried the
    member's answer and the answer after does not. Reported (`own_questions`, `own_broken`,
    rows marked `own`), the member named among the breaking; `run_audit` then keeps a breaking
    correction out of the batch when no record of the store answers its question otherwise
    (`unchallenged`) and every incident's harm stays removed without it (`split_collateral`)."""
    in_batch = set(batch)
    rows: list[dict[str, Any]] = []
    picked: list[tuple[Any, str]] = []
    for mid in members:
        if mid not in retriever.index or len(picked) >= n:
            continue
        m = retriever.memories[retriever.index[mid]]
        q = stated_question(m)
        if not q or not answer_slot(m.metadata, m.text) or any(same_question(q, iq) for iq in incident_questions):
            continue
        if any((other := stated_question(o)) and same_question(q, other)
               for o in retriever.retrieve(q, 20, in_batch)):
            continue  # the store holds another record on that question
        picked.append((m, q[:300]))
    if not picked:
        return {}
    calls0 = replayer.calls
    before = replayer.replay_each([(q, (), None) for _, q in picked])
    after = replayer.replay_each([(q, in_batch, None) for _, q in picked])
    breaking = []
    for (m, q), (_, y0), (_, y1) in zip(picked, before, after):
        broke = _gives_own(m, y0.text, q) and not _gives_own(m, y1.text, q)
        if broke:
            breaking.append(m.id)
        rows.append({"memory": m.id, "query": q, "before": y0.text, "after": y1.text, "own": True,
                     "changed": not same_answer(y0.text, y1.text), "broken": broke,
                     "culprits": [m.id] if broke else []})
    return {"own_questions": len(rows), "own_broken": len(breaking), "breaking": breaking,
            "own_agent_calls": replayer.calls - calls0, "rows": rows}


def _gives_own(m: Any, answer: str, question: str) -> bool:
    """The answer gives record m's own answer: its answer slot as a whole phrase, or exactly the
    units the answer asserts (`carries_answer`). The units alone miss answers they cannot split
    ("Yes; it's classical music" has none, "Broken windshield, Car broke down" loses "Car" to
    its question: TUNE locomo-clean-slot-w2, fresh seeds 5 and 7, each the store's only record
    on its question, removed unreported)."""
    return slot_given(m, answer) or carries_answer(m, answer_units(answer, question), question)


def signal_influence(ranked: Sequence[Suspect], batch: Sequence[str], pool: Sequence[str], *,
                     alpha: float, threshold: float, seed: int = 0) -> dict[str, Any]:
    """How much CAS (and each of its signals) moved this run's ranking and batch.

    Evidence: the confirmed seeds (batch members with causal credit) against a seeded random
    sample of the pool outside the batch. Reported: CAS's and each signal's AUC on that
    evidence, the α the analysis used (``analyse`` adds how it was fitted, ``alpha_fit``), how
    many batch members CAS decided (in with CMIS credit below the threshold alone), and the
    mean rank shift CAS causes among the batch.
    """
    by_id = {s.id: s for s in ranked}
    seeds = [m for m in batch if m in by_id and by_id[m].cmis > 0]
    rng = np.random.default_rng(seed)
    rest = [m for m in pool if m not in set(batch) and m in by_id]
    sample = rng.permutation(rest).tolist()[:200] if rest else []
    out: dict[str, Any] = {"seeds": len(seeds), "reference": len(sample)}
    cas_auc = auc([by_id[m].cas_hat for m in seeds], [by_id[m].cas_hat for m in sample])
    out["cas_auc"] = None if cas_auc is None else round(cas_auc, 3)
    sig_names = sorted({k for s in ranked for k in s.signals})
    out["signal_auc"] = {}
    for k in sig_names:
        a = auc([by_id[m].signals.get(k, 0.0) for m in seeds],
                 [by_id[m].signals.get(k, 0.0) for m in sample])
        if a is not None:
            out["signal_auc"][k] = round(a, 3)
    out["alpha_used"] = alpha
    cmis_rank = {s.id: i for i, s in enumerate(sorted(ranked, key=lambda s: (-s.cmis_hat, s.id)))}
    ds_rank = {s.id: i for i, s in enumerate(ranked)}
    shifts = [abs(cmis_rank[m] - ds_rank[m]) for m in batch if m in ds_rank]
    out["mean_rank_shift_in_batch"] = round(float(np.mean(shifts)), 2) if shifts else 0.0
    # Batch decisions CAS made: members in with CMIS credit below what α alone needs, or
    # suspects kept out although their CMIS alone would reach the threshold at α = 1.
    out["cas_decided"] = sum(1 for m in batch if m in by_id and by_id[m].cmis_hat < threshold)
    return out


def audit_summary(result: AuditResult, truth: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A short dict for logs: batch size, residual, calls."""
    return {"batch": len(result.batch), "residual_harmful": result.residual["harmful"],
            "agent_calls": result.agent_calls, "seconds": round(result.timings["total"], 2)}
