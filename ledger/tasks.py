"""Housekeeper tasks: ids in, one service call. Routed to the ``housekeeper`` queue
(``ledger.tasks.*``); each holds the housekeeper role while it runs (see ``ledger.signing``).

``recall_prepare_task`` is the exception: it signs nothing, so it is registered under a
``ledger.recall_tasks.*`` name, which routes it to the ``audit`` queue, and holds no role."""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.exceptions import ValidationError

from ledger.core.errors import LedgerError
from ledger.embedding_store import store_prepare
from ledger.imports import import_history_apply, import_history_ready
from ledger.models import Store
from ledger.services import corrections, keys, tree_heads, writes
from ledger.signing import housekeeper_role
from orgs.models import Organization

logger = logging.getLogger(__name__)


@shared_task
def memory_genesis_sign_task(memory_ids: list[int]) -> int:
    with housekeeper_role():
        return writes.memory_genesis_sign(memory_ids=memory_ids)


@shared_task
def label_append_task(*args, **kwargs) -> int:
    """Sign the labels a recorded decision calls for: ``label_append_task(decision="proposal:<id>")``
    (or ``"finding:<id>"``); returns how many labels the decision has signed.

    The message carries the decision's id and nothing else: label, reason, actor and evidence
    are rebuilt from the decision row by the housekeeper (``ledger.decisions``). Any other shape
    (a label, an actor of the sender's choosing) is refused and recorded, never signed.
    """
    with housekeeper_role():
        if len(args) == 1 and not kwargs:
            args, kwargs = (), {"decision": args[0]}
        decision = kwargs.pop("decision", None)
        return len(writes.decision_labels_sign(decision=decision, unexpected_args=args,
                                                 unexpected_kwargs=kwargs))


@shared_task
def outcomes_apply_task(organization_id: int) -> int:
    with housekeeper_role():
        return writes.outcomes_apply(organization=Organization.objects.get(pk=organization_id))


@shared_task
def tree_head_issue_task(organization_id: int) -> int:
    with housekeeper_role():
        return tree_heads.tree_head_issue(organization=Organization.objects.get(pk=organization_id)).size


@shared_task
def housekeeper_rotate_task(organization_id: int) -> int:
    """A new key epoch endorsed by the current one; the private key stays on the housekeeper host."""
    with housekeeper_role():
        return keys.housekeeper_rotate(organization=Organization.objects.get(pk=organization_id)).number


@shared_task
def tree_heads_issue_due_task() -> int:
    """Celery beat, every TREE_HEAD_INTERVAL_S: a tree head for each organization whose log grew."""
    with housekeeper_role():
        return tree_heads.tree_heads_issue_due()


@shared_task
def tree_head_after_labels_task(organization_id: int) -> int:
    """Queued after a batch of labels: a tree head covering them. A failure (no valid epoch yet)
    is logged, not raised: the labels stand, and the schedule retries within a minute."""
    with housekeeper_role():
        try:
            return tree_heads.tree_head_issue(organization=Organization.objects.get(pk=organization_id)).size
        except (ValidationError, LedgerError, OSError) as exc:
            logger.warning("tree head after labels for organization %s: %s", organization_id, exc)
            return -1


@shared_task
def receipt_key_endorse_task(organization_id: int, receipt_key_id: int) -> int:
    """Endorse a recall-receipt key with the current epoch key (asked for by the recall process)."""
    with housekeeper_role():
        return keys.receipt_key_endorse(organization=Organization.objects.get(pk=organization_id),
                                            receipt_key_id=receipt_key_id).seq


@shared_task
def receipt_key_revoke_task(organization_id: int, key_id: str) -> int:
    """Revoke a receipt key's endorsements from now on; the recall process then rotates to a new key."""
    with housekeeper_role():
        return keys.receipt_key_revoke(organization=Organization.objects.get(pk=organization_id), key_id=key_id)


@shared_task(bind=True, max_retries=720)
def import_history_apply_task(self, import_job_id: int) -> int:
    """Sign an import's foreign history (mem0 UPDATE/DELETE) once its genesis entries are signed."""
    if not import_history_ready(job_id=import_job_id):
        raise self.retry(countdown=5)
    with housekeeper_role():
        return import_history_apply(job_id=import_job_id)



@shared_task
def correction_transition_task(*args, **kwargs) -> int:
    """Sign the down-weight a recorded correction calls for (issue 16):
    ``correction_transition_task(decision="proposal:<id>")``; returns how many transitions it signed
    or found already signed. As for labels, the message carries the decision's id and nothing else;
    any other shape is refused and recorded (``ledger.services.corrections``)."""
    with housekeeper_role():
        if len(args) == 1 and not kwargs:
            args, kwargs = (), {"decision": args[0]}
        decision = kwargs.pop("decision", None)
        return len(corrections.decision_transitions_sign(decision=decision, unexpected_args=args,
                                                         unexpected_kwargs=kwargs))


@shared_task(name="ledger.recall_tasks.recall_prepare_task")
def recall_prepare_task(store_id: int) -> dict:
    """Ahead of recall, on a worker: grow and save the store's ANN graph (stores over
    RECALL_ANN_MIN) and verify the memories whose live state moved since the last run, so the
    request path neither builds a large graph nor verifies chains it has seen verified."""
    result = store_prepare(Store.objects.select_related("organization").get(pk=store_id))
    logger.info("recall_prepare store %s: %s", store_id, result)
    return result
