"""Review proposals as decisions the housekeeper signs from (``ledger.decisions``).

Registered as the resolver of ``proposal:<id>`` label tasks when this app loads (``audits.apps``):
the housekeeper loads the proposal, re-checks who proposed and who decided under the
organization's review rules at that moment (``review_ineligibility``, the same rules the review
queue and the decision use), and rebuilds the label — or refuses.

A proposal of kind ``correction`` (issue 16) calls for no flag and, once approved, for one
signed down-weight transition (:class:`~ledger.decisions.TransitionSpec`) whose evidence names
the proposal, the correcting memory, the audit and who proposed and decided; a rejected one
calls for nothing.
"""

from __future__ import annotations

from typing import Any

from audits.models import ReviewProposal
from audits.services.review import review_ineligibility
from ledger.decisions import OPERATOR_ACTOR, LabelSpec, Refused, TransitionSpec, active_membership
from ledger.models import EpistemicLabel

# A correction's down-weight: valence -1 at eta ln(10), so the weight (recall's score is cosine x
# weight) falls to a tenth of what it was, never below the ledger's floor (0.1).
CORRECTION_VALENCE_Q = -1000
CORRECTION_ETA_Q = 2303


def _actor_for(user) -> str:
    return f"user:{user.get_username()}" if user is not None else OPERATOR_ACTOR


def proposal_evidence(p, key: str) -> dict[str, Any]:
    """The signed evidence of a proposal's labels (same shape ``audits.services`` used to send)."""
    ev: dict[str, Any] = {"idempotency_key": key, "proposal": p.pk, "source": p.source}
    if p.audit_run_id:
        ev["audit_run"] = p.audit_run_id
    # Signed bodies hold no floats: scores go in as integer milli-units.
    ev["scores_milli"] = {k: round(float(v) * 1000) for k, v in (p.scores or {}).items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return ev


def _check_proposer(p) -> None:
    org = p.organization
    if p.proposed_by_id is None:
        if p.proposed_by_actor != OPERATOR_ACTOR:
            raise Refused(f"proposal {p.pk}: its proposer ({p.proposed_by_actor}) is no longer a user",
                          organization=org)
        return
    m = active_membership(p.proposed_by, org)
    if m is None:
        raise Refused(f"proposal {p.pk}: {_actor_for(p.proposed_by)} is not an active member of {org.slug}",
                      organization=org)
    if not m.can_propose:
        raise Refused(f"proposal {p.pk}: {_actor_for(p.proposed_by)} ({m.role}) may not propose",
                      organization=org)


def _flag_spec(p) -> LabelSpec:
    _check_proposer(p)
    return LabelSpec(p.memory_id, EpistemicLabel.Label.SUSPECT.value, p.reason, proposal_evidence(p, p.flag_key),
                     p.proposed_by_actor, p.flag_key)


def _check_decision(p) -> None:
    org = p.organization
    if p.status not in (ReviewProposal.Status.APPLYING, ReviewProposal.Status.APPROVED,
                        ReviewProposal.Status.REFUTED) or p.decision not in (ReviewProposal.Decision.APPROVE,
                                                                             ReviewProposal.Decision.REFUTE):
        raise Refused(f"proposal {p.pk} has no recorded decision (status {p.status})", organization=org)
    if not (p.decision_reason or "").strip():
        raise Refused(f"proposal {p.pk}: the decision has no reason", organization=org)
    if p.decided_by_id is not None:
        m = active_membership(p.decided_by, org)
        if m is None:
            raise Refused(f"proposal {p.pk}: {_actor_for(p.decided_by)} is not an active member of {org.slug}",
                          organization=org)
        if not m.can_review:
            raise Refused(f"proposal {p.pk}: {_actor_for(p.decided_by)} ({m.role}) may not review",
                          organization=org)
        # The review rules themselves (four eyes, no approving through an account the proposer
        # just invited) live in one place, which the review queue and the decision also use.
        blocked = review_ineligibility(proposal=p, user=p.decided_by, decision=p.decision, membership=m)
        if blocked:
            raise Refused(f"proposal {p.pk}: decided by {_actor_for(p.decided_by)}, who may not: {blocked}",
                          organization=org)


def _decision_spec(p) -> LabelSpec:
    _check_decision(p)
    label = EpistemicLabel.Label.LIKELY if p.decision == ReviewProposal.Decision.APPROVE else \
        EpistemicLabel.Label.REFUTED
    return LabelSpec(p.memory_id, label.value, p.decision_reason, proposal_evidence(p, p.decision_key),
                     _actor_for(p.decided_by), p.decision_key)


def correction_evidence(p) -> tuple[str, ...]:
    """The signed evidence of a correction's down-weight, most telling first (the memory page
    shows the first four): the proposal, the correcting memory, the audit, who decided."""
    corrected_by = p.corrected_by.ledger_id if p.corrected_by_id else "none"
    ev = [f"correction:proposal:{p.pk}", f"corrected_by:{corrected_by}"]
    if p.audit_run_id:
        ev.append(f"audit_run:{p.audit_run_id}")
    ev += [f"decided_by:{_actor_for(p.decided_by)}", f"proposed_by:{p.proposed_by_actor}",
           f"kind:{p.correction_kind or 'honest-error'}", f"key:{p.decision_key}"]
    return tuple(ev)


def _correction_specs(p) -> list[TransitionSpec]:
    org = p.organization
    if p.decision == ReviewProposal.Decision.REFUTE:
        raise Refused(f"proposal {p.pk}: a rejected correction calls for no signed entry", organization=org)
    if p.decision != ReviewProposal.Decision.APPROVE:
        raise Refused(f"proposal {p.pk}: the correction is not decided yet (status {p.status})", organization=org)
    _check_proposer(p)
    _check_decision(p)
    cb = p.corrected_by
    if cb is not None and (cb.store_id != p.store_id or cb.pk == p.memory_id):
        raise Refused(f"proposal {p.pk}: its correcting memory is not another memory of the same store",
                      organization=org)
    return [TransitionSpec(p.memory_id, CORRECTION_VALENCE_Q, CORRECTION_ETA_Q, correction_evidence(p),
                           p.decision_key)]


def proposal_specs(proposal_id: int) -> list[LabelSpec | TransitionSpec]:
    """The labels a review proposal calls for now: its ``poison_suspect`` flag while it is open,
    its decision's label once one is recorded.

    Both are idempotent (their keys are in the signed evidence), so the one reference serves the
    proposing and the deciding task alike; a decision that is not eligible refuses the whole task.
    """
    p = ReviewProposal.objects.select_related("organization", "store", "memory", "proposed_by", "decided_by",
                                              "corrected_by", "memory__store", "corrected_by__store") \
        .filter(pk=proposal_id).first()
    if p is None:
        raise Refused(f"proposal {proposal_id} does not exist")
    if p.memory.organization_id != p.organization_id or p.store_id != p.memory.store_id:
        raise Refused(f"proposal {p.pk} names a memory of another store or organization", organization=p.organization)
    if p.kind == ReviewProposal.Kind.CORRECTION:
        return _correction_specs(p)
    specs = []
    # The flag stands for "proposed, not decided yet": once a decision is recorded the decision's
    # label is what counts, so a late flag message signs nothing of its own.
    if p.source == ReviewProposal.Source.AUDIT and p.status == ReviewProposal.Status.OPEN:
        specs.append(_flag_spec(p))
    if p.decision or p.status != ReviewProposal.Status.OPEN:
        specs.append(_decision_spec(p))
    if not specs:
        raise Refused(f"proposal {p.pk} calls for no label (a classifier proposal not yet decided)",
                      organization=p.organization)
    return specs
