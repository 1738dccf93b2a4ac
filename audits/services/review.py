"""Review: proposals from an audit's batch, decisions (one and in bulk), the four-eyes rules
(``review_ineligibility``), syncing what the housekeeper signed, and the ingest classifier's
flags brought into the queue.

Proposing appends a signed ``poison_suspect`` label, a flag (on a four-eyes organization the
memory stays in recall until a second person approves; ``ledger.recall.excluded_states`` is the
one exclusion rule); approval appends ``poison_likely``, refutation ``poison_refuted``. A refuted
memory is proposed again only on new evidence (``selectors.proposal_blockers``). Decisions are
claimed with a conditional UPDATE ``open -> applying`` (a double click decides once) and the
label is appended by the housekeeper worker with an idempotency key (a redelivered task appends
nothing twice); ``proposal_sync`` marks the proposal decided once its label exists.

Corrections (issue 16): an audit's honest errors are proposed with ``corrections_create_from_run``
as proposals of kind ``correction`` — no flag, the memory stays in recall at its weight. The same
review rules decide them; approval has the housekeeper append a signed down-weight transition
with the correcting memory linked in its evidence (``audits.decisions``,
``ledger.tasks.correction_transition_task``); rejection signs nothing and closes the proposal.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings as conf
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from audits import dispatch, selectors
from audits.models import AuditRun, ReviewProposal
from ledger.models import EpistemicLabel, Memory
from ledger.services import transition_for_key
from orgs.models import Membership, Organization
from orgs.permissions import require
from orgs.services import activity_record


def actor_for(user) -> str:
    return f"user:{user.get_username()}" if user is not None else "system:memaudit"


def _label_for_key(*, memory_id: int, key: str) -> EpistemicLabel | None:
    # The key is also written into the signed evidence, so the label can be found from here
    # whatever the ledger keeps on the side.
    return EpistemicLabel.objects.filter(memory_id=memory_id, evidence__idempotency_key=key).order_by("seq").first()


class ProposedBatch(list):
    """The proposals a call created (a list, as before), and ``skipped``: {memory id: why not}."""

    def __init__(self, created: Iterable[ReviewProposal] = (), skipped: dict[int, str] | None = None) -> None:
        super().__init__(created)
        self.skipped: dict[int, str] = dict(skipped or {})


def proposals_create_from_run(*, audit_run: AuditRun, user, memory_ids: Iterable[int] | None = None,
                              reason: str = "") -> ProposedBatch:
    """Propose the run's batch (or the chosen suspects) for review; append ``poison_suspect``.

    Memories that ``proposal_blockers`` names are skipped; the answer's ``skipped`` says why.
    """
    require(user=user, organization=audit_run.organization, capability="propose")
    if audit_run.status != AuditRun.Status.DONE:
        raise DjangoValidationError({"audit_run": ["the audit has not finished"]})
    suspects = audit_run.suspects.select_related("memory")
    # The engine's verdict per batch member (issue 16): only poison-like members are proposed
    # as poison_suspect by default; honest errors are left for an explicit choice.
    verdicts = (audit_run.results or {}).get("verdicts") or {}
    if memory_ids is None:
        suspects = suspects.filter(in_batch=True)
        honest = [ext for ext, v in verdicts.items() if v.get("verdict") == "honest-error"]
        if honest:
            suspects = suspects.exclude(memory__external_id__in=honest)
    else:
        wanted = {int(m) for m in memory_ids}
        suspects = suspects.filter(memory_id__in=wanted)
        found = set(suspects.values_list("memory_id", flat=True))
        if found != wanted:
            raise DjangoValidationError({"memory_ids": [f"not suspects of this run: {sorted(wanted - found)}"]})
    suspects = list(suspects)
    created: list[ReviewProposal] = []
    actor = actor_for(user)
    with transaction.atomic():
        # Decided under the lock of the memories' rows, so two clicks cannot both pass the checks.
        list(Memory.objects.select_for_update().filter(pk__in=[s.memory_id for s in suspects]).values_list("pk"))
        skipped = selectors.proposal_blockers(audit_run=audit_run, suspects=suspects)
        for s in suspects:
            if s.memory_id in skipped:
                continue
            scores = {"rank": s.rank, "ds": s.ds, "cmis": s.cmis, "cas": s.cas, "in_batch": s.in_batch}
            why = reason or (f"Audit #{audit_run.pk}: rank {s.rank}, DS {s.ds:.3f} "
                             f"(CMIS {s.cmis:.3f}, CAS {s.cas:.3f})")
            v = verdicts.get(s.memory.external_id)
            if v and not reason:
                why += f"; {v['verdict']}: " + "; ".join(v.get("reasons", [])[:3])
            p = ReviewProposal.objects.create(
                organization=audit_run.organization, store=audit_run.store, memory=s.memory,
                source=ReviewProposal.Source.AUDIT, audit_run=audit_run, reason=why, scores=scores,
                proposed_by=user, proposed_by_actor=actor, idempotency_key=f"proposal-{uuid.uuid4().hex}")
            created.append(p)

        def enqueue() -> None:
            # The messages name the proposals only: the housekeeper rebuilds each label from the
            # row and re-checks who decided (``ledger.decisions``).
            for p in created:
                dispatch.proposal_label_enqueue(p.pk)
            if created:  # after the batch (one housekeeper worker, FIFO): a tree head covering its labels
                dispatch.tree_head_after_labels_enqueue(audit_run.organization_id)
            for p in created:
                proposal_sync(proposal_id=p.pk)

        transaction.on_commit(enqueue)
    if created and audit_run.organization_id:
        activity_record(organization=audit_run.organization, verb="review.proposed", actor=user,
                        target=f"audit #{audit_run.pk}",
                        detail={"proposals": [p.pk for p in created], "skipped": len(skipped)})
    return ProposedBatch([ReviewProposal.objects.get(pk=p.pk) for p in created], skipped)


def _signing_enqueue(p: ReviewProposal) -> None:
    if p.kind == ReviewProposal.Kind.CORRECTION:
        dispatch.correction_transition_enqueue(p.pk)
    else:
        dispatch.proposal_label_enqueue(p.pk)


def run_corrections(audit_run: AuditRun) -> dict[str, dict[str, Any]]:
    """The run's honest errors by external id: the engine's ``corrections`` rows, else (runs
    analysed before they were written) its ``honest-error`` verdicts, as the same rows."""
    res = audit_run.results or {}
    rows = {str(c["memory_id"]): dict(c) for c in res.get("corrections") or [] if c.get("memory_id")}
    for ext, v in (res.get("verdicts") or {}).items():
        if v.get("verdict") == "honest-error" and ext not in rows:
            rows[ext] = {"memory_id": ext, "kind": "outdated" if v.get("corrected_by") else "honest-error",
                         "corrected_by": v.get("corrected_by"), "action": "down_weight",
                         "reasons": list(v.get("reasons") or [])}
    return rows


def corrections_create_from_run(*, audit_run: AuditRun, user, memory_ids: Iterable[int] | None = None,
                                reason: str = "") -> ProposedBatch:
    """Propose the run's honest errors (or the chosen ones) as corrections (issue 16).

    Each becomes a proposal of kind ``correction`` naming its correcting memory (an outdated
    record's newer version, when the engine found one). Nothing is signed until a reviewer
    approves; then the housekeeper down-weights the memory. Memories that
    ``selectors.proposal_blockers`` names are skipped; the answer's ``skipped`` says why.
    """
    require(user=user, organization=audit_run.organization, capability="propose")
    if audit_run.status != AuditRun.Status.DONE:
        raise DjangoValidationError({"audit_run": ["the audit has not finished"]})
    rows = run_corrections(audit_run)
    suspects = audit_run.suspects.select_related("memory").filter(memory__external_id__in=list(rows))
    if memory_ids is not None:
        wanted = {int(m) for m in memory_ids}
        suspects = suspects.filter(memory_id__in=wanted)
        found = set(suspects.values_list("memory_id", flat=True))
        if found != wanted:
            raise DjangoValidationError({"memory_ids": [
                f"not honest errors of this run (only those are proposed as corrections): {sorted(wanted - found)}"]})
    suspects = list(suspects)
    correcting = dict(Memory.objects.filter(store=audit_run.store, external_id__in=[
        str(r["corrected_by"]) for r in rows.values() if r.get("corrected_by")]).values_list("external_id", "pk"))
    created: list[ReviewProposal] = []
    actor = actor_for(user)
    with transaction.atomic():
        list(Memory.objects.select_for_update().filter(pk__in=[s.memory_id for s in suspects]).values_list("pk"))
        skipped = selectors.proposal_blockers(audit_run=audit_run, suspects=suspects,
                                              kind=ReviewProposal.Kind.CORRECTION)
        for s in suspects:
            if s.memory_id in skipped:
                continue
            row = rows[s.memory.external_id]
            cb = correcting.get(str(row.get("corrected_by") or ""))
            kind = ReviewProposal.CorrectionKind.OUTDATED if cb else ReviewProposal.CorrectionKind.HONEST_ERROR
            why = reason or (f"Audit #{audit_run.pk}: {kind.label.lower()}"
                             + (f", corrected by {row['corrected_by']}" if cb else "")
                             + "; " + "; ".join(row.get("reasons", [])[:3]))
            scores = {"rank": s.rank, "ds": s.ds, "cmis": s.cmis, "cas": s.cas, "in_batch": s.in_batch}
            created.append(ReviewProposal.objects.create(
                organization=audit_run.organization, store=audit_run.store, memory=s.memory,
                source=ReviewProposal.Source.AUDIT, kind=ReviewProposal.Kind.CORRECTION, correction_kind=kind,
                corrected_by_id=cb, audit_run=audit_run, proposed_label="", reason=why, scores=scores,
                proposed_by=user, proposed_by_actor=actor, idempotency_key=f"correction-{uuid.uuid4().hex}"))
    if created and audit_run.organization_id:
        activity_record(organization=audit_run.organization, verb="review.corrections_proposed", actor=user,
                        target=f"audit #{audit_run.pk}",
                        detail={"proposals": [p.pk for p in created], "skipped": len(skipped)})
    return ProposedBatch([ReviewProposal.objects.get(pk=p.pk) for p in created], skipped)


def _proposal_for(*, organization: Organization, proposal_id: int) -> ReviewProposal:
    # Another organization's proposal does not exist for this one (the views answer 404).
    return ReviewProposal.objects.select_related("store", "memory", "organization", "proposed_by").get(
        pk=proposal_id, organization=organization)


def review_ineligibility(*, proposal: ReviewProposal, user, decision: str,
                         membership: Membership | None = None) -> str | None:
    """Why ``user`` may not take ``decision`` on ``proposal`` under its organization's rules now
    (None: they may). The one place the four-eyes rules live; the queue and the decision use it.

    On a four-eyes organization (``Organization.four_eyes``, set by an org admin):
    - the proposer decides nothing on their own proposal;
    - an account the proposer brought in (``Membership.invited_by``) less than
      ``REVIEW_INVITE_COOLDOWN_HOURS`` ago cannot approve the proposer's proposal: an admin
      could otherwise approve through a sock puppet whose password they were shown.
    """
    organization = proposal.organization
    if user is None or not organization.four_eyes:
        return None
    if proposal.proposed_by_id is not None and proposal.proposed_by_id == user.pk:
        return "four-eyes: you proposed this, so another reviewer must decide it"
    if decision == ReviewProposal.Decision.APPROVE and proposal.proposed_by_id is not None:
        if membership is None:
            membership = Membership.objects.filter(organization=organization, user=user).first()
        hours = int(getattr(conf, "REVIEW_INVITE_COOLDOWN_HOURS", 72))
        if (membership is not None and membership.invited_by_id == proposal.proposed_by_id
                and membership.created_at > timezone.now() - timedelta(hours=hours)):
            proposer = proposal.proposed_by.get_username() if proposal.proposed_by else "the proposer"
            return (f"four-eyes: your account was invited by {proposer} less than {hours} hours ago, so you "
                    f"cannot approve {proposer}'s proposal; another reviewer must")
    return None


def _decide(*, organization: Organization, proposal_id: int, user, reason: str, decision: str) -> ReviewProposal:
    require(user=user, organization=organization, capability="review")
    reason = (reason or "").strip()
    if not reason:
        raise DjangoValidationError({"reason": ["a reason is required"]})
    p = _proposal_for(organization=organization, proposal_id=proposal_id)
    blocked = review_ineligibility(proposal=p, user=user, decision=decision)
    if blocked:
        raise DjangoValidationError({"proposal": [blocked]})
    # A rejected correction signs nothing (the memory keeps its weight): it is decided at once.
    signs = not (p.kind == ReviewProposal.Kind.CORRECTION and decision == ReviewProposal.Decision.REFUTE)
    with transaction.atomic():
        n = ReviewProposal.objects.filter(pk=p.pk, status=ReviewProposal.Status.OPEN).update(
            status=ReviewProposal.Status.APPLYING if signs else ReviewProposal.Status.REFUTED, decision=decision,
            decided_by=user, decision_reason=reason, decided_at=timezone.now())
        if n != 1:
            # Someone (or a double click) got there first: the first decision stands.
            p.refresh_from_db()
            if p.decision == decision:
                return proposal_sync(proposal_id=p.pk)
            raise DjangoValidationError({"proposal": [f"already decided: {p.get_status_display().lower()}"]})
        p.refresh_from_db()
        activity_record(organization=organization, verb=f"review.{decision}", actor=user,
                        target=f"proposal #{p.pk}", detail={"memory": p.memory_id, "reason": reason[:500],
                                                            "kind": p.kind})
        if signs:
            transaction.on_commit(lambda: _signing_enqueue(p))
    return proposal_sync(proposal_id=p.pk)


def proposal_approve(*, organization: Organization, proposal_id: int, user, reason: str) -> ReviewProposal:
    """Approve: the housekeeper appends a signed ``poison_likely``; the memory leaves recall. For a
    correction: a signed down-weight transition linking the correcting memory."""
    return _decide(organization=organization, proposal_id=proposal_id, user=user, reason=reason,
                   decision=ReviewProposal.Decision.APPROVE)


def proposal_refute(*, organization: Organization, proposal_id: int, user, reason: str) -> ReviewProposal:
    """Refute: the housekeeper appends a signed ``poison_refuted``; the memory returns to recall.
    For a correction: rejected, nothing is signed."""
    return _decide(organization=organization, proposal_id=proposal_id, user=user, reason=reason,
                   decision=ReviewProposal.Decision.REFUTE)


def _bulk(fn, *, organization: Organization, proposal_ids: Iterable[int], user, reason: str) -> dict[str, Any]:
    done, skipped = [], []
    for pid in dict.fromkeys(int(i) for i in proposal_ids):
        try:
            done.append(fn(organization=organization, proposal_id=pid, user=user, reason=reason).pk)
        except ReviewProposal.DoesNotExist:
            skipped.append({"id": pid, "error": "not found"})
        except DjangoValidationError as exc:
            skipped.append({"id": pid, "error": "; ".join(exc.messages)})
    if done:  # queued after the batch's labels: a tree head that covers them
        transaction.on_commit(lambda: dispatch.tree_head_after_labels_enqueue(organization.pk))
    return {"decided": done, "skipped": skipped}


def proposals_approve_bulk(*, organization: Organization, proposal_ids: Iterable[int], user,
                           reason: str) -> dict[str, Any]:
    """Approve each; returns ``{"decided": [ids], "skipped": [{"id", "error"}]}``. Permission
    and a missing reason fail the whole call; per-proposal problems only skip that one."""
    require(user=user, organization=organization, capability="review")
    if not (reason or "").strip():
        raise DjangoValidationError({"reason": ["a reason is required"]})
    return _bulk(proposal_approve, organization=organization, proposal_ids=proposal_ids, user=user, reason=reason)


def proposals_refute_bulk(*, organization: Organization, proposal_ids: Iterable[int], user,
                          reason: str) -> dict[str, Any]:
    require(user=user, organization=organization, capability="review")
    if not (reason or "").strip():
        raise DjangoValidationError({"reason": ["a reason is required"]})
    return _bulk(proposal_refute, organization=organization, proposal_ids=proposal_ids, user=user, reason=reason)


def proposal_sync(*, proposal_id: int) -> ReviewProposal:
    """Record labels the housekeeper has appended: the flag on an open proposal, the decision
    on an applying one (``applying -> approved/refuted``, once)."""
    p = ReviewProposal.objects.get(pk=proposal_id)
    if p.kind == ReviewProposal.Kind.CORRECTION:
        if p.status == ReviewProposal.Status.APPLYING:
            node = transition_for_key(memory_id=p.memory_id, key=p.decision_key)
            if node is not None:
                ReviewProposal.objects.filter(pk=p.pk, status=ReviewProposal.Status.APPLYING).update(
                    status=ReviewProposal.Status.APPROVED, transition=node)
        p.refresh_from_db()
        return p
    if p.flag_label_id is None:
        flag = _label_for_key(memory_id=p.memory_id, key=p.flag_key)
        if flag is not None:
            ReviewProposal.objects.filter(pk=p.pk, flag_label__isnull=True).update(flag_label=flag)
    if p.status == ReviewProposal.Status.APPLYING:
        label = _label_for_key(memory_id=p.memory_id, key=p.decision_key)
        if label is not None:
            final = ReviewProposal.Status.APPROVED if p.decision == ReviewProposal.Decision.APPROVE else \
                ReviewProposal.Status.REFUTED
            ReviewProposal.objects.filter(pk=p.pk, status=ReviewProposal.Status.APPLYING).update(
                status=final, label=label)
    p.refresh_from_db()
    return p


def proposals_sync(*, organization: Organization | None = None) -> int:
    """Sync every proposal waiting on the housekeeper; return how many got decided."""
    qs = ReviewProposal.objects.filter(Q(status=ReviewProposal.Status.APPLYING) | Q(
        status=ReviewProposal.Status.OPEN, flag_label__isnull=True, source=ReviewProposal.Source.AUDIT,
        kind=ReviewProposal.Kind.POISON))
    if organization is not None:
        qs = qs.filter(organization=organization)
    n = 0
    for pid, before in qs.values_list("pk", "status"):
        if proposal_sync(proposal_id=pid).status != before:
            n += 1
    return n


def proposals_requeue(*, organization: Organization | None = None) -> int:
    """Send again the labels of proposals still applying (a lost message, a purged queue).

    Safe to repeat: the idempotency key makes a second delivery append nothing."""
    qs = ReviewProposal.objects.filter(status=ReviewProposal.Status.APPLYING)
    if organization is not None:
        qs = qs.filter(organization=organization)
    n = 0
    for p in qs.select_related("decided_by"):
        _signing_enqueue(p)
        n += 1
    return n


def classifier_flags_sync(*, organization: Organization) -> int:
    """Bring the ingest classifier's ``poison_likely`` labels into the review queue.

    The classifier labels directly (the memory already left recall); the reviewer confirms
    (approve) or refutes. One proposal per flagged memory; returns how many were added.
    """
    flagged = (Memory.objects.filter(organization=organization, epistemic_state=EpistemicLabel.Label.LIKELY)
               .exclude(review_proposals__isnull=False).values_list("pk", "store_id"))
    added = 0
    for memory_id, store_id in flagged:
        last = EpistemicLabel.objects.filter(memory_id=memory_id).order_by("-seq").first()
        if last is None or last.actor.startswith("user:") or last.label != EpistemicLabel.Label.LIKELY:
            continue
        try:
            with transaction.atomic():
                ReviewProposal.objects.create(
                    organization=organization, store_id=store_id, memory_id=memory_id,
                    source=ReviewProposal.Source.CLASSIFIER, reason=last.reason, scores=last.evidence or {},
                    proposed_by=None, proposed_by_actor=last.actor, flag_label=last,
                    idempotency_key=f"classifier-{last.pk}")
            added += 1
        except IntegrityError:  # a concurrent sync added it
            continue
    return added
