"""The write path: what it appends, and what it refuses with nothing written (DESIGN section 3)."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from ledger import services
from ledger.core.canonical import format_time
from ledger.core.entries import (
    GENESIS,
    LABEL,
    PROVENANCE,
    TRANSITION,
    ZERO_HASH_HEX,
    SignedEntry,
    label_body,
    provenance_body,
    sign_entry,
    transition_body,
)
from ledger.core.errors import (
    ChainBrokenError,
    EpochExpiredError,
    EpochRevokedError,
    SignatureInvalidError,
    TenantMismatchError,
    WeightMismatchError,
)
from ledger.core.keys import Ed25519Signer
from ledger.core.weights import next_weight_q
from ledger.models import (
    EpistemicLabel,
    GenesisEntry,
    KeyEpoch,
    LogLeaf,
    Memory,
    Outcome,
    ProvenanceNode,
    Receipt,
    TransitionCommitment,
    TreeHead,
)
from ledger.signing import NotHousekeeperError
from ledger.verification import memory_verify, organization_verify
from orgs.models import Organization

pytestmark = pytest.mark.django_db

TABLES = (GenesisEntry, ProvenanceNode, TransitionCommitment, EpistemicLabel, LogLeaf, TreeHead, KeyEpoch)


def snapshot() -> tuple:
    counts = tuple(m.objects.count() for m in TABLES)
    live = tuple(Memory.objects.order_by("pk").values_list("live_weight_q", "live_seq", "chain_head", "epistemic_state",
                                                            "label_seq"))
    return counts, tuple((w, s, bytes(h) if h is not None else None, e, ls) for w, s, h, e, ls in live)


def epoch1_signer(housekeeper) -> Ed25519Signer:
    return Ed25519Signer(housekeeper.keys._read_seed(housekeeper.organization.slug, 1), 1)


def node_pair(memory: Memory, signer, *, time: str, valence_q: int = 1000, eta_q: int = 500, tenant: str | None = None,
              prev: str | None = None, new_weight_q: int | None = None, transition_weight_q: int | None = None):
    memory.refresh_from_db()
    tenant = tenant or memory.organization.slug
    w = memory.live_weight_q
    new = new_weight_q if new_weight_q is not None else next_weight_q(w, valence_q, eta_q)
    node = sign_entry(PROVENANCE, provenance_body(
        tenant, memory.ledger_id, memory.live_seq + 1, w, new, valence_q, ["outcome:1"],
        prev or bytes(memory.chain_head).hex(), signer.epoch, time, eta_q=eta_q), signer)
    t = sign_entry(TRANSITION, transition_body(
        tenant, memory.ledger_id, memory.live_seq + 1, transition_weight_q or new, node.hash_hex(), signer.epoch,
        time), signer)
    return node, t


def rejected(memory: Memory, entries: list[SignedEntry], cause: type) -> services.EntryRejected:
    before = snapshot()
    with pytest.raises(services.EntryRejected) as info:
        services.entry_insert_verified(memory_id=memory.pk, entries=entries)
    assert isinstance(info.value.cause, cause), info.value.cause
    assert "nothing written" in info.value.messages[0]
    assert snapshot() == before
    return info.value


# --------------------------------------------------------------------------- appends


def test_it_creates_unsigned_memories_and_signs_their_genesis_once(store, housekeeper):
    created = services.memories_create(store=store, records=[{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}])
    assert [m.is_signed for m in created] == [False, False]
    assert services.memory_genesis_sign(memory_ids=[m.pk for m in created]) == 2
    assert services.memory_genesis_sign(memory_ids=[m.pk for m in created]) == 0
    m = Memory.objects.get(external_id="a")
    assert bytes(m.chain_head) == bytes(m.genesis.entry_hash)
    # Two genesis leaves, after the leaf of the online key's endorsement.
    assert list(LogLeaf.objects.filter(organization=store.organization).order_by("index")
                .values_list("kind", flat=True)) == ["key_endorsement", "genesis", "genesis"]
    assert memory_verify(m) == []


def test_memories_create_names_the_duplicate_id_and_writes_nothing(store, housekeeper):
    services.memories_create(store=store, records=[{"id": "a", "text": "alpha"}])
    with pytest.raises(ValidationError, match="'b'"):
        services.memories_create(store=store, records=[{"id": "b", "text": "x"}, {"id": "b", "text": "y"}])
    with pytest.raises(ValidationError, match="'a'"):
        services.memories_create(store=store, records=[{"id": "c", "text": "x"}, {"id": "a", "text": "y"}])
    assert list(Memory.objects.values_list("external_id", flat=True)) == ["a"]


def test_transition_append_moves_the_weight_by_the_rule_and_logs_both_entries(memories):
    m = memories[0]
    node = services.transition_append(memory_id=m.pk, valence_q=1000, evidence=["outcome:7"])
    m.refresh_from_db()
    assert (node.seq, node.prev_weight_q, node.new_weight_q) == (1, 1000, next_weight_q(1000, 1000, 500))
    assert (m.live_seq, m.live_weight_q, bytes(m.chain_head)) == (1, node.new_weight_q, bytes(node.entry_hash))
    assert TransitionCommitment.objects.get(memory=m, seq=1).new_weight_q == node.new_weight_q
    kinds = list(LogLeaf.objects.filter(memory=m).order_by("index").values_list("kind", "seq"))
    assert kinds == [("genesis", 0), ("provenance", 1), ("transition", 1)]
    services.transition_append(memory_id=m.pk, valence_q=-1000, evidence=["outcome:8"])
    m.refresh_from_db()
    assert m.live_seq == 2 and memory_verify(m) == []


def test_label_append_with_an_idempotency_key_appends_once(memories):
    m = memories[1]
    kwargs = {"memory_id": m.pk, "label": "poison_likely", "reason": "repeated query pattern",
              "evidence": {"score": 910}, "actor": "ingest-classifier@1.0", "idempotency_key": "cls:1"}
    first = services.label_append(**kwargs)
    again = services.label_append(**kwargs)
    assert first.pk == again.pk and EpistemicLabel.objects.filter(memory=m).count() == 1
    refuted = services.label_append(memory_id=m.pk, label="poison_refuted", reason="checked", evidence={},
                                    actor="user:bob")
    m.refresh_from_db()
    assert (refuted.seq, m.label_seq, m.epistemic_state) == (1, 1, "poison_refuted")
    assert bytes(refuted.prev) == bytes(first.entry_hash)
    assert memory_verify(m) == []


def test_outcomes_apply_folds_rewards_into_one_transition_per_memory_once(memories, store):
    receipt = Receipt.objects.create(organization=store.organization, store=store, body={})
    a = Outcome.objects.create(organization=store.organization, receipt=receipt, memory=memories[0], reward_q=1000)
    b = Outcome.objects.create(organization=store.organization, receipt=receipt, memory=memories[0], reward_q=-500)
    c = Outcome.objects.create(organization=store.organization, receipt=receipt, memory=memories[2], reward_q=-1000)
    assert services.outcomes_apply(organization=store.organization) == 2
    assert services.outcomes_apply(organization=store.organization) == 0
    node = ProvenanceNode.objects.get(memory=memories[0])
    assert node.valence_q == 250 and node.evidence == [f"outcome:{a.pk}", f"outcome:{b.pk}"]
    assert {o.transition_id for o in Outcome.objects.filter(pk__in=[a.pk, b.pk])} == {node.pk}
    assert Outcome.objects.get(pk=c.pk).transition.memory_id == memories[2].pk


def test_tree_head_issue_signs_the_log_and_skips_an_unchanged_size(memories, organization):
    first = services.tree_head_issue(organization=organization)
    assert first.size == 4  # the online key's endorsement and three genesis entries
    assert services.tree_head_issue(organization=organization).pk == first.pk
    services.transition_append(memory_id=memories[0].pk, valence_q=500, evidence=[])
    assert services.tree_head_issue(organization=organization).size == 6
    assert organization_verify(organization) == []


# --------------------------------------------------------------------------- refusals


def test_it_refuses_any_write_outside_the_housekeeper_role(memories, monkeypatch):
    monkeypatch.delenv("MEMAUDIT_ROLE")
    before = snapshot()
    with pytest.raises(NotHousekeeperError):
        services.transition_append(memory_id=memories[0].pk, valence_q=1000, evidence=[])
    with pytest.raises(NotHousekeeperError):
        services.label_append(memory_id=memories[0].pk, label="poison_suspect", reason="", evidence={}, actor="x")
    with pytest.raises(NotHousekeeperError):
        services.entry_insert_verified(memory_id=memories[0].pk, entries=[])
    assert snapshot() == before
    assert os.environ.get("MEMAUDIT_ROLE") is None


def test_it_refuses_an_unsigned_entry(memories, housekeeper):
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(housekeeper.now))
    rejected(memories[0], [SignedEntry(node.kind, node.body, bytes(64)), t], SignatureInvalidError)


def test_it_refuses_a_forged_signature(memories, housekeeper):
    mallory = Ed25519Signer(bytes(range(32)), 1)  # claims epoch 1, holds another key
    node, t = node_pair(memories[0], mallory, time=format_time(housekeeper.now))
    err = rejected(memories[0], [node, t], SignatureInvalidError)
    assert "memory main/m0" in err.messages[0] and "provenance seq=1" in err.messages[0]


def test_it_refuses_an_altered_body(memories, housekeeper):
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(housekeeper.now))
    altered = SignedEntry(node.kind, {**node.body, "evidence": ["outcome:999"]}, node.signature)
    rejected(memories[0], [altered, t], SignatureInvalidError)


def test_it_refuses_an_entry_of_another_organization_replayed_into_this_one(memories, housekeeper, settings):
    globex = Organization.objects.create(name="Globex", slug="globex")
    services.housekeeper_init(organization=globex, now=housekeeper.now)
    g_store = services.store_create(organization=globex, name="Main", slug="main")
    [g_mem] = services.memories_create(store=g_store, records=[{"id": "m0", "text": "Memory number 0."}])
    services.memory_genesis_sign(memory_ids=[g_mem.pk])
    # A valid, signed acme entry for acme's main/m0 — the same memory name as globex's.
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(housekeeper.now))
    err = rejected(g_mem, [node, t], TenantMismatchError)
    assert "acme" in err.messages[0]


def test_it_refuses_a_signature_of_an_expired_epoch(memories, housekeeper):
    late = housekeeper.now + timedelta(days=366)  # epoch 1 is valid for 365 days
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(late))
    rejected(memories[0], [node, t], EpochExpiredError)


def test_it_refuses_a_signature_of_a_revoked_epoch(memories, housekeeper, organization):
    revoked_at = housekeeper.now + timedelta(seconds=30)
    services.housekeeper_rotate(organization=organization, now=housekeeper.now + timedelta(seconds=10))
    services.housekeeper_revoke(organization=organization, epoch=1, now=revoked_at)
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(revoked_at + timedelta(seconds=1)))
    rejected(memories[0], [node, t], EpochRevokedError)
    # the service itself signs with epoch 2 from then on
    node = services.transition_append(memory_id=memories[0].pk, valence_q=1000, evidence=[],
                                      now=revoked_at + timedelta(seconds=2))
    assert node.epoch == 2


def test_it_refuses_a_broken_prev_link(memories, housekeeper):
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(housekeeper.now),
                        prev=bytes(memories[1].chain_head).hex())
    rejected(memories[0], [node, t], ChainBrokenError)


def test_it_refuses_a_replayed_node_of_the_same_memory(memories, housekeeper):
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(housekeeper.now))
    services.entry_insert_verified(memory_id=memories[0].pk, entries=[node, t])
    rejected(memories[0], [node, t], ChainBrokenError)


def test_it_refuses_a_weight_the_rule_does_not_give(memories, housekeeper):
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(housekeeper.now),
                        new_weight_q=3000)
    rejected(memories[0], [node, t], WeightMismatchError)


def test_it_refuses_a_transition_committing_another_weight_than_its_node(memories, housekeeper):
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(housekeeper.now),
                        transition_weight_q=2500)
    rejected(memories[0], [node, t], WeightMismatchError)


def test_it_refuses_a_node_without_its_transition_commitment(memories, housekeeper):
    node, _ = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(housekeeper.now))
    rejected(memories[0], [node], WeightMismatchError)


def test_it_refuses_a_label_with_a_broken_prev_and_a_second_genesis(memories, housekeeper):
    signer = epoch1_signer(housekeeper)
    m = memories[0]
    bad = sign_entry(LABEL, label_body("acme", m.ledger_id, 0, "poison_suspect", "r", {}, "user:alice",
                                       "ab" * 32, 1, format_time(housekeeper.now)), signer)
    rejected(m, [bad], ChainBrokenError)
    ok = sign_entry(LABEL, label_body("acme", m.ledger_id, 0, "poison_suspect", "r", {}, "user:alice",
                                      ZERO_HASH_HEX, 1, format_time(housekeeper.now)), signer)
    services.entry_insert_verified(memory_id=m.pk, entries=[ok])
    genesis = SignedEntry(GENESIS, dict(m.genesis and {
        "tenant": "acme", "store": "main", "memory": m.ledger_id, "seq": 0,
        "content_sha256": bytes(m.content_sha256).hex(), "weight_q": 1000, "epoch": 1,
        "time": format_time(housekeeper.now)}), b"")
    rejected(m, [sign_entry(GENESIS, genesis.body, signer)], ChainBrokenError)
