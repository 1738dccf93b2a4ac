"""The write path's fast paths: one round trip per write on PostgreSQL, the cached key ring,
bulk inserts over many memories and organizations. Each must behave exactly as the plain path."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ledger import services
from ledger.core.canonical import format_time
from ledger.core.errors import EpochRevokedError, UnknownEpochError
from ledger.core.keys import Ed25519Signer
from ledger.keystore import KeyDirectory
from ledger.models import KeyEpoch, LogLeaf, Memory, ProvenanceNode, TransitionCommitment
from ledger.services import writes
from ledger.verification import organization_verify
from orgs.models import Organization
from tests.ledger.test_services import epoch1_signer, node_pair, rejected

pytestmark = pytest.mark.django_db

POSTGRES = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


@pytest.mark.skipif(not POSTGRES, reason="round trips are counted on PostgreSQL")
def test_an_append_costs_four_round_trips_on_postgresql(memories):
    services.transition_append(memory_id=memories[0].pk, valence_q=100, evidence=["warm"])
    # The online key's endorsement is confirmed once its transaction commits; the test's own
    # transaction never does, so confirm it as a commit would (else each append looks it up).
    from ledger import signing

    for keys in signing._online.values():
        for key in keys:
            key.confirm()
    with CaptureQueriesContext(connection) as queries:
        services.transition_append(memory_id=memories[0].pk, valence_q=100, evidence=["counted"])
    sql = [q["sql"] for q in queries.captured_queries]
    assert len(sql) == 4, sql  # BEGIN, lock the memory (+ epoch marks), the whole write, COMMIT
    assert "FOR UPDATE OF m" in sql[1]
    assert sql[2].startswith('SELECT 1 FROM "orgs_organization"') and "ledger_logleaf" in sql[2]


def test_a_revocation_made_after_the_key_ring_was_cached_is_enforced(memories, housekeeper, organization):
    services.transition_append(memory_id=memories[0].pk, valence_q=100, evidence=["caches the key ring"])
    revoked_at = housekeeper.now + timedelta(seconds=30)
    # straight into the table (the trigger allows setting revoked_at once), not via the service
    KeyEpoch.objects.filter(organization=organization, number=1).update(revoked_at=format_time(revoked_at))
    node, t = node_pair(memories[0], epoch1_signer(housekeeper), time=format_time(revoked_at + timedelta(seconds=1)))
    rejected(memories[0], [node, t], EpochRevokedError)


def test_an_epoch_added_after_the_key_ring_was_cached_signs_at_once(memories, housekeeper, organization):
    services.transition_append(memory_id=memories[0].pk, valence_q=100, evidence=["caches the key ring"])
    services.housekeeper_rotate(organization=organization, now=housekeeper.now + timedelta(seconds=10))
    node = services.transition_append(memory_id=memories[0].pk, valence_q=100, evidence=["epoch 2"],
                                      now=housekeeper.now + timedelta(seconds=20))
    assert node.epoch == 2


def test_an_epoch_unknown_to_the_database_is_refused_even_with_a_warm_key_ring(memories, housekeeper, organization):
    services.transition_append(memory_id=memories[0].pk, valence_q=100, evidence=["caches the key ring"])
    # epoch 2 exists in the key directory only: the database (what the write path trusts) lacks it
    KeyDirectory(settings.HOUSEKEEPER_KEY_DIR).rotate(organization.slug, housekeeper.now + timedelta(seconds=10))
    signer2 = Ed25519Signer(housekeeper.keys._read_seed(organization.slug, 2), 2)
    node, t = node_pair(memories[0], signer2, time=format_time(housekeeper.now + timedelta(seconds=20)))
    rejected(memories[0], [node, t], UnknownEpochError)


def test_a_batch_over_many_memories_logs_contiguously_and_returns_saved_rows(memories, organization):
    before = LogLeaf.objects.filter(organization=organization).count()
    items = [{"memory_id": m.pk, "valence_q": v, "evidence": [f"o:{m.pk}:{v}"]}
             for v in (300, -200, 100) for m in reversed(memories)]
    nodes = services.transitions_append(items=items)
    assert len(nodes) == 9
    for node, item in zip(nodes, items):
        stored = ProvenanceNode.objects.get(pk=node.pk)
        assert (stored.memory_id, stored.seq, stored.evidence) == (item["memory_id"], node.seq, item["evidence"])
        assert TransitionCommitment.objects.get(memory_id=node.memory_id, seq=node.seq).new_weight_q == \
            node.new_weight_q
    indexes = list(LogLeaf.objects.filter(organization=organization).order_by("index").values_list("index", flat=True))
    assert indexes == list(range(before + 18))
    for m in memories:
        live = Memory.objects.get(pk=m.pk)
        last = ProvenanceNode.objects.filter(memory=m).order_by("-seq").first()
        assert (live.live_seq, live.live_weight_q, bytes(live.chain_head)) == \
            (last.seq, last.new_weight_q, bytes(last.entry_hash))
    assert organization_verify(organization) == []


def test_a_batch_spanning_two_organizations_appends_to_each_log(memories, organization, housekeeper):
    globex = Organization.objects.create(name="Globex", slug="globex")
    services.housekeeper_init(organization=globex, now=housekeeper.now)
    store = services.store_create(organization=globex, name="G", slug="g")
    theirs = services.memories_create(store=store, records=[{"id": "g0", "text": "Globex memory."}])
    services.memory_genesis_sign(memory_ids=[theirs[0].pk])
    nodes = services.transitions_append(items=[{"memory_id": theirs[0].pk, "valence_q": 500, "evidence": []},
                                               {"memory_id": memories[1].pk, "valence_q": 500, "evidence": []}])
    assert [n.organization_id for n in nodes] == [globex.pk, organization.pk]
    assert list(LogLeaf.objects.filter(organization=globex).order_by("index").values_list("kind", flat=True)) == \
        ["key_endorsement", "genesis", "provenance", "transition"]
    assert organization_verify(organization) == [] and organization_verify(globex) == []


def test_evidence_with_quotes_percent_signs_and_sql_is_stored_verbatim(memories, organization):
    evidence = ["100% 'quoted' \"double\"", "%s %(x)s", "'); DROP TABLE ledger_logleaf; --", "\\x00ff", "ünï©ødé"]
    node = services.transition_append(memory_id=memories[2].pk, valence_q=100, evidence=evidence)
    assert ProvenanceNode.objects.get(pk=node.pk).evidence == evidence
    label = services.label_append(memory_id=memories[2].pk, label="poison_suspect", reason="50% 'sure'; --",
                                  evidence={"q": "%s", "n": 1}, actor="user:o'brien")
    assert (label.reason, label.evidence, label.actor) == ("50% 'sure'; --", {"q": "%s", "n": 1}, "user:o'brien")
    assert organization_verify(organization) == []


def test_a_batch_split_into_several_insert_statements_still_logs_contiguously(memories, organization, monkeypatch):
    monkeypatch.setattr(writes, "_WRITE_CHUNK", 2)  # 5 transitions: 3 node, 3 commitment and 5 leaf statements
    before = LogLeaf.objects.filter(organization=organization).count()
    nodes = services.transitions_append(items=[{"memory_id": memories[i % 3].pk, "valence_q": 100 * (i + 1),
                                                "evidence": [f"chunk:{i}"]} for i in range(5)])
    assert len({n.pk for n in nodes}) == 5 and all(n.pk for n in nodes)
    leaves = list(LogLeaf.objects.filter(organization=organization, index__gte=before).order_by("index")
                  .values_list("index", "memory_id", "kind", "seq"))
    assert [i for i, *_ in leaves] == list(range(before, before + 10))
    # grouped by memory (in order of first appearance), each memory's entries in causal order
    order = list(dict.fromkeys(n.memory_id for n in nodes))
    assert [(m, k, s) for _, m, k, s in leaves] == [
        (n.memory_id, kind, n.seq) for mid in order for n in nodes if n.memory_id == mid
        for kind in ("provenance", "transition")]
    assert organization_verify(organization) == []


def test_a_bad_signature_deep_in_a_large_batch_is_refused_and_nothing_is_written(memories, monkeypatch):
    # A batch's signatures are made, and checked, on worker threads (SIGNING_BATCH_MIN and
    # SIGNATURE_BATCH_MIN items and up): a faulty signature on one entry among many still refuses
    # the whole batch, naming the memory, before anything is written.
    n = writes.SIGNATURE_BATCH_MIN * 3
    real = writes._signed

    def faulty(jobs):
        out = real(jobs)  # node, commitment, node, commitment, ... in item order
        out[2 * 51] = bytes(64 - 1) + b"\x01"  # item 51's provenance node: memory m0's 18th, past the first share
        return out

    monkeypatch.setattr(writes, "_signed", faulty)
    before = ProvenanceNode.objects.count(), TransitionCommitment.objects.count(), LogLeaf.objects.count()
    items = [{"memory_id": memories[i % 3].pk, "valence_q": 10, "evidence": [f"b{i}"]} for i in range(n)]
    with pytest.raises(writes.EntryRejected) as exc:
        services.transitions_append(items=items)
    assert "rejected provenance seq=18 for memory main/m0: signature invalid" in str(exc.value), str(exc.value)
    assert (ProvenanceNode.objects.count(), TransitionCommitment.objects.count(), LogLeaf.objects.count()) == before
    monkeypatch.setattr(writes, "_signed", real)
    services.transitions_append(items=items)  # the same batch, signed properly, goes in whole
    assert ProvenanceNode.objects.count() == before[0] + n
    assert organization_verify(memories[0].organization) == []


def test_a_bad_genesis_signature_in_an_import_sized_batch_refuses_the_batch(store, housekeeper, monkeypatch):
    created = services.memories_create(store=store, records=[{"id": f"g{i}", "text": f"Genesis {i}."}
                                                             for i in range(writes.SIGNATURE_BATCH_MIN * 2)])
    calls = {"n": 0}
    real = writes.sign_checked_body

    def faulty(kind, body, signer):
        entry, digest = real(kind, body, signer)
        calls["n"] += 1
        if calls["n"] == 40:
            entry = type(entry)(entry.kind, entry.body, bytes(reversed(entry.signature)))
        return entry, digest

    monkeypatch.setattr(writes, "sign_checked_body", faulty)
    with pytest.raises(writes.EntryRejected) as exc:
        services.memory_genesis_sign(memory_ids=[m.pk for m in created])
    assert "rejected genesis seq=0 for memory main/g39: signature invalid" in str(exc.value), str(exc.value)
    assert not Memory.objects.filter(pk__in=[m.pk for m in created], chain_head__isnull=False).exists()
    monkeypatch.setattr(writes, "sign_checked_body", real)
    assert services.memory_genesis_sign(memory_ids=[m.pk for m in created]) == len(created)
