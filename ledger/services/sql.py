"""The write path's hand-built SQL: the memory-lock query, statements bound on the client and
sent as one query (PostgreSQL), insert templates, log leaves, and the one-round-trip guard.

Raw SQL because the ORM compiles these statements slower than the database runs them; every
statement goes through Django's connection (its transaction, its converters), except the warm
append's call of ``ledger_append_transitions`` (:func:`_append_call`), which runs on that
connection's libpq handle outside any transaction, its errors still wrapped as Django's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models import Max
from psycopg import ClientCursor, pq
from psycopg.types.json import Jsonb

from ledger.models import KeyEpoch, LogLeaf, Memory, Store
from ledger.services.keys import _EPOCH_MARKS
from orgs.models import Organization


def _converted(row: tuple, converters: list[tuple[int, list, Any]]) -> list:
    """Apply the backend's and the fields' from-database converters, as the ORM would."""
    out = list(row)
    for i, convs, col in converters:
        for conv in convs:
            out[i] = conv(out[i], col, connection)
    return out


@dataclass(frozen=True)
class _LockQuery:
    """The parts of the memory-lock statement that depend only on the database backend."""

    head: str  # SELECT ... WHERE m.id IN (
    tail: str  # ) ORDER BY m.id [FOR UPDATE OF m]
    names: tuple[list[str], ...]  # attnames of Memory, Organization, Store columns
    converters: list[tuple[int, list, Any]]


_lock_queries: dict[str, _LockQuery] = {}


def _lock_query() -> _LockQuery:
    q = _lock_queries.get(connection.vendor)
    if q is not None:
        return q
    qn = connection.ops.quote_name
    models_ = ((Memory, "m"), (Organization, "o"), (Store, "s"))
    cols = [f"{alias}.{qn(f.column)}" for model, alias in models_ for f in model._meta.concrete_fields]
    ke = qn(KeyEpoch._meta.db_table)
    marks = [f"(SELECT {agg} FROM {ke} e WHERE e.organization_id = m.organization_id)" for agg in _EPOCH_MARKS.values()]
    marks.append(f"(SELECT e.public_key FROM {ke} e WHERE e.organization_id = m.organization_id "
                 "ORDER BY e.id DESC LIMIT 1)")
    columns = [f.get_col(alias) for model, alias in models_ for f in model._meta.concrete_fields]
    q = _LockQuery(
        head=(f"SELECT {', '.join(cols + marks)} FROM {qn(Memory._meta.db_table)} m "
              f"JOIN {qn(Organization._meta.db_table)} o ON o.id = m.organization_id "
              f"JOIN {qn(Store._meta.db_table)} s ON s.id = m.store_id WHERE m.id IN ("),
        tail=") ORDER BY m.id" + (" FOR UPDATE OF m" if connection.features.has_select_for_update_of else ""),
        names=tuple([f.attname for f in model._meta.concrete_fields] for model, _ in models_),
        converters=[(i, convs, col) for i, col in enumerate(columns)
                    if (convs := connection.ops.get_db_converters(col) + col.target.get_db_converters(connection))],
    )
    _lock_queries[connection.vendor] = q
    return q


def _lock_memories(ids: list[int]) -> dict[int, Memory]:
    """Lock the memory rows (by id; the organization and store come along unlocked) and read, in
    the same statement, their organization's key-epoch marks (``memory.epoch_mark``, see
    :func:`_epoch_set_of`). Raw SQL: the ORM compiles this query slower than the database runs it."""
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    ids = sorted(set(ids))
    q = _lock_query()
    names_m, names_o, names_s = q.names
    nm, no, ns = len(names_m), len(names_o), len(names_s)
    out: dict[int, Memory] = {}
    for start in range(0, len(ids), 900):
        chunk = ids[start:start + 900]
        with db.cursor() as cur:
            cur.execute(q.head + ", ".join(["%s"] * len(chunk)) + q.tail, chunk)
            rows = cur.fetchall()
        for raw in rows:
            row = _converted(raw, q.converters)
            m = Memory.from_db(db.alias, names_m, row[:nm])
            org = Organization.from_db(db.alias, names_o, row[nm:nm + no])
            store = Store.from_db(db.alias, names_s, row[nm + no:nm + no + ns])
            Memory.organization.field.set_cached_value(m, org)
            Memory.store.field.set_cached_value(m, store)
            *counts, newest = row[nm + no + ns:]
            m.epoch_mark = (*counts, bytes(newest) if newest is not None else None)
            out[m.pk] = m
    return out


def _lock_log(organization_id: int) -> int:
    """Lock the organization row (serializes the log) and return the next log index."""
    list(Organization.objects.select_for_update().filter(pk=organization_id).values_list("pk"))
    last = LogLeaf.objects.filter(organization_id=organization_id).aggregate(m=Max("index"))["m"]
    return 0 if last is None else last + 1


# A statement is a list of (SQL fragment, parameters) parts, concatenated in order: bulk
# VALUES lists are one short part per row, so on PostgreSQL each row is bound with psycopg's
# cached parse of the short template instead of one parse of a template with thousands of
# placeholders (which cost more than the signatures of the batch).
_Statement = list[tuple[str, Sequence[Any]]]


def _pg_mogrifier() -> Callable[[str, Sequence[Any]], str]:
    """Binds a part's parameters into its SQL on the client. The write path's values are ints,
    strings, bytes, None and JSON; those are written as literals here (strings quote-doubled,
    which is exact while ``standard_conforming_strings`` is on, PostgreSQL's default; bytes as
    ``'\\x…'::bytea``; JSON as its text ``::jsonb``), any other value by psycopg's mogrify. The
    profile of an append showed psycopg's per-value adaptation costing more than its crypto."""
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    db.ensure_connection()
    raw = db.connection
    cached = getattr(db, "_ledger_bind", None)
    if cached is not None and cached[0] is raw:
        return cached[1]
    bind = _binder(raw)
    db._ledger_bind = (raw, bind)  # per database connection: built once, not per write
    return bind


