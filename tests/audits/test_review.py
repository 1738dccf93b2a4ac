"""Review: proposals from an audit, four-eyes, double approval, refutation, the housekeeper
worker down (pending, then applied once), classifier flags, cross-org 404, roles."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from audits import selectors, services
from audits.models import ReviewProposal
from ledger.models import EpistemicLabel, Memory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def proposals(finished_run, alice) -> list[ReviewProposal]:
    return services.proposals_create_from_run(audit_run=finished_run, user=alice)


def _labels(memory_id: int) -> list[str]:
    return list(EpistemicLabel.objects.filter(memory_id=memory_id).order_by("seq").values_list("label", flat=True))


def test_proposing_the_batch_signs_poison_suspect_labels(finished_run, proposals, poisoned):
    assert {p.memory.external_id for p in proposals} == poisoned.poisoned
    for p in proposals:
        assert p.status == ReviewProposal.Status.OPEN and p.flag_label is not None
        assert p.flag_label.label == "poison_suspect" and p.flag_label.actor == "user:alice"
        assert Memory.objects.get(pk=p.memory_id).epistemic_state == "poison_suspect"
    # Proposing again adds nothing: every memory already has a live proposal.
    assert services.proposals_create_from_run(audit_run=finished_run, user=finished_run.created_by) == []
    assert selectors.proposal_queue(organization=finished_run.organization).count() == len(proposals)


def test_bob_approves_and_the_memory_leaves_recall(proposals, bob, acme):
    p = services.proposal_approve(organization=acme, proposal_id=proposals[0].pk, user=bob,
                                  reason="restates the query and plants Evilton")
    assert p.status == ReviewProposal.Status.APPROVED and p.decided_by == bob
    assert p.label.label == "poison_likely" and p.label.actor == "user:bob"
    assert _labels(p.memory_id) == ["poison_suspect", "poison_likely"]
    assert Memory.objects.get(pk=p.memory_id).epistemic_state == "poison_likely"


def test_a_double_click_approves_once(proposals, bob, acme):
    pid = proposals[0].pk
    first = services.proposal_approve(organization=acme, proposal_id=pid, user=bob, reason="planted")
    second = services.proposal_approve(organization=acme, proposal_id=pid, user=bob, reason="planted")
    assert first.label_id == second.label_id
    assert _labels(first.memory_id).count("poison_likely") == 1
    with pytest.raises(ValidationError, match="already decided"):
        services.proposal_refute(organization=acme, proposal_id=pid, user=bob, reason="changed my mind")


def test_four_eyes_stops_the_proposer_from_approving(proposals, dana, alice, acme, finished_run):
    # Dana (admin) may propose and review, but not both on one proposal when four-eyes is on.
    services.proposal_refute(organization=acme, proposal_id=proposals[0].pk, user=dana, reason="a clean record")
    # Refuted: proposed again only on new evidence, an audit finished after the refutation.
    again = services.proposals_create_from_run(audit_run=finished_run, user=dana,
                                               memory_ids=[proposals[0].memory_id])
    assert again == [] and "refuted by dana" in again.skipped[proposals[0].memory_id]
    later = services.audit_run_create(store=finished_run.store, settings={}, user=alice,
                                      incident_ids=finished_run.incidents.values_list("pk", flat=True))
    later.refresh_from_db()
    mine = services.proposals_create_from_run(audit_run=later, user=dana, memory_ids=[proposals[0].memory_id])
    with pytest.raises(ValidationError, match="four-eyes"):
        services.proposal_approve(organization=acme, proposal_id=mine[0].pk, user=dana, reason="mine")
    # Four-eyes is the organization's policy: with an org admin's "off", one person decides.
    type(acme).objects.filter(pk=acme.pk).update(four_eyes=False)
    ok = services.proposal_approve(organization=acme, proposal_id=mine[0].pk, user=dana, reason="mine")
    assert ok.status == ReviewProposal.Status.APPROVED


def test_refuting_signs_poison_refuted_and_a_reason_is_required(proposals, bob, acme):
    with pytest.raises(ValidationError, match="reason"):
        services.proposal_refute(organization=acme, proposal_id=proposals[0].pk, user=bob, reason="  ")
    p = services.proposal_refute(organization=acme, proposal_id=proposals[0].pk, user=bob,
                                 reason="a legitimate record")
    assert p.status == ReviewProposal.Status.REFUTED and p.label.label == "poison_refuted"
    assert Memory.objects.get(pk=p.memory_id).epistemic_state == "poison_refuted"


def test_with_the_worker_down_it_is_pending_then_applied_once(proposals, bob, acme, monkeypatch):
    from ledger import tasks as ledger_tasks

    queued: list[dict] = []
    monkeypatch.setattr(ledger_tasks.label_append_task, "apply_async",
                        lambda kwargs, link=None, **options: queued.append(kwargs))
    p = services.proposal_approve(organization=acme, proposal_id=proposals[0].pk, user=bob, reason="planted")
    assert p.status == ReviewProposal.Status.APPLYING and p.label is None
    assert len(queued) == 1
    assert selectors.dashboard_counts(organization=acme)["proposals_applying"] == 1
    # A second click while it is pending queues nothing more.
    services.proposal_approve(organization=acme, proposal_id=p.pk, user=bob, reason="planted")
    assert len(queued) == 1
    # The worker returns; the message is delivered twice (acks_late after a crash).
    ledger_tasks.label_append_task.run(**queued[0])
    ledger_tasks.label_append_task.run(**queued[0])
    assert services.proposals_sync(organization=acme) == 1
    p.refresh_from_db()
    assert p.status == ReviewProposal.Status.APPROVED
    assert _labels(p.memory_id) == ["poison_suspect", "poison_likely"]


def test_bulk_approve_reports_what_it_skipped(proposals, bob, acme):
    ids = [p.pk for p in proposals] + [999999]
    out = services.proposals_approve_bulk(organization=acme, proposal_ids=ids, user=bob, reason="batch of plants")
    assert sorted(out["decided"]) == sorted(p.pk for p in proposals)
    assert out["skipped"] == [{"id": 999999, "error": "not found"}]


def test_charlie_cannot_reach_acme_proposals(proposals, charlie, globex):
    with pytest.raises(ReviewProposal.DoesNotExist):
        services.proposal_approve(organization=globex, proposal_id=proposals[0].pk, user=charlie, reason="x")
    with pytest.raises(PermissionDenied):
        services.proposal_approve(organization=proposals[0].organization, proposal_id=proposals[0].pk,
                                  user=charlie, reason="x")
    assert selectors.proposal_queue(organization=globex).count() == 0


def test_roles(proposals, finished_run, alice, bob, acme):
    with pytest.raises(PermissionDenied):
        services.proposal_approve(organization=acme, proposal_id=proposals[0].pk, user=alice, reason="x")
    with pytest.raises(PermissionDenied):
        services.proposals_create_from_run(audit_run=finished_run, user=bob)


def test_classifier_flags_join_the_queue_and_can_be_refuted(poisoned, bob, acme):
    from ledger.services import label_append

    m = Memory.objects.filter(store=poisoned.store, epistemic_state="").order_by("pk").first()
    label_append(memory_id=m.pk, label="poison_likely", reason="shared-core group", evidence={"group": "g1"},
                 actor="ingest-classifier@1.0")
    assert selectors.classifier_flag_list(organization=acme).filter(pk=m.pk).exists()
    before = services.classifier_flags_sync(organization=acme)
    assert before >= 1 and services.classifier_flags_sync(organization=acme) == 0
    p = ReviewProposal.objects.get(memory=m)
    assert p.source == "classifier" and p.proposed_by_actor == "ingest-classifier@1.0"
    assert p.flag_label.label == "poison_likely"
    p = services.proposal_refute(organization=acme, proposal_id=p.pk, user=bob, reason="a real record")
    assert p.status == ReviewProposal.Status.REFUTED
    assert Memory.objects.get(pk=m.pk).epistemic_state == "poison_refuted"
    assert not selectors.classifier_flag_list(organization=acme).filter(pk=m.pk).exists()


def test_the_signed_label_marks_the_proposal_approved_without_a_page_view(proposals, bob, acme, monkeypatch):
    # The housekeeper task carries a linked sync: nobody has to open the queue for the
    # proposal to leave "applying".
    from audits.services import review as review_services

    calls = []
    real_sync = review_services.proposals_sync
    monkeypatch.setattr(review_services, "proposals_sync", lambda **kw: calls.append(kw) or real_sync(**kw))
    p = services.proposal_approve(organization=acme, proposal_id=proposals[0].pk, user=bob, reason="planted")
    p.refresh_from_db()
    assert p.status == ReviewProposal.Status.APPROVED
    assert calls, "the linked proposals_sync_task did not run"
