"""CMIS — counterfactual memory influence, with group ablation (DESIGN section 4).

1. For each harmful event e = (q*, y*, R*): the reference harm is h(q*, y*) (MemAudit eq. 1).
   A base replay with nothing removed checks the incident reproduces; when it does not, the
   reference is lowered to the replayed harm, so a non-reproducing incident cannot credit
   every candidate with the whole drop.
2. Leave-one-out: for each m_i in R*, replay f(q*, R(q*, M \\ {m_i})) (the retriever backfills).
   CMIS_e(m_i) = reference − h(q*, replay).
3. Group ablation (beyond the paper): near-duplicates (cosine ≥ threshold, single linkage) of
   the candidates, looked up in the whole store, form groups; each group that meets R* is
   removed together and its drop is credited to every member, so k redundant poisons cannot
   hide behind each other. A member's per-event score is the larger of its single and group drop.
4. Per-event scores combine over events by max (default) or sum. With n samples per replay the
   score is a sample mean with a t-based 95% confidence interval.

The work is a flat list of independent `ReplayJob`s (`plan_replays`), each run anywhere
(`run_replay`), gathered by `combine_cmis` — the Django side fans them out on Celery.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .harm import Harm
from .replay import Replayer
from .retriever import Retriever
from .scenario import IncidentCase

# Two-sided 95% Student t quantiles, df 1..30 (then the normal 1.96).
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t95(df: int) -> float:
    return _T95[df - 1] if 1 <= df <= len(_T95) else 1.96


@dataclass
class AuditEvent:
    """A harmful event as the audit sees it."""

    id: str
    query: str
    output: str
    retrieved: list[str]
    harm: Harm
    h_observed: float
    candidates: list[str] | None = None


def events_from_incidents(incidents: Iterable[IncidentCase], harm_for: Callable[[IncidentCase], Harm]
                          ) -> list[AuditEvent]:
    out = []
    for inc in incidents:
        harm = harm_for(inc)
        h = inc.harm_value if inc.harm_value is not None and inc.harm is None else harm(
            inc.query, inc.output, harmful_output=inc.output)
        out.append(AuditEvent(inc.id, inc.query, inc.output, list(inc.retrieved), harm, float(h),
                              list(inc.candidates) if inc.candidates else None))
    return out


@dataclass(frozen=True)
class Group:
    id: str
    members: tuple[str, ...]
    threshold: float


@dataclass(frozen=True)
class ReplayJob:
    job_id: str
    event_id: str
    kind: str  # "base" | "single" | "group" | "batch"
    target: str  # the memory id (single), the group id (group), "" otherwise
    removed: tuple[str, ...]


@dataclass
class ReplayResult:
    job_id: str
    event_id: str
    kind: str
    target: str
    removed: tuple[str, ...]
    output: str
    harms: list[float]
    retrieved: list[str]

    @property
    def harm_mean(self) -> float:
        return float(np.mean(self.harms)) if self.harms else 0.0

    @property
    def harm_se(self) -> float:
        n = len(self.harms)
        return float(np.std(self.harms, ddof=1) / math.sqrt(n)) if n > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "event_id": self.event_id, "kind": self.kind,
                "target": self.target, "removed": list(self.removed), "output": self.output,
                "harms": list(self.harms), "retrieved": list(self.retrieved)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplayResult:
        return cls(d["job_id"], d["event_id"], d["kind"], d["target"], tuple(d["removed"]),
                   d["output"], [float(h) for h in d["harms"]], list(d["retrieved"]))


@dataclass
class CmisScore:
    memory_id: str
    cmis: float
    ci_low: float
    ci_high: float
    single: float
    group: float
    n_events: int
    per_event: list[dict[str, Any]] = field(default_factory=list)


def _job_id(event_id: str, kind: str, removed: Sequence[str]) -> str:
    blob = "\x00".join([event_id, kind, *removed])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]


def make_job(event_id: str, kind: str, target: str, removed: Iterable[str]) -> ReplayJob:
    rem = tuple(sorted(set(removed)))
    return ReplayJob(_job_id(event_id, kind, rem), event_id, kind, target, rem)


def find_groups(candidate_ids: Iterable[str], retriever: Retriever, *,
                thresholds: Sequence[float] = (0.9, 0.8), max_size: int = 50,
                chunk: int = 8192) -> list[Group]:
    """Near-duplicate groups around the candidates, at each threshold (single linkage).

    Each candidate's store neighbours with cosine ≥ the lowest threshold are found by a chunked
    matrix product; components are formed among candidates and those neighbours. Components of
    one member, or larger than `max_size` (a topic, not a duplicate cluster), are dropped.
    """
    cands = [c for c in dict.fromkeys(candidate_ids) if c in retriever.index]
    if not cands or not thresholds:
        return []
    lo = min(thresholds)
    E = retriever.embeddings
    allowed = np.isfinite(retriever.scores(np.zeros(E.shape[1], dtype=np.float32)))
    # 1. neighbours of the candidates (the nodes of the duplicate graph)
    cidx = np.array([retriever.index[c] for c in cands])
    nodes: set[int] = set(cidx.tolist())
    for start in range(0, len(E), chunk):
        sims = E[start:start + chunk] @ E[cidx].T
        rows = np.nonzero((sims >= lo).any(axis=1))[0] + start
        nodes.update(int(r) for r in rows if allowed[r])
    node_list = sorted(nodes)
    if len(node_list) > 6000:
        # Bound the dense similarity block; the candidates themselves always stay.
        keep = set(cidx.tolist())
        node_list = sorted(keep | set([n for n in node_list if n not in keep][:6000 - len(keep)]))
    S = E[node_list] @ E[node_list].T
    groups: list[Group] = []
    seen: set[tuple[str, ...]] = set()
    for thr in sorted(set(thresholds), reverse=True):
        adj = S >= thr
        # 2. components by union-find on the thresholded similarity matrix
        parent = list(range(len(node_list)))

        def find(a: int, parent: list[int] = parent) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        ii, jj = np.nonzero(np.triu(adj, 1))
        for a, b in zip(ii.tolist(), jj.tolist()):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb
        comps: dict[int, list[int]] = {}
        for a in range(len(node_list)):
            comps.setdefault(find(a), []).append(a)
        cand_set = set(cidx.tolist())
        for members in comps.values():
            if len(members) < 2 or len(members) > max_size:
                continue
            gidx = [node_list[a] for a in members]
            if not cand_set.intersection(gidx):
                continue
            ids = tuple(sorted(retriever.ids[g] for g in gidx))
            if ids in seen:
                continue
            seen.add(ids)
            gid = "g" + hashlib.sha256("\x00".join(ids).encode()).hexdigest()[:12]
            groups.append(Group(gid, ids, thr))
    return groups


def plan_replays(events: Sequence[AuditEvent], groups: Sequence[Group], *,
                 include_base: bool = True, group_ablation: bool = True,
                 base_removed: Iterable[str] = (),
                 retrieved: Mapping[str, Sequence[str]] | None = None) -> list[ReplayJob]:
    """Every replay CMIS needs, as independent jobs: base, one per candidate, one per group.

    `base_removed` makes it conditional: every job also removes that set (the residual round,
    CMIS in M \\ B after a first batch B); `retrieved` then gives each event's current R.
    """
    base = tuple(base_removed)
    jobs: list[ReplayJob] = []
    for ev in events:
        if include_base:
            jobs.append(make_job(ev.id, "base", "", base))
        rstar = list(dict.fromkeys(retrieved[ev.id] if retrieved else ev.retrieved))
        for mid in rstar:
            jobs.append(make_job(ev.id, "single", mid, (*base, mid)))
        if group_ablation:
            rs = set(rstar)
            for g in groups:
                if rs.intersection(g.members):
                    jobs.append(make_job(ev.id, "group", g.id, (*base, *g.members)))
    return jobs


SIMULATION_CHUNK = 25  # jobs per task for CPU-bound agents: small enough to spread, large enough to amortise


def replay_chunk(max_in_flight: int) -> int:
    """Replay jobs per distributed task. An agent with calls in flight gets two full waves of
    its bound, so no task ends on a half-empty wave (25 jobs at 16 in flight took 2 waves for
    25 calls, 22% idle)."""
    return SIMULATION_CHUNK if max_in_flight <= 1 else 2 * max_in_flight


def run_replay(job: ReplayJob, event: AuditEvent, replayer: Replayer) -> ReplayResult:
    """Replay one job and score every sample's harm."""
    retrieved, out = replayer.replay(event.query, job.removed, event.candidates)
    return _scored(job, event, retrieved, out)