def _binder(raw: Any) -> Callable[[str, Sequence[Any]], str]:
    mogrify = ClientCursor(raw).mogrify
    if raw.pgconn.parameter_status(b"standard_conforming_strings") != b"on":
        return mogrify

    def text(v: str) -> str:
        if "\x00" in v:
            raise ValueError("PostgreSQL text cannot contain NUL characters")
        return "'" + v.replace("'", "''") + "'"

    def literal(v: Any) -> str | None:
        t = type(v)
        if t is int:
            return str(v)
        if t is str:
            return text(v)
        if v is None:
            return "NULL"
        if t is bytes or t is memoryview:
            return "'\\x" + bytes(v).hex() + "'::bytea"
        if t is bool:
            return "true" if v else "false"
        if t is Jsonb:
            return text(v.dumps(v.obj) if getattr(v, "dumps", None) else json.dumps(v.obj)) + "::jsonb"
        return None

    def bind(sql: str, params: Sequence[Any]) -> str:
        out = []
        for v in params:
            lit = literal(v)
            if lit is None:
                return mogrify(sql, params)
            out.append(lit)
        return sql % tuple(out)

    return bind


def _run_statements(statements: list[_Statement]) -> list[list[tuple]]:
    """Run ``statements`` in order in the current transaction; return each one's rows.

    On PostgreSQL they go to the server as one simple-protocol query (parameters bound on the
    client by psycopg), so a whole write costs one round trip; the server still runs them one
    after the other, each statement seeing the effects of the ones before it (and, under READ
    COMMITTED, a fresh snapshot taken after the locks the earlier ones acquired). Elsewhere
    they run one by one.
    """
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    out: list[list[tuple]] = []
    with db.cursor() as cur:
        # psycopg 3 only: psycopg2 cannot return the results of later statements (no nextset).
        if db.vendor == "postgresql" and db.Database.__name__ == "psycopg":
            bind = _pg_mogrifier()
            cur.execute(";\n".join("".join(bind(sql, params) if params else sql for sql, params in stmt)
                                   for stmt in statements))
            raw = cur.cursor
            while True:
                out.append(raw.fetchall() if raw.description is not None else [])
                if not raw.nextset():
                    break
            if len(out) != len(statements):
                raise RuntimeError(f"expected {len(statements)} results from the ledger write, got {len(out)}")
            return out
        for stmt in statements:
            cur.execute("".join(sql for sql, _ in stmt), [v for _, params in stmt for v in params])
            out.append(cur.fetchall() if cur.description is not None else [])
    return out


_insert_templates: dict[tuple[str, type], tuple[str, str, str, list[tuple[str, Any]]]] = {}


