"""Transitions in one round trip on PostgreSQL: signed against the tips this process last
committed, behind a check that locks the rows; a stale tip or key ring falls back to the locked
path and the chain stays whole."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from ledger import services
from ledger.core.canonical import format_time
from ledger.models import KeyEpoch, LogLeaf, Memory, ProvenanceNode
from ledger.verification import organization_verify

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
                       reason="needs PostgreSQL (DATABASE_URL=postgres://...)"),
    pytest.mark.django_db(transaction=True),
]


def _append(memory: Memory, evidence: str, **kw) -> tuple[ProvenanceNode, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        node = services.transition_append(memory_id=memory.pk, valence_q=100, evidence=[evidence], **kw)
    return node, [q["sql"] for q in queries.captured_queries]


def _seqs(memory: Memory) -> list[int]:
    return list(ProvenanceNode.objects.filter(memory=memory).order_by("seq").values_list("seq", flat=True))


def test_a_warm_append_is_one_round_trip_and_the_chain_verifies(memories, organization):
    m = memories[0]
    services._tips.clear()  # as in a new process (the genesis signing remembered them)
    _, cold = _append(m, "cold")  # the locked path; remembers the tips on commit
    assert len(cold) > 1
    node, warm = _append(m, "warm")
    assert len(warm) == 1, warm
    assert warm[0].startswith("SELECT ledger_expect(") and "FOR UPDATE" in warm[0] and "ledger_logleaf" in warm[0]
    assert node.pk and node.seq == 2 and _seqs(m) == [1, 2]
    m.refresh_from_db()
    assert m.live_seq == 2 and bytes(m.chain_head) == bytes(node.entry_hash)
    batch = services.transitions_append(items=[{"memory_id": m.pk, "valence_q": -50, "evidence": ["b1"]},
                                              {"memory_id": m.pk, "valence_q": 70, "evidence": ["b2"]}])
    assert [n.seq for n in batch] == [3, 4]
    assert list(LogLeaf.objects.filter(organization=organization).order_by("index").values_list("index", flat=True)) \
        == list(range(LogLeaf.objects.filter(organization=organization).count()))
    assert organization_verify(organization) == []


def test_a_tip_moved_by_another_process_falls_back_to_the_locked_path(memories, organization):
    m = memories[1]
    _append(m, "one")
    key = services._tips_key(m.pk)
    stale = copy.copy(services._tips[key])  # what another process would still remember
    _append(m, "two")
    services._tips[key] = stale
    node, sql = _append(m, "three")
    assert len(sql) > 1 and sql[0].startswith("SELECT ledger_expect(")  # tried, refused, then locked
    assert node.seq == 3 and _seqs(m) == [1, 2, 3]
    assert organization_verify(organization) == []
    assert len(_append(m, "four")[1]) == 1  # the locked path remembered the fresh tips


def test_a_key_epoch_change_behind_the_cached_ring_is_caught(memories, organization, housekeeper):
    m = memories[2]
    _append(m, "caches the key ring")
    # Revoked straight in the table (as another process would): the remembered marks no longer match.
    revoked_at = housekeeper.now - timedelta(days=1)
    KeyEpoch.objects.filter(organization=organization, number=1).update(revoked_at=format_time(revoked_at))
    with pytest.raises(services.EntryRejected):
        services.transition_append(memory_id=m.pk, valence_q=100, evidence=["after revocation"])
    assert _seqs(m) == [1]


def test_inside_a_transaction_the_locked_path_is_used(memories):
    m = memories[0]
    _append(m, "warm")
    with transaction.atomic():
        _, sql = _append(m, "inside")
    # The caller's transaction is not ours to commit: savepoint, lock, write, release.
    assert not any(q.startswith("SELECT ledger_expect(") for q in sql) and "FOR UPDATE OF m" in sql[1]
    assert _seqs(m) == [1, 2]
