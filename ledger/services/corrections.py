"""Signed weight transitions that follow from a recorded decision (issue 16: corrections).

A review proposal of kind ``correction`` that a reviewer approved calls for one down-weight of
its memory; the housekeeper rebuilds it from the proposal row (``ledger.decisions``: who
proposed, who decided, the organization's review rules now) and appends it through the verified
write path (:func:`ledger.services.writes.transitions_append`). The message names the decision
and nothing else, as for labels, so a message written straight into the broker signs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from ledger.decisions import (
    TransitionSpec,
    decision_of_task,
    decision_transitions_resolve,
    transition_key_in,
)
from ledger.models import Memory, ProvenanceNode
from ledger.services.writes import transitions_append
from ledger.signing import require_housekeeper

TASK = "ledger.tasks.correction_transition_task"


def transition_for_key(*, memory_id: int, key: str) -> ProvenanceNode | None:
    """The provenance node a decision already appended on ``memory_id`` (its key is in the
    signed evidence), or None. A memory has few nodes; they are scanned rather than queried by
    JSON containment, which SQLite does not offer for lists."""
    for node in ProvenanceNode.objects.filter(memory_id=memory_id).order_by("seq"):
        if transition_key_in(node.evidence, key):
            return node
    return None


def _append_once(spec: TransitionSpec, now: datetime | None) -> ProvenanceNode:
    with transaction.atomic():
        # Under the memory's row lock: a redelivered (or concurrent) task sees the first one's node.
        list(Memory.objects.select_for_update().filter(pk=spec.memory_id).values_list("pk"))
        existing = transition_for_key(memory_id=spec.memory_id, key=spec.idempotency_key)
        if existing is not None:
            return existing
        return transitions_append(items=[{"memory_id": spec.memory_id, "valence_q": spec.valence_q,
                                          "eta_q": spec.eta_q, "evidence": list(spec.evidence)}], now=now)[0]


def decision_transitions_sign(*, decision: object, unexpected_args: Sequence = (),
                              unexpected_kwargs: dict | None = None,
                              now: datetime | None = None) -> list[ProvenanceNode]:
    """Append the weight transitions a recorded decision calls for, once each; refuse (and
    record, as ``decision_labels_sign`` does) anything else. Returns the provenance nodes."""
    require_housekeeper("signing a decision's weight transitions")
    resolved = decision_of_task(decision_transitions_resolve, decision=decision, unexpected_args=unexpected_args,
                                unexpected_kwargs=unexpected_kwargs, task=TASK)
    return [] if resolved is None else [_append_once(s, now) for s in resolved[2]]