def _scored(job: ReplayJob, event: AuditEvent, retrieved, out) -> ReplayResult:
    harms = [float(event.harm(event.query, s, harmful_output=event.output)) for s in out.samples]
    return ReplayResult(job.job_id, job.event_id, job.kind, job.target, job.removed, out.text,
                        harms, [m.id for m in retrieved])


def run_replays(jobs: Sequence[ReplayJob], evmap: Mapping[str, AuditEvent], replayer: Replayer, *,
                max_in_flight: int | None = None
                ) -> Iterator[tuple[ReplayResult | None, bool, Exception | None]]:
    """``run_replay`` over many jobs with their agent calls in flight together
    (``Replayer.replay_iter``): per job, in job order, (result, made the agent call, error).
    A caller that may stop early (a replay's error raised) closes it (``contextlib.closing``):
    left to the garbage collector, a cycle through the raised error's traceback joined the pool's
    threads from whichever thread the collector ran in (a CI run hung in a thread's start-up)."""
    outcomes = replayer.replay_iter([(evmap[j.event_id].query, j.removed, evmap[j.event_id].candidates)
                                     for j in jobs], max_in_flight=max_in_flight)
    try:
        for job, o in zip(jobs, outcomes):
            if o.error is not None:
                yield None, False, o.error
            else:
                yield _scored(job, evmap[job.event_id], o.retrieved, o.output), o.agent_call, None
    finally:
        outcomes.close()  # its replay pool is shut down here, never by the garbage collector


