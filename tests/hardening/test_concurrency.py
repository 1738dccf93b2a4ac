"""Concurrent review decisions (DESIGN section 3/4): reviewers racing on one proposal — different
reviewers, the same reviewer double-clicking, approvals against refutations — each on its own
database connection, started together. Exactly one decision wins, exactly one decision label is
appended and signed, the proposal ends in the state of that label, and the memory's chains still
verify. (16 concurrent appenders on one memory: tests/ledger/test_concurrency.py.)

Runs on PostgreSQL (row locks, READ COMMITTED) and, as a check of the embedded default, on
SQLite (IMMEDIATE transactions serialize the writers).
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, connections

from audits.models import ReviewProposal
from audits.services import proposal_approve, proposal_refute
from ledger.models import EpistemicLabel, Memory
from ledger.verification import memory_verify, memory_verify_cache_clear
from orgs.models import Role
from tests.hardening.conftest import TABLES
from tests.hardening.world import member

pytestmark = pytest.mark.django_db(transaction=True)


def _proposal(memory, proposer) -> ReviewProposal:
    return ReviewProposal.objects.create(
        organization=memory.organization, store=memory.store, memory=memory, source=ReviewProposal.Source.AUDIT,
        reason="race", scores={}, proposed_by=proposer, proposed_by_actor=f"user:{proposer.username}",
        idempotency_key=f"proposal-{uuid.uuid4().hex}")


def _race(calls) -> list[object]:
    """Run each call on its own thread and connection, released together by a barrier."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(n, fn):
        try:
            barrier.wait(timeout=30)
            results[n] = fn()
        except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
            results[n] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(n, fn)) for n, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


@pytest.fixture
def team(memories, organization):
    analyst = member(organization, "ana", Role.ANALYST)
    reviewers = [member(organization, f"rev{n}", Role.REVIEWER) for n in range(4)]
    admin = member(organization, "adm", Role.ADMIN)
    return {"analyst": analyst, "reviewers": reviewers, "admin": admin}


SCENARIOS = {
    "8 reviewers approve at once": lambda t: [("approve", r) for r in t["reviewers"] * 2],
    "one reviewer double-clicks approve x8": lambda t: [("approve", t["reviewers"][0])] * 8,
    "4 approve against 4 refute": lambda t: [("approve", r) for r in t["reviewers"]]
    + [("refute", r) for r in t["reviewers"]],
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_concurrent_decisions_on_one_proposal_give_exactly_one_label(team, memories, organization, scenario):
    memory = memories[0]
    proposal = _proposal(memory, team["analyst"])
    labels_before = EpistemicLabel.objects.filter(memory=memory).count()
    calls = []
    for decision, user in SCENARIOS[scenario](team):
        fn = proposal_approve if decision == "approve" else proposal_refute
        calls.append(lambda fn=fn, user=user: fn(organization=organization, proposal_id=proposal.pk, user=user,
                                                 reason=f"race by {user.username}"))
    results = _race(calls)

    unexpected = [r for r in results if isinstance(r, Exception) and not isinstance(r, ValidationError)]
    assert not unexpected, unexpected
    proposal.refresh_from_db()
    decided = [r for r in results if isinstance(r, ReviewProposal)]
    refused = [r for r in results if isinstance(r, ValidationError)]
    assert decided, results
    new_labels = list(EpistemicLabel.objects.filter(memory=memory).order_by("seq")[labels_before:])
    assert len(new_labels) == 1, [(lab.seq, lab.label, lab.actor) for lab in new_labels]
    expected = "poison_likely" if proposal.decision == "approve" else "poison_refuted"
    assert new_labels[0].label == expected
    assert proposal.status == ("approved" if expected == "poison_likely" else "refuted")
    assert proposal.label_id == new_labels[0].pk
    assert new_labels[0].actor == f"user:{proposal.decided_by.username}"
    # Every refused caller was told the first decision stands; winners all report the same one.
    assert all("already decided" in "; ".join(e.messages) for e in refused), refused
    assert {r.decision for r in decided} == {proposal.decision}
    memory = Memory.objects.select_related("organization", "store").get(pk=memory.pk)
    memory_verify_cache_clear()
    assert memory_verify(memory) == []
    assert memory.epistemic_state == expected
    TABLES[f"concurrency ({connection.vendor}): scenario | callers | decided | refused | labels"].append(
        (scenario, len(calls), len(decided), len(refused), len(new_labels)))
    assert Counter(type(r).__name__ for r in results)
