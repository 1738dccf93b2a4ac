"""Audit runs, steps 1 and 2: create, resume, fail; plan the replays once and record them
(``audit_run_execute``); replay chunks of them (``audit_run_replay``); reuse a finished run's
analysis when nothing it depends on changed (``audit_run_fingerprint``). Messages go through
``audits.dispatch``; step 3 is ``services.analysis``."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from django.conf import settings as conf
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

import audits.engine
from audits import dispatch
from audits.engine.agents import connector_class
from audits.engine.audit import call_budget, plan_cmis
from audits.engine.cmis import SIMULATION_CHUNK, ReplayJob, replay_chunk, run_replays
from audits.models import AuditRun, AuditSuspect, Incident, ReplayJobRecord
from audits.services.replay import _CONTEXTS, run_context
from audits.services.settings import audit_settings_clean
from interchange.readers import chunks
from ledger.models import LogLeaf, Memory, Store
from orgs.notifications import notification_emit, site_url
from orgs.permissions import require

REPLAY_CHUNK = SIMULATION_CHUNK  # replay jobs per Celery task for the simulations (HTTP agents: replay_chunk)


def audit_run_create(*, store: Store, incident_ids: Iterable[int], settings: dict[str, Any] | None = None,
                     user=None, enqueue: bool = True) -> AuditRun:
    """Validate, record and enqueue an audit of ``store`` against the given incidents.

    ``enqueue=False`` leaves it pending for ``audit_run_now`` (the ``audit`` command)."""
    require(user=user, organization=store.organization, capability="propose")
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
            transaction.on_commit(lambda: dispatch.audit_run_enqueue(run.pk))
    return run


def audit_run_resume(*, audit_run_id: int, user=None) -> AuditRun:
    """Pick a stopped or failed run up where its records say it is (nothing is recomputed)."""
    run = AuditRun.objects.get(pk=audit_run_id)
    require(user=user, organization=run.organization, capability="propose")
    if run.status == AuditRun.Status.DONE:
        return run
    AuditRun.objects.filter(pk=run.pk).exclude(status=AuditRun.Status.DONE).update(
        status=AuditRun.Status.PENDING, error="")
    dispatch.audit_run_enqueue(run.pk)
    run.refresh_from_db()
    return run


def audit_runs_resume_unfinished() -> int:
    """Re-drive every run still pending or running (a worker was killed, a broker lost its
    messages). Safe while another worker still holds some of its jobs: a job is recorded once
    (conditional UPDATE), the analysis starts once, and replays come from the cache."""
    ids = list(AuditRun.objects.filter(status__in=[AuditRun.Status.PENDING, AuditRun.Status.RUNNING])
               .values_list("pk", flat=True))
    for run_id in ids:
        dispatch.audit_run_enqueue(run_id)
    return len(ids)


def audit_run_fail(*, audit_run_id: int, error: str) -> None:
    AuditRun.objects.filter(pk=audit_run_id).exclude(status=AuditRun.Status.DONE).update(
        status=AuditRun.Status.FAILED, error=error[:5000], finished_at=timezone.now())
    _CONTEXTS.drop(audit_run_id)



def audit_run_execute(*, audit_run_id: int) -> None:
    """Step 1 (queue ``audit``): plan the replays and fan out the pending ones. Idempotent."""
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
            ctx = run_context(run)
            plan = plan_cmis(ctx.events, ctx.retriever, ctx.params)
            jobs = plan.jobs
            budget = call_budget(len(ctx.events), run.settings.get("budget"))
            if len(jobs) > budget:
                raise _AuditError(f"the CMIS plan needs {len(jobs)} replays, over the budget of {budget} agent "
                                  "calls; raise the budget or audit fewer incidents")
            with transaction.atomic():
                ReplayJobRecord.objects.bulk_create(
                    [ReplayJobRecord(run=run, job_id=j.job_id, event_id=j.event_id, kind=j.kind, target=j.target,
                                     removed=list(j.removed)) for j in jobs],
                    batch_size=500, ignore_conflicts=True)
                AuditRun.objects.filter(pk=run.pk).update(
                    replays_total=run.jobs.count(), replays_done=0, stage=AuditRun.Stage.REPLAY,
                    results={"groups": [{"id": g.id, "members": list(g.members), "threshold": g.threshold}
                                        for g in plan.groups],
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
            dispatch.audit_analysis_enqueue(run.pk)
        else:
            _maybe_start_analysis(run.pk)
        return
    simulation = connector_class(run.settings.get("agent", {}).get("connector")).simulation
    for chunk in chunks(pending, REPLAY_CHUNK if simulation else replay_chunk(conf.AGENT_MAX_IN_FLIGHT)):
        dispatch.audit_replays_enqueue(run.pk, chunk)


# ---------------------------------------------------------------------------- analysis reuse

_ENGINE_DIGEST: str | None = None


def _engine_digest() -> str:
    """A digest of the engine's source, so a changed algorithm never reuses old results."""
    global _ENGINE_DIGEST
    if _ENGINE_DIGEST is None:
        h = hashlib.sha256()
        for path in sorted(Path(audits.engine.__file__).parent.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        _ENGINE_DIGEST = h.hexdigest()
    return _ENGINE_DIGEST


def audit_run_fingerprint(run: AuditRun) -> str:
    """1. the store's ledger state: the organization's log size (every genesis, weight change
    and label is a log leaf) and the store's signed-memory count; 2. the incidents' contents;
    3. the run's settings; 4. the engine's code. Equal fingerprints give equal analyses."""
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
    notification_emit(organization_id=run.organization_id, event="audit.finished", payload=finished_payload(run))
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
        ctx = run_context(run)
        jobs = [ReplayJob(rec.job_id, rec.event_id, rec.kind, rec.target, tuple(rec.removed)) for rec in records]
        # The chunk's agent calls are in flight together (bounded per endpoint by
        # AGENT_MAX_IN_FLIGHT); results are recorded here, in job order, on this connection.
        with closing(run_replays(jobs, ctx.evmap, ctx.replayer)) as outcomes:
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
    if ReplayJobRecord.objects.filter(run_id=run_id, status=ReplayJobRecord.Status.PENDING).exists():
        return
    n = AuditRun.objects.filter(pk=run_id, status=AuditRun.Status.RUNNING, stage=AuditRun.Stage.REPLAY).update(
        stage=AuditRun.Stage.ANALYSIS)
    if n == 1:
        transaction.on_commit(lambda: dispatch.audit_analysis_enqueue(run_id))


def finished_payload(run: AuditRun) -> dict:
    """What a finished-audit notification says: ids and counts, never memory text."""
    return {"audit_run": run.pk, "store": run.store_id, "status": "done",
            "suspects": AuditSuspect.objects.filter(run=run).count(), "url": site_url(f"/audits/{run.pk}/")}