def _insert_sql(model: type[models.Model], rows: list[dict[str, Any]]) -> _Statement:
    """``INSERT ... VALUES (...), ... RETURNING id`` for ``rows`` (column values by attname: all
    concrete fields but the pk)."""
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    template = _insert_templates.get((db.vendor, model))
    if template is None:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        qn = db.ops.quote_name
        # Integers, strings and bytes go to the driver (or the literal writer) as they are: the
        # bodies were schema-checked. Only JSON needs the field's adaptation (a BinaryField's
        # would wrap the bytes in a type the literal writer leaves to psycopg's slower mogrify).
        plain = (models.IntegerField, models.CharField, models.ForeignKey, models.BinaryField)
        attrs = [(f.attname, None if isinstance(f, plain) and not isinstance(f, models.JSONField) else f)
                 for f in fields]
        template = _insert_templates[(db.vendor, model)] = (
            f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) VALUES ",
            "(" + ", ".join(["%s"] * len(fields)) + ")", f" RETURNING {qn(model._meta.pk.column)}", attrs)
    head, one, tail, attrs = template
    stmt: _Statement = [(head, ())]
    for i, row in enumerate(rows):
        values = []
        for attname, f in attrs:
            v = row[attname]
            values.append(v if f is None or v is None else f.get_db_prep_save(v, db))
        stmt.append((one if i == 0 else ", " + one, values))
    stmt.append((tail, ()))
    return stmt


def _leaves_sql(organization_id: int, leaves: list[tuple[int, str, int, bytes]]) -> _Statement:
    """Append ``leaves`` (memory id, kind, seq, leaf hash) to the organization's log after its
    current last index. The index is read by this statement, after the organization row is
    locked by an earlier one, so it sees every leaf committed before."""
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    qn = db.ops.quote_name
    t = qn(LogLeaf._meta.db_table)
    cols = ", ".join(qn(LogLeaf._meta.get_field(n).column) for n in
                     ("organization", "index", "memory", "kind", "seq", "leaf_hash"))
    stmt: _Statement = [(f"INSERT INTO {t} ({cols}) SELECT %s, base.i + v.column1, v.column2, v.column3, "
                         "v.column4, v.column5 FROM (VALUES ", [organization_id])]
    for offset, (memory_id, kind, seq, h) in enumerate(leaves):
        stmt.append(("(%s, %s, %s, %s, %s)" if offset == 0 else ", (%s, %s, %s, %s, %s)",
                     (offset, memory_id, kind, seq, h)))
    stmt.append((f") AS v, (SELECT COALESCE(MAX({qn('index')}) + 1, 0) AS i FROM {t} "
                 f"WHERE {qn('organization_id')} = %s) AS base ORDER BY v.column1", [organization_id]))
    return stmt


# --------------------------------------------------------------------------- one round trip (PostgreSQL)
#
# A process that appended to a memory knows its chain tips as committed. The next transitions
# to it are signed against those tips and sent as ONE multi-statement query, without BEGIN or
# COMMIT round trips: outside a transaction PostgreSQL runs such a query as one implicit
# transaction. Its first statements lock the memory rows and check, through ``ledger_expect``
# (migration 0004), that the tips and the organization's key epochs are still the ones the
# entries were built and verified against; if another process moved them, the query raises and
# rolls back whole, the tips are forgotten, and the locked read-then-write path runs instead.

_tips: dict[tuple, Memory] = {}
_TIPS_MAX = 50_000


def _tips_key(memory_id: int, db: Any = None) -> tuple:
    db = db or connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    return (db.alias, db.settings_dict["NAME"], memory_id)


def _tips_remember(memories: list[Memory], db: Any = None) -> None:
    db = db or connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    if db.vendor != "postgresql":
        return
    alias, name = db.alias, db.settings_dict["NAME"]
    for m in memories:
        if getattr(m, "epoch_mark", None) is not None:
            _tips[(alias, name, m.pk)] = m
    if len(_tips) > _TIPS_MAX:
        for key in list(_tips)[:len(_tips) - _TIPS_MAX]:
            del _tips[key]


def _one_round_trip(db: Any = None) -> bool:
    db = db or connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    return (db.vendor == "postgresql" and db.Database.__name__ == "psycopg"
            and not db.in_atomic_block and db.get_autocommit())


