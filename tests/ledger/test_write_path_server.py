"""The server-side halves of the write path after migration 0011 (PostgreSQL): the procedural
memory guard accepts exactly the updates the 0002 guard accepted, and the append function plans
its statements once per session."""

from __future__ import annotations

import hashlib
import importlib

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from ledger import services
from ledger.models import GenesisEntry, Memory, ProvenanceNode, TransitionCommitment

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
                       reason="needs PostgreSQL (DATABASE_URL=postgres://...)"),
    pytest.mark.django_db,
]

OLD_GUARD = next(s for s in importlib.import_module("ledger.migrations.0002_triggers").postgres_sql()[0]
                 if "FUNCTION ledger_memory_guard()" in s)
NEW_GUARD = importlib.import_module("ledger.migrations.0011_write_path_functions").GUARD


def _accepted(sql: str, params: list) -> bool:
    try:
        with transaction.atomic(), connection.cursor() as c:
            c.execute(sql, params)
            transaction.set_rollback(True)  # judge each update against the same rows
        return True
    except DatabaseError as exc:
        assert "ledger_memory" in str(exc), exc
        return False


def _h(s: str) -> bytes:
    return hashlib.sha256(s.encode()).digest()


@pytest.fixture
def candidates(memories, organization):
    """Updates of the memory table, each one the guard must judge: moves backed by signed rows,
    moves that are not, content edits, label moves, a genesis set from NULL, deletes."""
    m0, m1 = memories[0], memories[1]
    services.transition_append(memory_id=m0.pk, valence_q=1000, evidence=["a"])
    services.transition_append(memory_id=m0.pk, valence_q=-400, evidence=["b"])
    services.label_append(memory_id=m0.pk, label="poison_suspect", reason="r", evidence={}, actor="user:a")
    m0.refresh_from_db()
    first = TransitionCommitment.objects.get(memory=m0, seq=1)
    node1 = ProvenanceNode.objects.get(memory=m0, seq=1)
    # A third node and commitment inserted straight into the tables (inserts are allowed; the
    # signatures are not the guard's business): the live state may move to them.
    common = {"organization_id": m0.organization_id, "memory_id": m0.pk, "seq": 3, "epoch": 1,
              "time": "2026-01-01T00:00:00Z", "signature": b"s" * 64}
    ProvenanceNode.objects.create(**common, prev_weight_q=m0.live_weight_q, new_weight_q=777, valence_q=-1,
                                  eta_q=500, evidence=[], prev=bytes(m0.chain_head), entry_hash=_h("n3"))
    TransitionCommitment.objects.create(**common, new_weight_q=777, provenance_hash=_h("n3"))
    # A memory without a signed genesis, and a genesis row for it (the guard lets its chain head
    # be set from NULL to that hash, at seq 0 and the old weight).
    bare = services.memories_create(store=m0.store, records=[{"id": "bare", "text": "no genesis yet"}])[0]
    GenesisEntry.objects.create(organization_id=bare.organization_id, memory_id=bare.pk, weight_q=bare.live_weight_q,
                                epoch=1, time="2026-01-01T00:00:00Z", signature=b"g" * 64, entry_hash=_h("g"))
    u = "UPDATE ledger_memory SET {} WHERE id = %s"
    return [
        (u.format("metadata = %s"), ['{"note": 1}', m0.pk]),
        (u.format("live_seq = live_seq"), [m0.pk]),
        (u.format("live_seq = 3, live_weight_q = 777, chain_head = %s"), [_h("n3"), m0.pk]),
        (u.format("live_seq = 3, live_weight_q = 778, chain_head = %s"), [_h("n3"), m0.pk]),
        (u.format("live_seq = 3, live_weight_q = 777, chain_head = %s"), [bytes(node1.entry_hash), m0.pk]),
        (u.format("live_seq = 3, live_weight_q = 777"), [m0.pk]),
        (u.format("live_seq = 1, live_weight_q = %s, chain_head = %s"),
         [first.new_weight_q, bytes(node1.entry_hash), m0.pk]),
        (u.format("live_seq = 4"), [m0.pk]),
        (u.format("chain_head = NULL"), [m0.pk]),
        (u.format("text = 'edited'"), [m0.pk]),
        (u.format("content_sha256 = %s"), [bytes(32), m0.pk]),
        (u.format("store_id = store_id, external_id = external_id || 'x'"), [m0.pk]),
        (u.format("epistemic_state = 'poison_suspect', label_seq = 1"), [m0.pk]),
        (u.format("epistemic_state = 'poison_refuted'"), [m0.pk]),
        (u.format("epistemic_state = '', label_seq = -1"), [m0.pk]),
        (u.format("epistemic_state = 'poison_likely'"), [m1.pk]),
        (u.format("live_seq = 1, live_weight_q = live_weight_q"), [m1.pk]),
        (u.format("chain_head = %s, live_seq = 0"), [_h("g"), bare.pk]),
        (u.format("chain_head = %s, live_seq = 0, live_weight_q = live_weight_q + 1"), [_h("g"), bare.pk]),
        (u.format("chain_head = %s, live_seq = 0"), [_h("other"), bare.pk]),
        (u.format("chain_head = %s, live_seq = 1"), [_h("g"), bare.pk]),
        ("DELETE FROM ledger_memory WHERE id = %s", [bare.pk]),
        ("DELETE FROM ledger_memory WHERE id = %s", [m1.pk]),
    ]


def test_the_procedural_memory_guard_accepts_exactly_what_the_0002_guard_accepts(candidates):
    judged = {}
    for name, guard in (("0002", OLD_GUARD), ("0011", NEW_GUARD)):
        with connection.cursor() as c:
            c.execute(guard)  # inside the test's transaction: rolled back with it
        judged[name] = [_accepted(sql, params) for sql, params in candidates]
    assert judged["0011"] == judged["0002"]
    # the candidates exercise both answers: the no-ops, the move to node 3 and the genesis pass
    assert [i for i, ok in enumerate(judged["0011"]) if ok] == [0, 1, 2, 17]


def test_the_live_state_still_moves_only_through_the_guard(memories):
    m = memories[0]
    services.transition_append(memory_id=m.pk, valence_q=300, evidence=["x"])
    with pytest.raises(DatabaseError, match="ledger_memory"), transaction.atomic(), connection.cursor() as c:
        c.execute("UPDATE ledger_memory SET live_weight_q = live_weight_q + 1 WHERE id = %s", [m.pk])
    assert Memory.objects.get(pk=m.pk).live_seq == 1


def test_the_append_function_plans_its_statements_once_per_session():
    with connection.cursor() as c:
        c.execute("SELECT proconfig FROM pg_proc WHERE proname = 'ledger_append_transitions'")
        rows = c.fetchall()
    assert rows == [(["plan_cache_mode=force_generic_plan"],)]