def combine_cmis(results: Iterable[ReplayResult], events: Sequence[AuditEvent],
                 groups: Sequence[Group], *, combine: str = "max",
                 carries_harm: Callable[[AuditEvent, str], bool] | None = None
                 ) -> dict[str, CmisScore]:
    """Gather replay results into one CMIS per memory (candidates and group members).

    `carries_harm(event, memory_id)`, when given, limits group credit to members whose own
    content is harmful by the event's harm function: a loose group can sweep in clean
    look-alikes (templated records), which did not cause the harm the group's removal cured.
    """
    if combine not in ("max", "sum"):
        raise ValueError("combine must be 'max' or 'sum'")
    by_event: dict[str, list[ReplayResult]] = {}
    for r in results:
        by_event.setdefault(r.event_id, []).append(r)
    gmap = {g.id: g for g in groups}
    per_mem: dict[str, list[dict[str, Any]]] = {}
    for ev in events:
        rs = by_event.get(ev.id, [])
        base = next((r for r in rs if r.kind == "base"), None)
        ref = ev.h_observed if base is None else min(ev.h_observed, base.harm_mean)
        entries: dict[str, dict[str, Any]] = {}

        def entry(mid: str, entries: dict[str, dict[str, Any]] = entries,
                  ev: AuditEvent = ev) -> dict[str, Any]:
            return entries.setdefault(mid, {"event": ev.id, "single": 0.0, "single_se": 0.0,
                                            "group": 0.0, "group_se": 0.0, "group_id": None,
                                            "in_rstar": mid in ev.retrieved})

        for r in rs:
            drop = ref - r.harm_mean
            if r.kind == "single":
                if carries_harm is not None and drop > 0 and not carries_harm(ev, r.target):
                    continue  # its removal let a cure in (backfill); it did not cause the harm
                e = entry(r.target)
                e["single"], e["single_se"] = drop, r.harm_se
            elif r.kind == "group" and r.target in gmap:
                for mid in gmap[r.target].members:
                    if carries_harm is not None and drop > 0 and not carries_harm(ev, mid):
                        continue
                    e = entry(mid)
                    if e["group_id"] is None or drop > e["group"]:
                        e["group"], e["group_se"], e["group_id"] = drop, r.harm_se, r.target
        for mid, e in entries.items():
            if e["single"] >= e["group"]:
                e["score"], e["se"] = e["single"], e["single_se"]
            else:
                e["score"], e["se"] = e["group"], e["group_se"]
            e["reference"] = ref
            e["reproduced"] = base is None or base.harm_mean >= ev.h_observed - 1e-9
            per_mem.setdefault(mid, []).append(e)

    out: dict[str, CmisScore] = {}
    n_samples = max((len(r.harms) for rs in by_event.values() for r in rs), default=1)
    tq = t95(n_samples - 1) if n_samples > 1 else 0.0
    for mid, es in per_mem.items():
        if combine == "sum":
            val = float(sum(e["score"] for e in es))
            se = math.sqrt(sum(e["se"] ** 2 for e in es))
            single = float(sum(e["single"] for e in es))
            group = float(sum(e["group"] for e in es))
        else:
            best = max(es, key=lambda e: e["score"])
            val, se = float(best["score"]), float(best["se"])
            single = float(max(e["single"] for e in es))
            group = float(max(e["group"] for e in es))
        out[mid] = CmisScore(mid, val, val - tq * se, val + tq * se, single, group, len(es), es)
    return out


def replay_all(jobs: Sequence[ReplayJob], evmap: Mapping[str, AuditEvent],
               replayer: Replayer) -> list[ReplayResult]:
    """``run_replay`` for every job, their agent calls in flight together (``run_replays``):
    the results of a sequential loop, in job order; the first replay's error is raised."""
    out = []
    with closing(run_replays(jobs, evmap, replayer)) as outcomes:
        for result, _called, error in outcomes:
            if error is not None:
                raise error
            out.append(result)
    return out


def compute_cmis(events: Sequence[AuditEvent], replayer: Replayer, *,
                 group_thresholds: Sequence[float] = (0.9, 0.8), combine: str = "max",
                 group_ablation: bool = True,
                 progress_cb: Callable[[int, int], None] | None = None
                 ) -> tuple[dict[str, CmisScore], list[Group], list[ReplayResult]]:
    """In-process convenience: find groups, plan, run every job, combine."""
    cands = [m for ev in events for m in ev.retrieved]
    groups = find_groups(cands, replayer.retriever, thresholds=group_thresholds) \
        if group_ablation else []
    jobs = plan_replays(events, groups, group_ablation=group_ablation)
    evmap = {ev.id: ev for ev in events}
    results = []
    for i, job in enumerate(jobs):
        results.append(run_replay(job, evmap[job.event_id], replayer))
        if progress_cb is not None:
            progress_cb(i + 1, len(jobs))
    return combine_cmis(results, events, groups, combine=combine), groups, results
