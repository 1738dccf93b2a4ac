"""Celery tasks: thin wrappers that take ids and call a service.

Tasks import the services, never the reverse: services send messages through
``audits.dispatch`` (by these tasks' names).

Routing (settings.CELERY_TASK_ROUTES): names containing ``replay`` go to the ``replay`` queue,
the rest of ``audits.tasks`` to ``audit``. Tasks are acknowledged late, so a task whose worker
is killed is delivered again; every service here is idempotent for that reason.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready

from audits import dispatch, ui_selectors
from audits.engine.agents import AgentError
from audits.models import AuditRun
from audits.services import analysis, incidents, review, runs
from interchange.issues import ValidationError, issues_as_dicts
from ledger.imports import import_job_result, import_staged_claim
from orgs.models import Organization

logger = logging.getLogger(__name__)


@shared_task(name="audits.tasks.audit_run_task")
def audit_run_task(audit_run_id: int) -> None:
    try:
        runs.audit_run_execute(audit_run_id=audit_run_id)
    except Exception as exc:
        runs.audit_run_fail(audit_run_id=audit_run_id, error=f"planning failed: {exc}")
        raise


@shared_task(name="audits.tasks.audit_replay_task")
def audit_replay_task(audit_run_id: int, job_ids: list[str]) -> int:
    try:
        return runs.audit_run_replay(audit_run_id=audit_run_id, job_ids=job_ids)
    except AgentError as exc:
        # The agent is unreachable after the connector's own retries: stop the run with the
        # reason. Recorded replays are kept; audit_run_resume goes on from there.
        runs.audit_run_fail(audit_run_id=audit_run_id, error=f"agent error: {exc}")
        return 0


@shared_task(name="audits.tasks.audit_analysis_task")
def audit_analysis_task(audit_run_id: int) -> None:
    try:
        analysis.audit_run_analyse(audit_run_id=audit_run_id)
    except AgentError as exc:
        runs.audit_run_fail(audit_run_id=audit_run_id, error=f"agent error: {exc}")
        return
    except Exception as exc:
        runs.audit_run_fail(audit_run_id=audit_run_id, error=f"analysis failed: {exc}")
        raise
    # Lay out the results page's graph views once, here, not on the first page view; a failure
    # only costs that page view the layout, never the finished run.
    run = AuditRun.objects.filter(pk=audit_run_id).first()
    if run is not None and run.status == AuditRun.Status.DONE:
        try:
            ui_selectors.graph_views_warm(run=run)
        except Exception:
            logger.exception("graph layout of audit run %s failed; the page lays it out when opened", audit_run_id)


@shared_task(name="audits.tasks.proposals_sync_task")
def proposals_sync_task() -> int:
    return review.proposals_sync()


@shared_task(name="audits.tasks.review_queue_sync_task")
def review_queue_sync_task() -> int:
    """Record the decisions the housekeeper has signed and bring the ingest classifier's flags
    into every organization's review queue (Celery beat; the queue's pages only read)."""
    n = review.proposals_sync()
    for org in Organization.objects.all():
        n += review.classifier_flags_sync(organization=org)
    return n


@shared_task(name="audits.tasks.audit_runs_resume_unfinished_task")
def audit_runs_resume_unfinished_task() -> int:
    return runs.audit_runs_resume_unfinished()


@worker_ready.connect
def _resume_after_a_worker_restart(sender=None, **kwargs) -> None:
    """A worker that (re)starts picks up audits whose worker died mid-run: with the embedded
    broker a killed worker's message is not redelivered, and Redis redelivers only after its
    visibility timeout. Only workers of the ``audit`` queue do it (not the housekeeper)."""
    consumes = {q.name for q in sender.app.amqp.queues.consume_from.values()} if sender is not None else {"audit"}
    if "audit" in consumes:
        dispatch.audit_runs_resume_enqueue()


@shared_task(name="audits.tasks.incidents_import_staged_task")
def incidents_import_staged_task(import_job_id: int) -> int:
    """Import a staged incidents upload (over IMPORT_INLINE_MAX_BYTES) away from the web request;
    the outcome is recorded on its ImportJob (done with the count, or failed with the issues)."""
    claimed = import_staged_claim(job_id=import_job_id)
    if claimed is None:
        return 0
    job, data = claimed
    try:
        created = incidents.incidents_import(store=job.store, data=data, filename=job.filename, user=job.created_by)
    except ValidationError as exc:
        import_job_result(job_id=job.pk, total=0, errors=issues_as_dicts(exc.issues), issue_count=exc.total)
        return 0
    import_job_result(job_id=job.pk, total=len(created))
    return len(created)