def _guard_sql(memories: list[Memory]) -> list[_Statement]:
    """Lock the memory rows (by id) and require their tips, and their organizations' key-epoch
    marks, to equal what the entries were verified against (``memories`` as they were read)."""
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    qn = db.ops.quote_name
    col = {n: qn(Memory._meta.get_field(n).column) for n in ("live_seq", "chain_head", "live_weight_q", "label_seq")}
    memories = sorted(memories, key=lambda m: m.pk)
    stmt: _Statement = [(
        f"SELECT ledger_expect(COUNT(*) = %s AND COALESCE(BOOL_AND(m.{col['live_seq']} = v.column2 "
        f"AND m.{col['chain_head']} = v.column3 AND m.{col['live_weight_q']} = v.column4 "
        f"AND m.{col['label_seq']} = v.column5), false), 'a chain tip') FROM (SELECT {qn('id')}, "
        f"{', '.join(col.values())} FROM {qn(Memory._meta.db_table)} WHERE {qn('id')} IN "
        f"({', '.join(['%s'] * len(memories))}) ORDER BY {qn('id')} FOR UPDATE) m JOIN (VALUES ",
        [len(memories), *(m.pk for m in memories)])]
    for i, m in enumerate(memories):
        stmt.append(("(%s, %s, %s::bytea, %s, %s)" if i == 0 else ", (%s, %s, %s::bytea, %s, %s)",
                     (m.pk, m.live_seq, bytes(m.chain_head), m.live_weight_q, m.label_seq)))
    stmt.append((f") AS v ON v.column1 = m.{qn('id')}", ()))
    out = [stmt]
    ke = qn(KeyEpoch._meta.db_table)
    for org_id, m in sorted({m.organization_id: m for m in memories}.items()):
        *counts, newest = m.epoch_mark
        checks = " AND ".join(f"{agg} IS NOT DISTINCT FROM %s" for agg in _EPOCH_MARKS.values())
        out.append([(f"SELECT ledger_expect({checks} AND (SELECT n.public_key FROM {ke} n WHERE "
                     f"n.organization_id = %s ORDER BY n.id DESC LIMIT 1) IS NOT DISTINCT FROM %s::bytea, "
                     f"'the key epochs') FROM {ke} e WHERE e.organization_id = %s",
                     [*counts, org_id, newest, org_id])])
    return out


# --------------------------------------------------------------------------- one call (PostgreSQL)
#
# The warm append of transitions to one organization's memories as one call of the server-side
# function ``ledger_append_transitions`` (migration 0010): one array per column, a statement
# prepared once per connection, its statements planned once per session (generic plans, 0011).
# It runs the same checks as :func:`_guard_sql` and the same writes as ``writes._write``; the
# triggers still check each row.

_APPEND_TYPES = (
    "bigint", "bigint", "bigint", "bigint", "text", "bytea",  # organization, key-epoch marks
    "bigint[]", "integer[]", "bytea[]", "integer[]", "integer[]",  # memories and their expected tips
    "integer[]", "bytea[]", "integer[]",  # their new live state
    "bigint[]", "integer[]", "integer[]", "integer[]", "integer[]", "integer[]", "text[]", "bytea[]",
    "integer[]", "text[]", "bytea[]", "bytea[]",  # provenance nodes
    "bigint[]", "integer[]", "integer[]", "bytea[]", "integer[]", "text[]", "bytea[]",  # commitments
    "bigint[]", "text[]", "integer[]", "bytea[]",  # log leaves
)
APPEND_CALL = "SELECT ledger_append_transitions(" + ", ".join(f"%s::{t}" for t in _APPEND_TYPES) + ")"


def _int_array(values: Sequence[int]) -> bytes:
    if len(values) == 1:  # one append: one row per group; one format, no join
        v = values[0]
        if not isinstance(v, int):
            raise TypeError(f"an integer column holds a {type(v).__name__}")
        return b"{%d}" % v
    # int.__repr__, int's own slot: a non-int raises TypeError (int.__str__ is object's: it did not)
    return ("{" + ",".join(map(int.__repr__, values)) + "}").encode()


def _bytea_array(values: Sequence[bytes]) -> bytes:
    if not values:
        return b"{}"
    if len(values) == 1:
        return b'{"\\\\x%b"}' % bytes.hex(values[0]).encode()  # bytes.hex: bytes only
    return ('{"\\\\x' + '","\\\\x'.join(map(bytes.hex, values)) + '"}').encode()


def _text_array(values: Sequence[str]) -> bytes:
    if not values:
        return b"{}"
    text = '{"' + '","'.join(str.replace(str.replace(v, "\\", "\\\\"), '"', '\\"') for v in values) + '"}'
    if "\x00" in text:
        raise ValueError("PostgreSQL text cannot contain NUL characters")
    return text.encode()


