"""Transitions in one round trip on PostgreSQL: signed against the tips this process last
committed, behind a check that locks the rows; a stale tip or key ring falls back to the locked
path and the chain stays whole."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from ledger import services
from ledger.core.canonical import format_time
from ledger.models import KeyEndorsement, KeyEpoch, LogLeaf, Memory, ProvenanceNode, TransitionCommitment
from ledger.services.sql import APPEND_CALL
from ledger.verification import organization_verify
from orgs.models import Organization

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
    assert warm[0].startswith("SELECT ledger_append_transitions(")  # checks and writes: migration 0010
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
    assert len(sql) > 1 and sql[0].startswith("SELECT ledger_append_transitions(")  # tried, refused, then locked
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
    assert not any(q.startswith(("SELECT ledger_expect(", "SELECT ledger_append_transitions(")) for q in sql)
    assert "FOR UPDATE OF m" in sql[1]
    assert _seqs(m) == [1, 2]


def test_a_warm_append_after_a_rotation_signs_with_the_new_epoch(memories, organization, housekeeper):
    m = memories[0]
    _append(m, "warm", now=housekeeper.now)  # remembers the tips and caches the signer of epoch 1
    services.housekeeper_rotate(organization=organization, now=housekeeper.now + timedelta(seconds=10))
    node, sql = _append(m, "after rotation", now=housekeeper.now + timedelta(seconds=20))
    # the remembered key-epoch marks are stale: the call refuses, the locked path signs anew
    assert node.epoch == 2 and len(sql) > 1 and any(q.startswith("SELECT ledger_append_transitions(") for q in sql)
    node, sql = _append(m, "warm again", now=housekeeper.now + timedelta(seconds=30))
    assert node.epoch == 2 and len(sql) == 1
    assert organization_verify(organization) == []


def test_a_warm_batch_over_two_organizations_is_one_round_trip_too(memories, organization, housekeeper):
    globex = Organization.objects.create(name="Globex", slug="globex")
    services.housekeeper_init(organization=globex, now=housekeeper.now)
    store = services.store_create(organization=globex, name="G", slug="g")
    theirs = services.memories_create(store=store, records=[{"id": "g0", "text": "Globex memory."}])
    services.memory_genesis_sign(memory_ids=[theirs[0].pk])
    items = [{"memory_id": theirs[0].pk, "valence_q": 500, "evidence": ["g"]},
             {"memory_id": memories[1].pk, "valence_q": 500, "evidence": ["a"]}]
    services.transitions_append(items=items)  # remembers both memories' tips
    with CaptureQueriesContext(connection) as queries:
        nodes = services.transitions_append(items=items)
    sql = [q["sql"] for q in queries.captured_queries]
    assert len(sql) == 1 and sql[0].startswith("SELECT ledger_expect("), sql  # the text query serves two logs
    assert [(n.organization_id, n.seq) for n in nodes] == [(globex.pk, 2), (organization.pk, 2)]
    assert organization_verify(organization) == [] and organization_verify(globex) == []


def _call_params(m: Memory, **change) -> list:
    """``ledger_append_transitions`` arguments for the transition the service just wrote to ``m``
    (read back from its rows), as if it were appended again on top of the state before it."""
    m.refresh_from_db()
    node = ProvenanceNode.objects.get(memory=m, seq=m.live_seq)
    tc = TransitionCommitment.objects.get(memory=m, seq=m.live_seq)
    marks = services._tips[services._tips_key(m.pk)].epoch_mark
    p = {"org": m.organization_id, "marks": list(marks), "tip": [m.pk, m.live_seq - 1, bytes(node.prev),
         node.prev_weight_q, m.label_seq], "new": [m.live_seq, bytes(node.entry_hash), node.new_weight_q]}
    p.update(change)
    n = [m.pk, node.seq, node.prev_weight_q, node.new_weight_q, node.valence_q, node.eta_q, "[]", bytes(node.prev),
         node.epoch, node.time, bytes(node.signature), bytes(node.entry_hash)]
    t = [m.pk, tc.seq, tc.new_weight_q, bytes(tc.provenance_hash), tc.epoch, tc.time, bytes(tc.signature)]
    leaves = [[m.pk, m.pk], ["provenance", "transition"], [node.seq, node.seq], [b"\0" * 32, b"\1" * 32]]
    return [p["org"], *p["marks"], *([v] for v in p["tip"]), *([v] for v in p["new"]), *([v] for v in n),
            *([v] for v in t), *leaves]


def test_the_server_function_checks_the_tips_and_the_triggers_stay_the_last_line(memories, organization):
    m = memories[2]
    _append(m, "one")
    leaves = LogLeaf.objects.filter(organization=organization).count()
    # the tips it would check are the state before the last append: they moved, it refuses
    with pytest.raises(DatabaseError, match="a chain tip moved"), connection.cursor() as c:
        c.execute(APPEND_CALL, _call_params(m))
    # tips that match but a live state no signed entry backs: the memory trigger refuses
    m.refresh_from_db()
    params = _call_params(m)
    params[6:11] = [[m.pk], [m.live_seq], [bytes(m.chain_head)], [m.live_weight_q], [m.label_seq]]
    params[14:26] = [[v] for v in [m.pk, m.live_seq + 1, m.live_weight_q, m.live_weight_q + 1, 100, 500, "[]",
                                   bytes(m.chain_head), 1, "2026-01-01T00:00:00.000000Z", b"s" * 64, b"h" * 32]]
    params[26:33] = [[v] for v in [m.pk, m.live_seq + 1, m.live_weight_q + 1, b"h" * 32, 1,
                                   "2026-01-01T00:00:00.000000Z", b"s" * 64]]
    params[11:14] = [[m.live_seq + 1], [b"x" * 32], [m.live_weight_q + 1]]  # chain head: not the node's hash
    with pytest.raises(DatabaseError, match="ledger_memory"), connection.cursor() as c:
        c.execute(APPEND_CALL, params)
    assert _seqs(m) == [1] and LogLeaf.objects.filter(organization=organization).count() == leaves
    assert organization_verify(organization) == []


def test_warm_evidence_with_quotes_backslashes_and_braces_is_stored_verbatim(memories, organization):
    m = memories[1]
    _append(m, "warm")
    evidence = ['a"b\\c', "{1,2}", "100% 'q'", "%s", "ünï©ødé", "", "\\x00ff", 'NULL', "x,y"]
    with CaptureQueriesContext(connection) as queries:
        node = services.transition_append(memory_id=m.pk, valence_q=100, evidence=evidence)
    assert len(queries.captured_queries) == 1
    assert ProvenanceNode.objects.get(pk=node.pk).evidence == evidence
    assert organization_verify(organization) == []


def test_a_warm_append_past_the_online_keys_window_gets_a_new_key(memories, organization, housekeeper, settings):
    m = memories[0]
    _append(m, "warm", now=housekeeper.now)  # may endorse an online key valid from then
    _, sql = _append(m, "cached signer", now=housekeeper.now + timedelta(seconds=1))
    assert len(sql) == 1  # the signer came from the cache: no lookup, no endorsement
    later = housekeeper.now + timedelta(hours=2 * settings.ONLINE_KEY_VALIDITY_HOURS)
    node, sql = _append(m, "two days later", now=later)
    # the cached key's window is over: the lookup endorses a new one, the append is one call still
    assert node.seq == 3 and node.time == format_time(later) and len(sql) > 1
    assert sql[-1].startswith("SELECT ledger_append_transitions(")
    assert KeyEndorsement.objects.filter(organization=organization, purpose="online").count() >= 2
    assert organization_verify(organization) == []


def test_a_session_that_lost_its_prepared_statements_prepares_the_call_again(memories, organization):
    m = memories[2]
    _append(m, "prepares the call")
    with connection.cursor() as c:
        c.execute("DEALLOCATE ALL")  # as a pooler's DISCARD ALL would
    node, sql = _append(m, "after DEALLOCATE ALL")
    assert node.seq == 2 and len(sql) == 1 and sql[0].startswith("SELECT ledger_append_transitions(")
    assert _seqs(m) == [1, 2] and organization_verify(organization) == []
