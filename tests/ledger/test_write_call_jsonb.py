"""The warm append's call with the batch as one jsonb parameter (migration 0012) and the batch
signatures made on worker threads: the values round-trip, a bad batch is refused whole, the
server still checks the tips and the triggers stay the last line."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from ledger import services
from ledger.core.keys import Ed25519Signer, generate_keypair
from ledger.core.merkle import leaf_hash
from ledger.models import LogLeaf, Memory, ProvenanceNode, TransitionCommitment
from ledger.services import sql, writes
from ledger.verification import organization_verify

POSTGRES = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
_PG = (pytest.mark.postgres, pytest.mark.skipif(not POSTGRES, reason="needs PostgreSQL (DATABASE_URL=postgres://...)"),
       pytest.mark.django_db(transaction=True))


def pg_only(test):
    """The warm path's tests: PostgreSQL, committed transactions (the tips are remembered on commit)."""
    for mark in _PG:
        test = mark(test)
    return test


def _append(memory: Memory, evidence: list[str]) -> tuple[ProvenanceNode, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        node = services.transition_append(memory_id=memory.pk, valence_q=100, evidence=evidence)
    return node, [q["sql"] for q in queries.captured_queries]


def _counts() -> tuple[int, int, int]:
    return ProvenanceNode.objects.count(), TransitionCommitment.objects.count(), LogLeaf.objects.count()


@pg_only
@pytest.mark.parametrize("evidence", [
    ["ünï©ødé € 😀", 'a"b\\c', "{1,2}", "100% 'q'", "%s", "", "\\x00ff", "\\u0000", "NULL", "null", "x,y", "\n\t\x7f"],
    [f"outcome:{i}:" + "é" * 2000 for i in range(200)],  # about 400 kB of evidence in one node
    [],
])
def test_a_warm_append_is_one_call_of_one_parameter_and_stores_what_was_signed(memories, organization, evidence):
    m = memories[0]
    _append(m, ["cold"])  # the locked path; remembers the tips on commit
    node, queries = _append(m, evidence)
    assert queries == [sql.APPEND_JSON_CALL]
    stored = ProvenanceNode.objects.get(pk=node.pk)
    assert stored.evidence == evidence and stored.seq == 2
    assert (bytes(stored.prev), bytes(stored.signature), bytes(stored.entry_hash)) == \
        (bytes(node.prev), bytes(node.signature), bytes(node.entry_hash))
    tc = TransitionCommitment.objects.get(memory=m, seq=2)
    assert bytes(tc.provenance_hash) == bytes(stored.entry_hash) and tc.time == stored.time
    leaves = list(LogLeaf.objects.filter(memory=m, seq=2).order_by("index").values_list("kind", "leaf_hash"))
    assert [(k, bytes(h)) for k, h in leaves][0] == ("provenance", leaf_hash(bytes(stored.entry_hash)))
    m.refresh_from_db()
    assert bytes(m.chain_head) == bytes(stored.entry_hash) and m.live_weight_q == stored.new_weight_q
    assert organization_verify(organization) == []



@pg_only
@pytest.mark.parametrize("bad", ["nul\x00inside", "\x00"])
def test_a_nul_in_the_evidence_is_refused_before_the_call_and_nothing_is_written(memories, organization, bad):
    m = memories[1]
    _append(m, ["cold"])
    before = _counts()
    with CaptureQueriesContext(connection) as queries, pytest.raises(ValueError, match="NUL"):
        services.transition_append(memory_id=m.pk, valence_q=100, evidence=["ok", bad])
    assert queries.captured_queries == [] and _counts() == before
    node, queries = _append(m, ["after"])
    assert node.seq == 2 and queries == [sql.APPEND_JSON_CALL]
    assert organization_verify(organization) == []



def _payload(m: Memory, **change) -> dict:
    """The call's document for the transition the service just wrote to ``m`` (read back from its
    rows), as if it were appended again on top of the state before it."""
    m.refresh_from_db()
    node = ProvenanceNode.objects.get(memory=m, seq=m.live_seq)
    tc = TransitionCommitment.objects.get(memory=m, seq=m.live_seq)
    *counts, newest = services._tips[services._tips_key(m.pk)].epoch_mark
    doc = {"org": m.organization_id, "e": [*counts, newest.hex() if newest is not None else None],
           "m": [[m.pk, m.live_seq - 1, bytes(node.prev).hex(), node.prev_weight_q, m.label_seq, m.live_seq,
                  bytes(node.entry_hash).hex(), node.new_weight_q]],
           "n": [[m.pk, node.seq, node.prev_weight_q, node.new_weight_q, node.valence_q, node.eta_q, node.evidence,
                  bytes(node.prev).hex(), node.epoch, node.time, bytes(node.signature).hex(),
                  bytes(node.entry_hash).hex()]],
           "t": [[m.pk, tc.seq, tc.new_weight_q, bytes(tc.provenance_hash).hex(), tc.epoch, tc.time,
                  bytes(tc.signature).hex()]],
           "l": [[m.pk, "provenance", node.seq, "00" * 32], [m.pk, "transition", node.seq, "01" * 32]]}
    doc.update(change)
    return doc


def _call(doc: dict) -> None:
    with connection.cursor() as c:
        c.execute(sql.APPEND_JSON_CALL, [sql._append_payload(doc).decode()])


@pg_only
def test_the_jsonb_call_checks_the_tips_and_the_triggers_stay_the_last_line(memories, organization):
    m = memories[2]
    _append(m, ["one"])
    before = _counts()
    # the tips it would check are the state before the last append: they moved, it refuses
    with pytest.raises(DatabaseError, match="a chain tip moved"):
        _call(_payload(m))
    # tips that match, but a new chain head no node has: the memory trigger refuses
    m.refresh_from_db()
    doc = _payload(m)
    head = bytes(m.chain_head).hex()
    doc["m"] = [[m.pk, m.live_seq, head, m.live_weight_q, m.label_seq, m.live_seq + 1, "78" * 32, m.live_weight_q + 1]]
    doc["n"] = [[m.pk, m.live_seq + 1, m.live_weight_q, m.live_weight_q + 1, 100, 500, [], head, 1,
                 "2026-01-01T00:00:00.000001Z", "73" * 64, "68" * 32]]
    doc["t"] = [[m.pk, m.live_seq + 1, m.live_weight_q + 1, "68" * 32, 1, "2026-01-01T00:00:00.000001Z", "73" * 64]]
    with pytest.raises(DatabaseError, match="ledger_memory"):
        _call(doc)
    # a value of the wrong type: the whole call rolls back
    doc["m"][0][6] = "68" * 32
    doc["n"][0][1] = "two"
    with pytest.raises(DatabaseError, match="integer"):
        _call(doc)
    assert _counts() == before
    assert organization_verify(organization) == []



@pytest.mark.django_db(transaction=True)
def test_a_batch_with_one_swapped_signature_is_refused_naming_memory_and_seq(memories, organization, monkeypatch):
    # 96 items over three memories, signed on the worker threads; item 40's commitment gets
    # item 41's signature. The whole batch is refused, naming that memory and seq; nothing is
    # written; the same batch, signed properly, then goes in whole (on PostgreSQL in one call).
    n = max(writes.SIGNATURE_BATCH_MIN, writes.SIGNING_BATCH_MIN) * 3
    items = [{"memory_id": memories[i % 3].pk, "valence_q": 10, "evidence": [f"b{i}"]} for i in range(n)]
    services.transitions_append(items=items[:3])  # on PostgreSQL: remembers the tips (warm batch next)
    real = writes._signed

    def swapped(jobs):
        out = real(jobs)
        out[2 * 40 + 1], out[2 * 41 + 1] = out[2 * 41 + 1], out[2 * 40 + 1]
        return out

    monkeypatch.setattr(writes, "_signed", swapped)
    before = _counts()
    with pytest.raises(writes.EntryRejected) as exc:
        services.transitions_append(items=items)
    # item 40 is memory m1's 14th item of the batch: seq 1 + 14
    assert "rejected transition seq=15 for memory main/m1: signature invalid" in str(exc.value), str(exc.value)
    assert _counts() == before
    monkeypatch.setattr(writes, "_signed", real)
    with CaptureQueriesContext(connection) as queries:
        nodes = services.transitions_append(items=items)
    assert [x.seq for x in nodes[:6]] == [2, 2, 2, 3, 3, 3] and _counts()[0] == before[0] + n
    if POSTGRES:
        assert [q["sql"] for q in queries.captured_queries] == [sql.APPEND_JSON_CALL]
    assert organization_verify(organization) == []


class _CallerOnlySigner:
    """A signer that is not an in-memory libsodium key (an HSM's, say): records its threads."""

    def __init__(self, key: Ed25519Signer) -> None:
        self.key, self.epoch, self.public_key, self.threads = key, key.epoch, key.public_key, set()

    def sign(self, message: bytes) -> bytes:
        self.threads.add(threading.get_ident())
        return self.key.sign(message)


def test_a_batch_is_signed_on_the_threads_as_it_is_inline_and_other_signers_stay_on_the_caller():
    key = Ed25519Signer(generate_keypair()[0], 1)
    jobs = [(key, bytes([i % 256]) * 32) for i in range(4 * writes.SIGNING_BATCH_MIN + 3)]
    assert writes._signed(jobs) == [key.sign(d) for _, d in jobs]
    other = _CallerOnlySigner(key)
    assert writes._signed([(other, d) for _, d in jobs]) == [key.sign(d) for _, d in jobs]
    assert other.threads == {threading.get_ident()}