def _text_param(v: Any) -> bytes | None:
    """A scalar parameter in PostgreSQL's text input format (ints, strings, bytes, None)."""
    if v is None:
        return None
    t = type(v)
    if t is int:
        return b"%d" % v
    if t is str:
        return v.encode()
    if t is bytes:
        return b"\\x" + v.hex().encode()
    raise TypeError(f"no text parameter for {t.__name__}")


# PostgreSQL array literals of one column each, in the text input format, cast to the
# parameter's type by the prepared call: psycopg's list adaptation (Python code) cost more per
# append than the two signatures. Each writer takes its column's type only (a value of another
# type raises) and returns the parameter's bytes; a one-element column (a single append's) is
# one format operation.
_ARRAY_LITERALS = {"bigint[]": _int_array, "integer[]": _int_array, "bytea[]": _bytea_array,
                   "text[]": _text_array}
_APPEND_WRITERS = tuple(_ARRAY_LITERALS.get(t, _text_param) for t in _APPEND_TYPES)


_PREPARED_NAME = b"ledger_append_transitions"
_PREPARED_SQL = ("SELECT ledger_append_transitions(" +
                 ", ".join(f"${i}::{t}" for i, t in enumerate(_APPEND_TYPES, 1)) + ")").encode()


def _append_call(params: Sequence[Any], db: Any = None) -> list[int]:
    """Call ``ledger_append_transitions`` with ``params`` (autocommit: one implicit transaction)
    and return the provenance node ids.

    On the connection's libpq handle, as a statement prepared once per connection with text
    parameters: Django's cursor wrapper, psycopg's cursor machinery and its list adaptation
    cost several times the call itself. Errors come out as Django's (``wrap_database_errors``);
    a query log that is on (DEBUG, a test counting queries) still records the call, and execute
    wrappers, when installed, see it through Django's cursor (:data:`APPEND_CALL`)."""
    if len(params) != len(_APPEND_TYPES):
        raise ValueError(f"ledger_append_transitions takes {len(_APPEND_TYPES)} arguments, got {len(params)}")
    args = [w(p) for w, p in zip(_APPEND_WRITERS, params)]
    db = db or connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    if db.execute_wrappers:
        with db.cursor() as cur:
            cur.execute(APPEND_CALL, [a if a is None else a.decode() for a in args])
            return cur.fetchone()[0]
    raw = db.connection
    if raw is None or raw.closed:
        db.ensure_connection()
        raw = db.connection
    pgconn = raw.pgconn
    if pgconn.transaction_status != pq.TransactionStatus.IDLE:
        raise RuntimeError("the ledger append call runs outside a transaction only")
    logged = db.queries_logged
    t0 = time.monotonic() if logged else 0.0
    try:
        with db.wrap_database_errors:
            if getattr(db, "_ledger_prepared", None) is not pgconn:  # once per connection
                _check(pgconn.prepare(_PREPARED_NAME, _PREPARED_SQL), pq.ExecStatus.COMMAND_OK, raw)
                db._ledger_prepared = pgconn
            res = pgconn.exec_prepared(_PREPARED_NAME, args)
            if res.status != pq.ExecStatus.TUPLES_OK and res.error_field(pq.DiagnosticField.SQLSTATE) == b"26000":
                # the session lost its prepared statements (DEALLOCATE ALL, DISCARD ALL): again
                _check(pgconn.prepare(_PREPARED_NAME, _PREPARED_SQL), pq.ExecStatus.COMMAND_OK, raw)
                res = pgconn.exec_prepared(_PREPARED_NAME, args)
            _check(res, pq.ExecStatus.TUPLES_OK, raw)
            value = res.get_value(0, 0)
    finally:
        if logged:  # as Django's debug cursor does: refused calls are logged too
            db.queries_log.append({"sql": APPEND_CALL, "time": f"{time.monotonic() - t0:.3f}"})
    if value is None or value[:1] != b"{" or value[-1:] != b"}":
        raise RuntimeError(f"ledger_append_transitions returned {value!r:.80}")
    return [int(x) for x in value[1:-1].split(b",")] if len(value) > 2 else []


def _check(res: Any, want: Any, raw: Any) -> None:
    if res.status != want:
        raise psycopg.errors.error_from_result(res, encoding=raw.info.encoding)
