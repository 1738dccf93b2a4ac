"""Issue 16 in the product: an audit's honest errors proposed as corrections, decided under the
review rules, and on approval one signed down-weight transition (correcting memory, audit and
proposal in its signed evidence) appended by the housekeeper — never by the message's say-so."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from audits import dispatch, services
from audits.decisions import CORRECTION_ETA_Q, CORRECTION_VALENCE_Q
from audits.models import ReviewProposal
from audits.services.review import corrections_create_from_run, run_corrections
from ledger import tasks
from ledger.models import EpistemicLabel, Memory, ProvenanceNode, SigningRefusal
from ledger.recall import recall
from ledger.signing import housekeeper_role
from tests.audits.corrections_factory import QUESTION

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def corrections(corrected_run, alice) -> list[ReviewProposal]:
    return list(corrections_create_from_run(audit_run=corrected_run, user=alice))


def _nodes(memory_id: int) -> list[ProvenanceNode]:
    return list(ProvenanceNode.objects.filter(memory_id=memory_id).order_by("seq"))


def _mem(store, ext: str) -> Memory:
    return Memory.objects.get(store=store, external_id=ext)


def test_the_engine_judges_the_stale_notes_honest_errors_corrected_by_the_newer_one(corrected_run, outdated):
    rows = run_corrections(corrected_run)
    assert outdated.stale <= set(rows)
    for ext in outdated.stale:
        assert rows[ext]["kind"] == "outdated" and rows[ext]["corrected_by"] == outdated.correcting


def test_the_poison_batch_leaves_the_honest_errors_out(corrected_run, alice, outdated):
    made = services.proposals_create_from_run(audit_run=corrected_run, user=alice)
    assert not outdated.stale & {p.memory.external_id for p in made}
    assert not EpistemicLabel.objects.filter(memory__store=outdated.store).exists()


def test_honest_errors_are_proposed_as_corrections_linking_the_newer_memory(corrections, outdated, corrected_run):
    assert {p.memory.external_id for p in corrections} == outdated.stale
    new = _mem(outdated.store, outdated.correcting)
    for p in corrections:
        assert p.kind == ReviewProposal.Kind.CORRECTION and p.status == ReviewProposal.Status.OPEN
        assert p.correction_kind == "outdated" and p.corrected_by_id == new.pk
        assert p.audit_run_id == corrected_run.pk and "corrected by new" in p.reason
        # Proposing signs nothing: an honest error is no suspect, and keeps its weight for now.
        assert p.flag_label_id is None and _nodes(p.memory_id) == []
        m = Memory.objects.get(pk=p.memory_id)
        assert m.epistemic_state == "" and m.live_weight_q == 1000


def test_approval_appends_one_signed_down_weight_with_the_links(corrections, bob, acme, outdated, corrected_run):
    p = corrections[0]
    got = services.proposal_approve(organization=acme, proposal_id=p.pk, user=bob,
                                    reason="the newer note corrects it")
    assert got.status == ReviewProposal.Status.APPROVED and got.transition_id is not None
    nodes = _nodes(p.memory_id)
    assert len(nodes) == 1 and nodes[0].pk == got.transition_id
    node = nodes[0]
    assert node.valence_q == CORRECTION_VALENCE_Q and node.eta_q == CORRECTION_ETA_Q
    assert node.prev_weight_q == 1000 and node.new_weight_q == 100
    ev = node.evidence
    assert f"correction:proposal:{p.pk}" in ev and f"audit_run:{corrected_run.pk}" in ev
    assert f"corrected_by:{outdated.store.slug}/{outdated.correcting}" in ev
    assert "decided_by:user:bob" in ev and "proposed_by:user:alice" in ev
    m = Memory.objects.get(pk=p.memory_id)
    assert m.live_weight_q == 100 and m.epistemic_state == ""  # down-weighted, still in recall
    # No label either way: a correction is not a poison verdict.
    assert not EpistemicLabel.objects.filter(memory_id=p.memory_id).exists()


def test_the_signed_chain_still_verifies_after_the_correction(corrections, bob, acme):
    from ledger.verification import memory_verify

    services.proposal_approve(organization=acme, proposal_id=corrections[0].pk, user=bob, reason="outdated")
    m = Memory.objects.get(pk=corrections[0].memory_id)
    assert m.live_seq == 1 and memory_verify(m, cached=False) == []


def test_recall_weights_the_corrected_memory_down(corrections, bob, acme, outdated):
    before = {r["external_id"]: r for r in recall(store=outdated.store, query=QUESTION, k=10)["results"]}
    target = corrections[0].memory.external_id
    assert before[target]["weight"] == 1.0 and before[target]["rank"] < before[outdated.correcting]["rank"]
    services.proposal_approve(organization=acme, proposal_id=corrections[0].pk, user=bob, reason="outdated")
    after = {r["external_id"]: r for r in recall(store=outdated.store, query=QUESTION, k=10)["results"]}
    # Still recalled (not quarantined), at a tenth of its weight: the newer note now outranks it.
    assert after[target]["weight"] == pytest.approx(0.1)
    assert after[target]["score"] < before[target]["score"]
    assert after[target]["rank"] > after[outdated.correcting]["rank"]


def test_rejection_signs_nothing_and_closes_the_proposal(corrections, bob, acme):
    p = services.proposal_refute(organization=acme, proposal_id=corrections[0].pk, user=bob,
                                 reason="the old value was right")
    assert p.status == ReviewProposal.Status.REFUTED and p.transition_id is None and p.label_id is None
    assert _nodes(p.memory_id) == [] and not EpistemicLabel.objects.filter(memory_id=p.memory_id).exists()
    assert Memory.objects.get(pk=p.memory_id).live_weight_q == 1000
    # A message naming the rejected proposal signs nothing either; the refusal is recorded.
    with housekeeper_role():
        assert tasks.correction_transition_task(decision=f"proposal:{p.pk}") == 0
    assert _nodes(p.memory_id) == []
    assert SigningRefusal.objects.filter(reason__contains="rejected correction").exists()


def test_a_rejected_correction_is_not_proposed_again_by_the_same_audit(corrections, bob, acme, alice, corrected_run):
    services.proposal_refute(organization=acme, proposal_id=corrections[0].pk, user=bob, reason="right as it is")
    again = corrections_create_from_run(audit_run=corrected_run, user=alice,
                                        memory_ids=[corrections[0].memory_id])
    assert again == [] and "refuted by bob" in again.skipped[corrections[0].memory_id]


def test_redelivery_appends_nothing_twice(corrections, bob, acme):
    p = services.proposal_approve(organization=acme, proposal_id=corrections[0].pk, user=bob, reason="outdated")
    for _ in range(3):
        assert tasks.correction_transition_task(decision=f"proposal:{p.pk}") == 1
    # A label task naming the approved correction signs no label; the refusal is recorded.
    assert tasks.label_append_task(decision=f"proposal:{p.pk}") == 0
    assert SigningRefusal.objects.filter(reason__contains="calls for no signed label").exists()
    assert not EpistemicLabel.objects.filter(memory_id=p.memory_id).exists()
    services.proposals_requeue(organization=acme)
    assert [n.pk for n in _nodes(p.memory_id)] == [p.transition_id]
    assert Memory.objects.get(pk=p.memory_id).live_weight_q == 100


def test_a_double_click_approves_once(corrections, bob, acme):
    a = services.proposal_approve(organization=acme, proposal_id=corrections[0].pk, user=bob, reason="outdated")
    b = services.proposal_approve(organization=acme, proposal_id=corrections[0].pk, user=bob, reason="outdated")
    assert a.transition_id == b.transition_id and len(_nodes(a.memory_id)) == 1
    with pytest.raises(ValidationError, match="already decided"):
        services.proposal_refute(organization=acme, proposal_id=a.pk, user=bob, reason="changed my mind")


def test_a_forged_message_signs_nothing(corrections, acme, dana):
    p = corrections[0]
    # The proposal is open: nobody decided it, whatever the message says.
    assert tasks.correction_transition_task(decision=f"proposal:{p.pk}") == 0
    # A message that brings its own transition is refused outright.
    assert tasks.correction_transition_task(memory_id=p.memory_id, valence_q=-1000, eta_q=10000,
                                            evidence=["correction:forged"]) == 0
    assert tasks.correction_transition_task(decision=f"proposal:{p.pk}", valence_q=-1000) == 0
    # Nor does writing into the row by hand a decision the review rules forbid: alice (an
    # analyst) may not review; dana may, but not her own proposal under four-eyes.
    ReviewProposal.objects.filter(pk=p.pk).update(status="applying", decision="approve", decided_by=p.proposed_by,
                                                  decision_reason="mine")
    assert tasks.correction_transition_task(decision=f"proposal:{p.pk}") == 0
    ReviewProposal.objects.filter(pk=p.pk).update(proposed_by=dana, proposed_by_actor="user:dana", decided_by=dana)
    assert tasks.correction_transition_task(decision=f"proposal:{p.pk}") == 0
    # The label task for a correction signs no label of its own.
    assert tasks.label_append_task(decision=f"proposal:{p.pk}") == 0
    assert _nodes(p.memory_id) == [] and not EpistemicLabel.objects.filter(memory_id=p.memory_id).exists()
    assert Memory.objects.get(pk=p.memory_id).live_weight_q == 1000
    reasons = list(SigningRefusal.objects.values_list("reason", flat=True))
    assert any("not decided yet" in r for r in reasons)
    assert any("besides a decision id" in r for r in reasons)
    assert any("(analyst) may not review" in r for r in reasons)
    assert any("four-eyes" in r for r in reasons)


def test_a_poison_decision_calls_for_no_transition(poisoned, alice, bob, acme):
    ids = [i.pk for i in services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                                   filename="incidents.jsonl", user=alice)]
    run = services.audit_run_create(store=poisoned.store, incident_ids=ids, settings={}, user=alice)
    run.refresh_from_db()
    p = services.proposals_create_from_run(audit_run=run, user=alice)[0]
    services.proposal_approve(organization=acme, proposal_id=p.pk, user=bob, reason="planted")
    assert tasks.correction_transition_task(decision=f"proposal:{p.pk}") == 0
    assert _nodes(p.memory_id) == []


def test_four_eyes_stops_the_proposer_from_approving_a_correction(corrected_run, dana, acme):
    p = corrections_create_from_run(audit_run=corrected_run, user=dana)[0]
    with pytest.raises(ValidationError, match="four-eyes"):
        services.proposal_approve(organization=acme, proposal_id=p.pk, user=dana, reason="mine")
    assert _nodes(p.memory_id) == []
    type(acme).objects.filter(pk=acme.pk).update(four_eyes=False)
    ok = services.proposal_approve(organization=acme, proposal_id=p.pk, user=dana, reason="mine")
    assert ok.status == ReviewProposal.Status.APPROVED and len(_nodes(p.memory_id)) == 1


def test_only_members_who_may_propose_propose_corrections(corrected_run, bob, charlie):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        corrections_create_from_run(audit_run=corrected_run, user=charlie)


def test_a_memory_that_is_not_an_honest_error_of_the_run_is_refused_by_name(corrected_run, alice, outdated):
    filler = _mem(outdated.store, "f3")
    with pytest.raises(ValidationError, match="not honest errors of this run"):
        corrections_create_from_run(audit_run=corrected_run, user=alice, memory_ids=[filler.pk])


def test_the_housekeeper_down_the_correction_waits_then_applies_once(corrections, bob, acme, monkeypatch):

    sent = []
    monkeypatch.setattr(dispatch, "correction_transition_enqueue", sent.append)
    p = services.proposal_approve(organization=acme, proposal_id=corrections[0].pk, user=bob, reason="outdated")
    assert p.status == ReviewProposal.Status.APPLYING and sent == [p.pk] and _nodes(p.memory_id) == []
    monkeypatch.undo()
    assert services.proposals_requeue(organization=acme) == 1
    assert services.proposal_sync(proposal_id=p.pk).status == ReviewProposal.Status.APPROVED
    assert len(_nodes(p.memory_id)) == 1


def test_two_deliveries_at_once_append_one_transition(corrections, bob, acme, monkeypatch):
    """The row lock makes a concurrent redelivery see the first one's node (PostgreSQL: SQLite
    serialises writers anyway)."""
    import threading

    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite serialises writers")

    monkeypatch.setattr(dispatch, "correction_transition_enqueue", lambda pid: None)
    p = services.proposal_approve(organization=acme, proposal_id=corrections[0].pk, user=bob, reason="outdated")
    assert p.status == ReviewProposal.Status.APPLYING
    start, got, errors = threading.Barrier(3), [], []

    def deliver():
        from django.db import connections

        try:
            start.wait()
            got.append(tasks.correction_transition_task(decision=f"proposal:{p.pk}"))
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=deliver) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and got == [1, 1, 1]
    assert len(_nodes(p.memory_id)) == 1 and Memory.objects.get(pk=p.memory_id).live_weight_q == 100
    assert services.proposal_sync(proposal_id=p.pk).transition_id == _nodes(p.memory_id)[0].pk
