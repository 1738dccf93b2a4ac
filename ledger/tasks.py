"""Housekeeper tasks: ids in, one service call. Routed to the ``housekeeper`` queue
(``ledger.tasks.*``); each holds the housekeeper role while it runs (see ``ledger.signing``)."""

from __future__ import annotations

from celery import shared_task

from ledger import services
from ledger.signing import housekeeper_role
from orgs.models import Organization


@shared_task
def memory_genesis_sign_task(memory_ids: list[int]) -> int:
    with housekeeper_role():
        return services.memory_genesis_sign(memory_ids=memory_ids)


@shared_task
def label_append_task(memory_id: int, label: str, reason: str, evidence: dict, actor: str,
                      idempotency_key: str | None = None) -> int:
    with housekeeper_role():
        return services.label_append(memory_id=memory_id, label=label, reason=reason, evidence=evidence,
                                     actor=actor, idempotency_key=idempotency_key).pk


@shared_task
def outcomes_apply_task(organization_id: int) -> int:
    with housekeeper_role():
        return services.outcomes_apply(organization=Organization.objects.get(pk=organization_id))


@shared_task
def tree_head_issue_task(organization_id: int) -> int:
    with housekeeper_role():
        return services.tree_head_issue(organization=Organization.objects.get(pk=organization_id)).size


@shared_task
def housekeeper_rotate_task(organization_id: int) -> int:
    """A new key epoch endorsed by the current one; the private key stays on the housekeeper host."""
    with housekeeper_role():
        return services.housekeeper_rotate(organization=Organization.objects.get(pk=organization_id)).number


@shared_task(bind=True, max_retries=720)
def import_history_apply_task(self, import_job_id: int) -> int:
    """Sign an import's foreign history (mem0 UPDATE/DELETE) once its genesis entries are signed."""
    from ledger.imports import import_history_apply, import_history_ready

    if not import_history_ready(job_id=import_job_id):
        raise self.retry(countdown=5)
    with housekeeper_role():
        return import_history_apply(job_id=import_job_id)
