"""Celery tasks: thin wrappers that take ids and call a service.

Routing (settings.CELERY_TASK_ROUTES): names containing ``replay`` go to the ``replay`` queue,
the rest of ``audits.tasks`` to ``audit``. Tasks are acknowledged late, so a task whose worker
is killed is delivered again; every service here is idempotent for that reason.
"""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from audits import services
from audits.engine.agents import AgentError


@shared_task(name="audits.tasks.audit_run_task")
def audit_run_task(audit_run_id: int) -> None:
    try:
        services.audit_run_execute(audit_run_id=audit_run_id)
    except Exception as exc:
        services.audit_run_fail(audit_run_id=audit_run_id, error=f"planning failed: {exc}")
        raise


@shared_task(name="audits.tasks.audit_replay_task")
def audit_replay_task(audit_run_id: int, job_ids: list[str]) -> int:
    try:
        return services.audit_run_replay(audit_run_id=audit_run_id, job_ids=job_ids)
    except AgentError as exc:
        # The agent is unreachable after the connector's own retries: stop the run with the
        # reason. Recorded replays are kept; audit_run_resume goes on from there.
        services.audit_run_fail(audit_run_id=audit_run_id, error=f"agent error: {exc}")
        return 0


@shared_task(name="audits.tasks.audit_analysis_task")
def audit_analysis_task(audit_run_id: int) -> None:
    try:
        services.audit_run_analyse(audit_run_id=audit_run_id)
    except AgentError as exc:
        services.audit_run_fail(audit_run_id=audit_run_id, error=f"agent error: {exc}")
    except Exception as exc:
        services.audit_run_fail(audit_run_id=audit_run_id, error=f"analysis failed: {exc}")
        raise


@shared_task(name="audits.tasks.proposals_sync_task")
def proposals_sync_task() -> int:
    return services.proposals_sync()


@shared_task(name="audits.tasks.review_queue_sync_task")
def review_queue_sync_task() -> int:
    """Record the decisions the housekeeper has signed and bring the ingest classifier's flags
    into every organization's review queue (Celery beat; the queue's pages only read)."""
    from orgs.models import Organization

    n = services.proposals_sync()
    for org in Organization.objects.all():
        n += services.classifier_flags_sync(organization=org)
    return n


@shared_task(name="audits.tasks.audit_runs_resume_unfinished_task")
def audit_runs_resume_unfinished_task() -> int:
    return services.audit_runs_resume_unfinished()


@worker_ready.connect
def _resume_after_a_worker_restart(sender=None, **kwargs) -> None:
    """A worker that (re)starts picks up audits whose worker died mid-run: with the embedded
    broker a killed worker's message is not redelivered, and Redis redelivers only after its
    visibility timeout. Only workers of the ``audit`` queue do it (not the housekeeper)."""
    consumes = {q.name for q in sender.app.amqp.queues.consume_from.values()} if sender is not None else {"audit"}
    if "audit" in consumes:
        audit_runs_resume_unfinished_task.delay()


@shared_task(name="audits.tasks.incidents_import_staged_task")
def incidents_import_staged_task(import_job_id: int) -> int:
    """Import a staged incidents upload (over IMPORT_INLINE_MAX_BYTES) away from the web request;
    the outcome is recorded on its ImportJob (done with the count, or failed with the issues)."""
    from audits.engine.scenario import ValidationError
    from ledger.imports import import_job_result, import_staged_claim

    claimed = import_staged_claim(job_id=import_job_id)
    if claimed is None:
        return 0
    job, data = claimed
    try:
        created = services.incidents_import(store=job.store, data=data, filename=job.filename, user=job.created_by)
    except ValidationError as exc:
        import_job_result(job_id=job.pk, total=0, errors=[i.as_dict() for i in exc.issues], issue_count=exc.total)
        return 0
    import_job_result(job_id=job.pk, total=len(created))
    return len(created)
