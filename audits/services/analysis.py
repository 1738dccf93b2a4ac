"""Audit runs, step 3: the analysis over the replays step 1 planned and step 2 recorded (the
plan is not made again and no CMIS replay is repeated): graph, CAS, fusion, the batch, residual
harm and baselines; suspect rows are replaced atomically. ``audit_run_now`` runs all three steps
in this process."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from audits.engine.audit import CmisPlan, analyse, plan_candidates, plan_cmis
from audits.engine.cmis import Group, ReplayJob, ReplayResult
from audits.engine.consistency import make_backend
from audits.engine.replay import Replayer
from audits.models import AuditRun, AuditSuspect, ReplayJobRecord
from audits.services.replay import _CONTEXTS, RunContext, run_context
from audits.services.runs import audit_run_execute, audit_run_fail, audit_run_replay, finished_payload
from orgs.notifications import notification_emit


def recorded_plan(run: AuditRun, ctx: RunContext) -> tuple[CmisPlan, list[ReplayResult], int]:
    """The plan step 1 recorded (its groups in the run's results, its jobs as rows), the results
    step 2 recorded, and how many of them reached the agent."""
    rows = list(run.jobs.order_by("pk").values_list("job_id", "event_id", "kind", "target", "removed", "status",
                                                    "result"))
    recorded = (run.results or {}).get("groups")
    if recorded is None:  # a run planned before its groups were recorded: plan again (no replay)
        groups = plan_cmis(ctx.events, ctx.retriever, ctx.params).groups
    else:
        groups = [Group(g["id"], tuple(g["members"]), float(g["threshold"])) for g in recorded]
    jobs = [ReplayJob(job_id, event_id, kind, target, tuple(removed))
            for job_id, event_id, kind, target, removed, _, _ in rows]
    missing = [r[0] for r in rows if r[5] != ReplayJobRecord.Status.DONE or not r[6]]
    if missing:
        raise ValueError(f"{len(missing)} replay(s) have no recorded result, e.g. {missing[0]}")
    results = [ReplayResult.from_dict(r[6]) for r in rows]
    calls = sum(1 for r in rows if r[6].get("agent_call"))
    return CmisPlan(plan_candidates(ctx.events, ctx.retriever), groups, jobs), results, calls


def audit_run_analyse(*, audit_run_id: int) -> None:
    """Step 3 (queue ``audit``): graph, CAS, fusion, batch, residual harm, baselines."""
    run = AuditRun.objects.select_related("store").get(pk=audit_run_id)
    if run.status != AuditRun.Status.RUNNING:
        return
    t0 = time.perf_counter()
    ctx = run_context(run)
    if not ctx.view.records:
        audit_run_fail(audit_run_id=run.pk, error="the store has no signed memories to audit")
        return
    plan, results, cmis_calls = recorded_plan(run, ctx)
    # A replayer of its own (the run's cache, warm): its calls are the analysis's own replays.
    replayer = Replayer(ctx.agent, ctx.retriever, ctx.params.top_k, ctx.replayer.cache)
    result = analyse(plan, results, events=ctx.events, retriever=ctx.retriever, replayer=replayer,
                     params=ctx.params, backend=make_backend(run.settings["consistency"]), nli_cache=ctx.nli_cache,
                     calls_spent=cmis_calls)
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
    # The analysis counts the agent calls it made (residual, conditional, expansion, baseline and
    # collateral replays); the CMIS replays were made (or found cached) in step 2.
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
        notification_emit(organization_id=run.organization_id, event="audit.finished", payload=finished_payload(run))
    _CONTEXTS.drop(run.pk)


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
