"""Database triggers: raw SQL cannot edit or delete ledger rows (runs on SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from ledger import services
from ledger.models import (
    KeyEpoch,
    Memory,
    Outcome,
    Receipt,
    Store,
    TransitionCommitment,
)

pytestmark = pytest.mark.django_db


def execute(sql: str, params=()) -> int:
    with connection.cursor() as c:
        c.execute(sql, params)
        return c.rowcount


def refused(sql: str, params=()) -> None:
    with pytest.raises(DatabaseError), transaction.atomic():
        execute(sql, params)


@pytest.fixture
def ledger(memories, organization):
    services.transition_append(memory_id=memories[0].pk, valence_q=1000, evidence=["a"])
    services.transition_append(memory_id=memories[0].pk, valence_q=-400, evidence=["b"])
    services.label_append(memory_id=memories[0].pk, label="poison_suspect", reason="r", evidence={}, actor="user:a")
    services.tree_head_issue(organization=organization)
    return memories


APPEND_ONLY = {
    "ledger_genesisentry": "weight_q = 1500",
    "ledger_provenancenode": "new_weight_q = 1500",
    "ledger_transitioncommitment": "new_weight_q = 1500",
    "ledger_epistemiclabel": "label = 'poison_refuted'",
    "ledger_logleaf": "seq = seq + 1",
    "ledger_treehead": "size = size + 1",
}


@pytest.mark.parametrize("table", sorted(APPEND_ONLY))
def test_it_refuses_update_and_delete_on_entry_tables(ledger, table):
    refused(f"UPDATE {table} SET {APPEND_ONLY[table]}")
    refused(f"DELETE FROM {table}")
    with connection.cursor() as c:
        c.execute(f"SELECT COUNT(*) FROM {table}")
        assert c.fetchone()[0] > 0


@pytest.mark.parametrize("assignment,params", [
    ("text = %s", ["edited"]),
    ("content_sha256 = %s", [bytes(32)]),
    ("external_id = %s", ["renamed"]),
    ("created_at = created_at", []),  # unchanged is fine; checked below it stays allowed
])
def test_memory_content_and_identity_are_immutable(ledger, assignment, params):
    m = ledger[0]
    if not params:
        assert execute(f"UPDATE ledger_memory SET {assignment} WHERE id = %s", [m.pk]) == 1
        return
    refused(f"UPDATE ledger_memory SET {assignment} WHERE id = %s", [*params, m.pk])


def test_memory_cannot_move_store_or_organization_or_be_deleted(ledger, organization):
    other = Store.objects.create(organization=organization, name="Other", slug="other")
    m = ledger[0]
    refused("UPDATE ledger_memory SET store_id = %s WHERE id = %s", [other.pk, m.pk])
    refused("DELETE FROM ledger_memory WHERE id = %s", [m.pk])
    refused("DELETE FROM ledger_memory WHERE id = %s", [ledger[2].pk])  # even one without transitions


def test_live_weight_changes_only_with_a_matching_transition(ledger):
    m = ledger[0]
    m.refresh_from_db()
    refused("UPDATE ledger_memory SET live_weight_q = 2999 WHERE id = %s", [m.pk])
    refused("UPDATE ledger_memory SET live_seq = 5 WHERE id = %s", [m.pk])
    first = TransitionCommitment.objects.get(memory=m, seq=1)
    # rolling back to an older, real transition is refused too: only the latest counts
    refused("UPDATE ledger_memory SET live_weight_q = %s, live_seq = 1 WHERE id = %s", [first.new_weight_q, m.pk])
    refused("UPDATE ledger_memory SET chain_head = %s WHERE id = %s", [bytes(32), m.pk])
    refused("UPDATE ledger_memory SET chain_head = NULL WHERE id = %s", [m.pk])
    assert execute("UPDATE ledger_memory SET metadata = %s WHERE id = %s", ['{"note": 1}', m.pk]) == 1
    # setting the values the latest transition explains is allowed (a no-op here)
    assert execute("UPDATE ledger_memory SET live_weight_q = %s, live_seq = %s WHERE id = %s",
                   [m.live_weight_q, m.live_seq, m.pk]) == 1


def test_epistemic_state_changes_only_with_a_matching_label(ledger):
    m = ledger[0]
    refused("UPDATE ledger_memory SET epistemic_state = 'poison_refuted' WHERE id = %s", [m.pk])
    refused("UPDATE ledger_memory SET epistemic_state = '', label_seq = -1 WHERE id = %s", [m.pk])
    refused("UPDATE ledger_memory SET epistemic_state = 'poison_likely' WHERE id = %s", [ledger[1].pk])


def test_chain_head_can_only_be_set_from_null_to_the_genesis_hash(store, housekeeper):
    [m] = services.memories_create(store=store, records=[{"id": "x", "text": "x"}])
    refused("UPDATE ledger_memory SET chain_head = %s WHERE id = %s", [bytes(32), m.pk])
    services.memory_genesis_sign(memory_ids=[m.pk])
    assert Memory.objects.get(pk=m.pk).is_signed


def test_key_epoch_revocation_can_be_set_once_and_nothing_else_changes(ledger, organization):
    epoch = KeyEpoch.objects.get(organization=organization, number=1)
    refused("UPDATE ledger_keyepoch SET public_key = %s WHERE id = %s", [bytes(32), epoch.pk])
    refused("UPDATE ledger_keyepoch SET not_after = '2099-01-01T00:00:00Z' WHERE id = %s", [epoch.pk])
    refused("DELETE FROM ledger_keyepoch WHERE id = %s", [epoch.pk])
    assert execute("UPDATE ledger_keyepoch SET revoked_at = '2030-01-01T00:00:00Z' WHERE id = %s", [epoch.pk]) == 1
    refused("UPDATE ledger_keyepoch SET revoked_at = '2031-01-01T00:00:00Z' WHERE id = %s", [epoch.pk])
    refused("UPDATE ledger_keyepoch SET revoked_at = '' WHERE id = %s", [epoch.pk])


def test_outcome_transition_can_be_set_once_and_nothing_else_changes(ledger, store):
    receipt = Receipt.objects.create(organization=store.organization, store=store, body={})
    outcome = Outcome.objects.create(organization=store.organization, receipt=receipt, memory=ledger[1], reward_q=800)
    refused("UPDATE ledger_outcome SET reward_q = -1000 WHERE id = %s", [outcome.pk])
    refused("DELETE FROM ledger_outcome WHERE id = %s", [outcome.pk])
    services.outcomes_apply(organization=store.organization)
    outcome.refresh_from_db()
    assert outcome.transition is not None
    refused("UPDATE ledger_outcome SET transition_id = NULL WHERE id = %s", [outcome.pk])
