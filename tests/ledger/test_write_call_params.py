"""The warm append's call parameters (one PostgreSQL array literal per column, written by
``ledger.services.sql``; a single append's columns of one element each take a shorter way) and
the batch signatures made on worker threads: the values round-trip, a NUL is refused with
nothing written, a bad batch is refused whole."""

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
    assert queries == [sql.APPEND_CALL]
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
def test_a_nul_in_the_evidence_is_refused_by_the_database_and_nothing_is_written(memories, organization, bad):
    # The evidence goes in as JSON text, where a NUL is the escape \u0000, which jsonb refuses:
    # the call fails, the locked path tries and fails the same way, nothing is written.
    m = memories[1]
    _append(m, ["cold"])
    before = _counts()
    with pytest.raises(DatabaseError, match="Unicode escape"):
        services.transition_append(memory_id=m.pk, valence_q=100, evidence=["ok", bad])
    assert _counts() == before
    node, _ = _append(m, ["after"])
    node_again, queries = _append(m, ["warm again"])
    assert (node.seq, node_again.seq) == (2, 3) and queries == [sql.APPEND_CALL]
    assert organization_verify(organization) == []


@pytest.mark.parametrize("rows", [1, 3])
def test_the_array_literals_round_trip_through_postgresql(rows, db):
    if not POSTGRES:
        pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://...)")
    texts = ["ünï©ødé € 😀", 'a"b\\c', "{1,2}", "NULL", "", " lead", "\\x00ff", "é" * 3000, "x,y}"]
    ints = [0, -1, 2**62, 7]
    blobs = [b"", b"\x00\xff" * 40, bytes(range(256)), b"\\"]
    cases = [(sql._text_array, "text[]", [texts[(i + j) % len(texts)] for j in range(rows)]) for i in range(len(texts))]
    cases += [(sql._int_array, "bigint[]", [ints[(i + j) % len(ints)] for j in range(rows)]) for i in range(len(ints))]
    cases += [(sql._bytea_array, "bytea[]", [blobs[(i + j) % len(blobs)] for j in range(rows)]) for i in range(len(blobs))]
    cases += [(sql._text_array, "text[]", []), (sql._bytea_array, "bytea[]", []), (sql._int_array, "bigint[]", [])]
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    for write, cast, values in cases:
        res = pgconn.exec_params(f"SELECT $1::{cast}".encode(), [write(values)])
        assert res.error_message == b"", res.error_message
        with connection.cursor() as c:  # read back through psycopg's own loaders
            c.execute(f"SELECT %s::text::{cast}", [write(values).decode()])
            assert [bytes(v) if isinstance(v, memoryview) else v for v in c.fetchone()[0]] == values, (cast, values)
    assert [sql._text_param(v) for v in (None, 7, "t", b"\x01")] == [None, b"7", b"t", b"\\x01"]


def test_a_writer_refuses_a_value_of_another_type():
    for write, bad in ((sql._int_array, ["1"]), (sql._int_array, [1.0]), (sql._int_array, [1, "2"]),
                       (sql._int_array, [1, 2.0]),
                       (sql._bytea_array, ["ab"]), (sql._bytea_array, [b"a", "b"]), (sql._text_param, 1.5)):
        with pytest.raises(TypeError):
            write(bad)
    with pytest.raises(ValueError, match="NUL"):
        sql._text_array(["ok", "a\x00b"])


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
        assert [q["sql"] for q in queries.captured_queries] == [sql.APPEND_CALL]
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
