"""The ledger's one write path (DESIGN section 3, "Integrity enforcement").

Every signed entry goes through :func:`entry_insert_verified` (directly or via the services
below), which, inside one transaction holding the memory's row lock:

1. requires the housekeeper role (``ledger.signing``);
2. maps the signed entry to the row that will be stored, rebuilds the body *from that row*
   (``ledger.core.entries``) and requires it to equal the signed body (the row is the body);
3. verifies the rebuilt entry with ``ledger.core``: tenant and memory, signature under the
   epoch it names as recorded in the database (``KeyEpoch``), at its time (expired or revoked
   epochs refuse);
4. checks it extends the memory's chains as stored: seq = last + 1, ``prev`` = the stored chain
   head, ``prev_weight_q`` = the live weight, ``new_weight_q`` = the weight rule, and each
   provenance node is followed by its transition commitment binding the node's hash and weight;
5. inserts the rows, appends one log leaf per entry (log index serialized by a lock on the
   organization row) and moves the memory's live state.

Cost (PostgreSQL): an append is four round trips — BEGIN; one statement that locks the memory
rows and reads their organization's key-epoch marks (the EpochSet is cached while they match);
one multi-statement write (organization lock, bulk inserts, log leaves, memory update); COMMIT.
Transitions to memories this process wrote before, outside a transaction, take one round trip
(see "one round trip" in ``sql.py``): to one organization's memories, one call of the server-side
function ``ledger_append_transitions`` (migration 0010: the same checks and writes, one array per
column, prepared once per connection; :func:`_write_call`); across organizations, the same
statements as the locked path behind a check of the remembered tips (:func:`_write` with a guard).
The organization lock is held until COMMIT (the log must stay gap-free), so one organization's
appends commit one after another: each pays its own WAL flush.

A rejection raises :class:`EntryRejected` (a ``ValidationError``; ``.cause`` is the typed
``ledger.core.errors`` error) and nothing is written. Lock order is always memory rows (by id),
then the organization row, so appenders never deadlock; on SQLite the IMMEDIATE transaction
mode serializes writers instead of row locks.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from types import SimpleNamespace
from typing import Any

from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, models, transaction
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from ledger.core.canonical import format_time, now_utc, parse_time
from ledger.core.entries import (
    GENESIS,
    LABEL,
    LABELS,
    PROVENANCE,
    TRANSITION,
    ZERO_HASH_HEX,
    SignedEntry,
    checked_body_hash,
    genesis_body,
    genesis_entry_of,
    label_body,
    label_entry_of,
    provenance_body,
    provenance_entry_of,
    sign_checked_body,
    transition_body,
    transition_entry_of,
    verify_entry,
)
from ledger.core.errors import ChainBrokenError, LedgerError, TenantMismatchError, WeightMismatchError
from ledger.core.keys import Ed25519Key, EpochSet, SignatureBatch
from ledger.core.merkle import leaf_hash
from ledger.core.weights import WEIGHT_INITIAL_Q, next_weight_q, valence_from_rewards
from ledger.decisions import decision_of_task, decision_resolve
from ledger.models import (
    ClassifierFinding,
    EpistemicLabel,
    GenesisEntry,
    Memory,
    Outcome,
    ProvenanceNode,
    TransitionCommitment,
)
from ledger.services.keys import _epoch_set_of
from ledger.services.sql import (
    _append_call,
    _guard_sql,
    _insert_sql,
    _leaves_sql,
    _lock_memories,
    _one_round_trip,
    _run_statements,
    _Statement,
    _tips,
    _tips_remember,
)
from ledger.signing import OnlineSigner, endorsement_generation, housekeeper_signer, require_housekeeper
from orgs.models import Organization
from orgs.notifications import notification_emit, site_url

DEFAULT_ETA_Q = 500  # eta = 0.5: a full reward of +1 multiplies the weight by e^0.5 ~ 1.65
GENESIS_BATCH = 500
_WRITE_CHUNK = 500  # rows per INSERT statement
SIGNATURE_BATCH_MIN = 32  # items from which a batch's signature checks go to worker threads
SIGNING_BATCH_MIN = 32  # items from which a batch's signatures are made on worker threads

_SIGNATURE_WORKERS = os.cpu_count() or 1
_THREADSAFE_SIGNERS = (OnlineSigner, Ed25519Key)  # in-memory libsodium keys: sign from any thread
_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _signature_pool() -> ThreadPoolExecutor:
    """This process's signature-check threads (one per CPU; made anew after a fork)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=_SIGNATURE_WORKERS,
                                                     thread_name_prefix="ledger-verify"))
        return _pool[1]


class EntryRejected(ValidationError):
    """A ledger write refused by the write path; nothing was written. ``cause`` is the core error."""

    def __init__(self, message: str, *, cause: LedgerError | None = None) -> None:
        super().__init__(message, code=type(cause).__name__ if cause is not None else "rejected")
        self.cause = cause


@dataclass
class _Row:
    """An entry row to insert: its model and column values by attname (no ``Model`` instance:
    building one per entry cost more than its signature). ``pk`` is set once inserted."""

    model: type[models.Model]
    values: dict[str, Any]
    pk: int | None = None

    def instance(self, alias: str = DEFAULT_DB_ALIAS) -> models.Model:
        """The inserted row as a model instance (only for rows a service returns), as
        ``Model.from_db`` builds it. Without init signals on the model it is built directly:
        ``Model.__init__`` (one descriptor assignment per field) cost as much as a signature."""
        model, values = self.model, self.values
        names = _attnames(model)
        if pre_init.has_listeners(model) or post_init.has_listeners(model):
            return model.from_db(alias, None, [self.pk, *(values[a] for a in names)])
        obj = model.__new__(model)
        d = obj.__dict__
        d[model._meta.pk.attname] = self.pk
        for a in names:
            d[a] = values[a]
        state = obj._state = ModelState()
        state.adding, state.db = False, alias
        return obj


_attnames_cache: dict[type, tuple[str, ...]] = {}


def _attnames(model: type[models.Model]) -> tuple[str, ...]:
    """The model's concrete columns but the primary key, in table order."""
    names = _attnames_cache.get(model)
    if names is None:
        names = _attnames_cache[model] = tuple(f.attname for f in model._meta.concrete_fields if not f.primary_key)
    return names


@dataclass
class _Chain:
    """A memory's chain tips while a batch is being verified (starts from the locked row)."""

    memory: Memory
    tenant: str
    name: str
    seq: int
    head: str | None
    weight_q: int
    label_seq: int
    label_head: str | None  # fetched lazily
    state: str
    pending: tuple[int, str, int] | None = None  # (seq, hash hex, new weight) of a node awaiting its transition
    rows: list[_Row] = field(default_factory=list)
    leaves: list[tuple[str, int, bytes]] = field(default_factory=list)  # (kind, seq, entry hash)
    changed: bool = False

    @classmethod
    def of(cls, memory: Memory) -> _Chain:
        return cls(memory, memory.organization.slug, memory.ledger_id, memory.live_seq,
                   bytes(memory.chain_head).hex() if memory.chain_head is not None else None,
                   memory.live_weight_q, memory.label_seq, None, memory.epistemic_state)

    def label_tip(self) -> str:
        if self.label_seq < 0:
            return ZERO_HASH_HEX
        if self.label_head is None:
            h = EpistemicLabel.objects.filter(memory_id=self.memory.pk, seq=self.label_seq).values_list(
                "entry_hash", flat=True).first()
            if h is None:
                raise ChainBrokenError(f"label seq {self.label_seq} is recorded as the tip but is missing",
                                       kind=LABEL, seq=self.label_seq)
            self.label_head = bytes(h).hex()
        return self.label_head


def _row_for(chain: _Chain, entry: SignedEntry) -> _Row:
    """The row that would store ``entry`` (column values straight from the body)."""
    m = chain.memory
    b = entry.body
    common = {"organization_id": m.organization_id, "epoch": b.get("epoch"), "time": b.get("time"),
              "signature": entry.signature, "memory_id": m.pk}
    try:
        if entry.kind == GENESIS:
            return _Row(GenesisEntry, {**common, "weight_q": b["weight_q"], "entry_hash": None})
        if entry.kind == PROVENANCE:
            return _Row(ProvenanceNode, {
                **common, "seq": b["seq"], "prev_weight_q": b["prev_weight_q"], "new_weight_q": b["new_weight_q"],
                "valence_q": b["valence_q"], "eta_q": b["eta_q"], "evidence": b["evidence"],
                "prev": bytes.fromhex(b["prev"]), "entry_hash": None})
        if entry.kind == TRANSITION:
            return _Row(TransitionCommitment, {**common, "seq": b["seq"], "new_weight_q": b["new_weight_q"],
                                               "provenance_hash": bytes.fromhex(b["provenance"])})
        if entry.kind == LABEL:
            return _Row(EpistemicLabel, {
                **common, "seq": b["seq"], "label": b["label"], "reason": b["reason"], "evidence": b["evidence"],
                "actor": b["actor"], "prev": bytes.fromhex(b["prev"]), "entry_hash": None})
    except (KeyError, TypeError, ValueError) as exc:
        raise ChainBrokenError(f"{entry.kind} body cannot be stored: {exc!r}", kind=entry.kind,
                               seq=b.get("seq") if isinstance(b.get("seq"), int) else None) from None
    raise ChainBrokenError(f"unknown entry kind {entry.kind!r}")


def _rebuilt(chain: _Chain, entry: SignedEntry, row: _Row) -> SignedEntry:
    """The entry as ``ledger.selectors`` will read it back from ``row`` (the row is the body)."""
    m = chain.memory
    columns = SimpleNamespace(**row.values)
    if entry.kind == GENESIS:
        return genesis_entry_of(columns, tenant=chain.tenant, store=m.store.slug, memory=chain.name,
                                content_sha256=m.content_sha256)
    build = {PROVENANCE: provenance_entry_of, TRANSITION: transition_entry_of, LABEL: label_entry_of}[entry.kind]
    return build(columns, tenant=chain.tenant, memory=chain.name)


def _check_entry(chain: _Chain, entry: SignedEntry, epochs: EpochSet, digest: bytes | None = None,
                 signatures: SignatureBatch | None = None) -> None:
    """Steps 2-4 of the module docstring for one entry; appends the row to ``chain.rows``.

    ``digest``: the entry's hash, for an entry this process has just built from a body its builder
    validated (``sign_checked_body``, :func:`_transition_bodies`): the body is then neither
    validated nor canonically encoded again. Its signature is still verified, against the rebuilt
    row's body, as for any other entry: at once, or by ``signatures`` (see :func:`_transitions_signed`).
    """
    kind = entry.kind
    body = entry.body if isinstance(entry.body, dict) else {}
    if body.get("tenant") != chain.tenant and isinstance(body.get("tenant"), str):
        raise TenantMismatchError(f"entry belongs to tenant {body['tenant']!r}, not {chain.tenant!r}",
                                  kind=kind, seq=body.get("seq"))
    row = _row_for(chain, entry)
    rebuilt = _rebuilt(chain, entry, row)
    if rebuilt.body != body:
        raise ChainBrokenError("the body rebuilt from the row to be stored differs from the signed body "
                               f"(fields {sorted(k for k in set(body) | set(rebuilt.body) if body.get(k) != rebuilt.body.get(k))})",
                               kind=kind, seq=body.get("seq") if isinstance(body.get("seq"), int) else None)
    if digest is None:
        digest = verify_entry(rebuilt, kind=kind, tenant=chain.tenant, memory=chain.name, epochs=epochs,
                              signatures=signatures)
    else:
        verify_entry(rebuilt, kind=kind, tenant=chain.tenant, memory=chain.name, epochs=epochs,
                     hash_of=lambda _: digest, body_checked=True, signatures=signatures)
    seq = body["seq"]

    def fail(error: type[LedgerError], message: str) -> LedgerError:
        return error(message, kind=kind, seq=seq)

    if chain.pending is not None and kind != TRANSITION:
        raise WeightMismatchError(f"provenance seq={chain.pending[0]} has no transition commitment",
                                  kind=PROVENANCE, seq=chain.pending[0])
    if kind == GENESIS:
        if chain.head is not None:
            raise fail(ChainBrokenError, "memory already has a signed genesis")
        if body["content_sha256"] != bytes(chain.memory.content_sha256).hex():
            raise fail(ChainBrokenError, "genesis commits another content hash than the stored memory")
        if body["weight_q"] != chain.weight_q:
            raise fail(WeightMismatchError, f"genesis weight_q {body['weight_q']} but the live weight is "
                       f"{chain.weight_q}")
        row.values["entry_hash"] = digest
        chain.head, chain.seq = digest.hex(), 0
    elif kind == PROVENANCE:
        if chain.head is None:
            raise fail(ChainBrokenError, "memory has no signed genesis yet")
        if seq != chain.seq + 1:
            raise fail(ChainBrokenError, f"seq {seq} does not follow the stored seq {chain.seq}")
        if body["prev"] != chain.head:
            raise fail(ChainBrokenError, f"prev {body['prev'][:16]}… is not the stored chain head {chain.head[:16]}…")
        if body["prev_weight_q"] != chain.weight_q:
            raise fail(WeightMismatchError, f"prev_weight_q {body['prev_weight_q']} but the live weight is "
                       f"{chain.weight_q}")
        want = next_weight_q(chain.weight_q, body["valence_q"], body["eta_q"])
        if body["new_weight_q"] != want:
            raise fail(WeightMismatchError, f"new_weight_q {body['new_weight_q']} but the weight rule gives {want}")
        row.values["entry_hash"] = digest
        chain.pending = (seq, digest.hex(), body["new_weight_q"])
    elif kind == TRANSITION:
        if chain.pending is None or chain.pending[0] != seq:
            raise fail(ChainBrokenError, "transition commitment without its provenance node")
        _, node_hash, node_weight = chain.pending
        if body["provenance"] != node_hash:
            raise fail(ChainBrokenError, f"binds provenance {body['provenance'][:16]}…, not the hash of node {seq}")
        if body["new_weight_q"] != node_weight:
            raise fail(WeightMismatchError, f"new_weight_q {body['new_weight_q']} but node {seq} says {node_weight}")
        chain.pending = None
        chain.seq, chain.head, chain.weight_q = seq, node_hash, node_weight
    else:  # LABEL
        if chain.head is None:
            raise fail(ChainBrokenError, "memory has no signed genesis yet")
        if seq != chain.label_seq + 1:
            raise fail(ChainBrokenError, f"seq {seq} does not follow the stored label seq {chain.label_seq}")
        if body["prev"] != chain.label_tip():
            raise fail(ChainBrokenError, f"prev {body['prev'][:16]}… is not the hash of label seq {chain.label_seq}")
        row.values["entry_hash"] = digest
        chain.label_seq, chain.label_head, chain.state = seq, digest.hex(), body["label"]
    chain.rows.append(row)
    chain.leaves.append((kind, seq, digest))
    chain.changed = True


def _rejected(exc: LedgerError, name: str, kind: str) -> EntryRejected:
    where = f"{exc.kind or kind} seq={exc.seq}" if exc.seq is not None else (exc.kind or kind)
    return EntryRejected(f"rejected {where} for memory {name}: {exc.message} ({type(exc).__name__}); "
                         "nothing written", cause=exc)


def _verify_into(chain: _Chain, entries: Iterable[SignedEntry | tuple[SignedEntry, bytes]], epochs: EpochSet,
                 signatures: SignatureBatch | None = None) -> None:
    """Check ``entries`` in order against ``chain`` (see :func:`_check_entry`); an entry may come
    with its hash, as ``sign_checked_body`` and :func:`_transition_bodies` give it."""
    for item in entries:
        entry, digest = item if isinstance(item, tuple) else (item, None)
        try:
            _check_entry(chain, entry, epochs, digest, signatures)
        except LedgerError as exc:
            raise _rejected(exc, chain.name, entry.kind) from None
    if chain.pending is not None:
        exc = WeightMismatchError(f"provenance seq={chain.pending[0]} has no transition commitment",
                                  kind=PROVENANCE, seq=chain.pending[0])
        raise EntryRejected(f"rejected provenance seq={chain.pending[0]} for memory {chain.name}: {exc.message}; "
                            "nothing written", cause=exc)


def _write(chains: list[_Chain], *, guard: list[_Statement] | None = None) -> None:
    """Insert the verified rows, their log leaves, and move the live state (triggers re-check it).

    All in one batch of statements (:func:`_run_statements`): lock each organization row
    (serializes its log; memory rows are already locked, so the lock order holds), insert the
    entry rows, append the log leaves after the last index, update each memory. ``guard``
    statements go first (the one-round-trip path: they lock the memory rows and check the tips).
    Once committed, the memories are remembered as this process last wrote them (:data:`_tips`).
    """
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    chains = [c for c in chains if c.changed]
    if not chains:
        return
    qn = db.ops.quote_name
    org_ids = sorted({c.memory.organization_id for c in chains})
    statements: list[_Statement] = list(guard or [])
    if db.features.has_select_for_update:
        statements += [[(f"SELECT 1 FROM {qn(Organization._meta.db_table)} WHERE {qn('id')} = %s FOR UPDATE", [o])]
                       for o in org_ids]
    by_model: dict[type, list[_Row]] = {}
    for c in chains:
        for row in c.rows:
            by_model.setdefault(row.model, []).append(row)
    inserted: list[tuple[int, list[_Row]]] = []
    for model in (GenesisEntry, ProvenanceNode, TransitionCommitment, EpistemicLabel):
        rows = by_model.get(model, [])
        for start in range(0, len(rows), _WRITE_CHUNK):
            chunk = rows[start:start + _WRITE_CHUNK]
            inserted.append((len(statements), chunk))
            statements.append(_insert_sql(model, [row.values for row in chunk]))
    for org_id in org_ids:
        leaves = [(c.memory.pk, kind, seq, leaf_hash(digest)) for c in chains if c.memory.organization_id == org_id
                  for kind, seq, digest in c.leaves]
        for start in range(0, len(leaves), _WRITE_CHUNK):
            statements.append(_leaves_sql(org_id, leaves[start:start + _WRITE_CHUNK]))
    moved: list[tuple[Memory, dict[str, Any]]] = []
    for c in chains:
        m = c.memory
        updates: dict[str, Any] = {}
        if c.seq != m.live_seq or c.weight_q != m.live_weight_q:
            updates.update(live_seq=c.seq, live_weight_q=c.weight_q)
        head = bytes.fromhex(c.head) if c.head is not None else None
        if head != (bytes(m.chain_head) if m.chain_head is not None else None):
            updates["chain_head"] = head
        if c.label_seq != m.label_seq:
            updates.update(label_seq=c.label_seq, epistemic_state=c.state)
        if updates:
            sets = ", ".join(f"{qn(Memory._meta.get_field(k).column)} = %s" for k in updates)
            statements.append([(f"UPDATE {qn(Memory._meta.db_table)} SET {sets} WHERE {qn('id')} = %s",
                                [*updates.values(), m.pk])])
            moved.append((m, updates))
    results = _run_statements(statements)
    for at, chunk in inserted:
        ids = results[at]
        if len(ids) != len(chunk):
            raise RuntimeError(f"inserted {len(chunk)} ledger rows but got {len(ids)} ids back")
        for row, (pk,) in zip(chunk, ids):
            row.pk = pk
    for m, updates in moved:
        for k, v in updates.items():
            setattr(m, k, v)
    written = [c.memory for c in chains]
    if db.in_atomic_block:
        transaction.on_commit(lambda: _tips_remember(written))
    else:
        _tips_remember(written)


# The online signer the warm path last used per (database, organization), with the key-epoch
# marks and endorsement generation it was looked up under (see :func:`_warm_signer`).
_signers: dict[tuple, tuple[tuple, OnlineSigner, datetime, datetime]] = {}


def _warm_signer(memory: Memory, now: datetime, db: Any = None) -> Any:
    """``housekeeper_signer`` for the warm path without its per-call lookup (a stat of the key
    directory's epochs.json, the online-key list): the signer found last time is reused while
    the key-epoch marks it was found under are the ones the call's check will require in the
    database (a rotation or revocation changes them: the check fails and the locked path looks
    the signer up afresh), its endorsement has committed, and ``now`` lies in its window and in
    its epoch's (not revoked), that epoch being the newest (so the lookup would pick it again).
    Anything else, or a ``now`` without a time zone, takes the full lookup."""
    db = db or connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    key = (db.alias, db.settings_dict["NAME"], memory.organization_id)
    mark = (memory.epoch_mark, endorsement_generation())
    hit = _signers.get(key)
    if hit is not None and hit[0] == mark and hit[1].confirmed and now.tzinfo is not None \
            and hit[2] <= now < hit[3]:
        return hit[1]
    signer = housekeeper_signer(memory.organization, now=now)
    if isinstance(signer, OnlineSigner):
        epochs = _epoch_set_of(memory)
        if signer.epoch == max(epochs.by_number):
            ep = epochs.by_number[signer.epoch]
            end = min(signer.not_after, parse_time(ep.not_after),
                      *([parse_time(ep.revoked_at)] if ep.revoked_at else []))
            # the marks as they are now: the lookup may have endorsed a new key
            _signers[key] = ((memory.epoch_mark, endorsement_generation()), signer,
                             max(signer.not_before, parse_time(ep.not_before)), end)
    return signer


_NODE_COLUMNS = itemgetter("memory_id", "seq", "prev_weight_q", "new_weight_q", "valence_q", "eta_q", "evidence",
                           "prev", "epoch", "time", "signature", "entry_hash")
_COMMITMENT_COLUMNS = itemgetter("memory_id", "seq", "new_weight_q", "provenance_hash", "epoch", "time", "signature")


def _columns(rows: list[tuple], width: int) -> list[Sequence[Any]]:
    """``rows`` (tuples of ``width`` values) as ``width`` columns."""
    return list(zip(*rows)) if rows else [()] * width


def _write_call(chains: list[_Chain], db: Any = None) -> None:
    """:func:`_write` of verified transitions to one organization's remembered memories, as one
    call of ``ledger_append_transitions`` (migration 0010; see :func:`sql._append_call`), which
    first checks in the database what :func:`sql._guard_sql` checks: the memories' tips and the
    key-epoch marks (of the memories, all equal: the caller made sure) are still the ones the
    entries were verified against. Not inside a transaction (the call is its own)."""
    chains = [c for c in chains if c.changed]
    if not chains:
        return
    first = chains[0].memory
    org_id = first.organization_id
    *counts, newest = first.epoch_mark
    nodes: list[_Row] = []
    tcs: list[_Row] = []
    leaves: list[tuple[int, str, int, bytes]] = []
    for c in chains:
        m = c.memory
        if m.organization_id != org_id or m.epoch_mark != first.epoch_mark or c.label_seq != m.label_seq:
            raise RuntimeError("_write_call takes transitions to one organization's memories under one key ring")
        for row in c.rows:
            if row.model is ProvenanceNode:
                nodes.append(row)
            elif row.model is TransitionCommitment:
                tcs.append(row)
            else:
                raise RuntimeError(f"_write_call writes transitions only, not {row.model.__name__}")
        leaves += [(m.pk, kind, seq, digest) for kind, seq, digest in c.leaves]
    # One tuple per row, turned into one column per argument by zip (a list comprehension per
    # column cost more than the columns' array literals).
    m_cols = _columns([(c.memory.pk, c.memory.live_seq, bytes(c.memory.chain_head), c.memory.live_weight_q,
                        c.memory.label_seq, c.seq, bytes.fromhex(c.head), c.weight_q) for c in chains], 8)
    n_cols = _columns(list(map(_NODE_COLUMNS, [r.values for r in nodes])), 12)
    n_cols[6] = [json.dumps(e) for e in n_cols[6]]  # evidence: its JSON text, cast to jsonb by the call
    t_cols = _columns(list(map(_COMMITMENT_COLUMNS, [r.values for r in tcs])), 7)
    l_cols = _columns([(pk, kind, seq, leaf_hash(digest)) for pk, kind, seq, digest in leaves], 4)
    node_rows = nodes
    ids = _append_call([org_id, *counts, newest, *m_cols, *n_cols, *t_cols, *l_cols], db)
    if len(ids) != len(node_rows):
        raise RuntimeError(f"inserted {len(node_rows)} provenance nodes but got {len(ids)} ids back")
    for row, pk in zip(node_rows, ids):
        row.pk = pk
    for c in chains:
        m = c.memory
        m.live_seq, m.live_weight_q, m.chain_head = c.seq, c.weight_q, bytes.fromhex(c.head)
    _tips_remember([c.memory for c in chains], db)


def _transitions_signed(items: list[dict], memories: dict[int, Memory], now: datetime, *, warm: bool = False,
                        db: Any = None) -> tuple[dict[int, _Chain], list[_Row]]:
    """Build, sign and verify each item's transition on its memory's chain (several items may
    name one memory); the chains to write and the provenance rows, in item order. ``warm``: the
    memories are remembered tips (:func:`_transitions_one_round_trip`), the signer cached.

    1. Build every item's node and commitment bodies and their hashes, in order, each memory's
       next item on the tip the one before it leaves (nothing is checked against the chain yet);
    2. sign the hashes (a batch of at least SIGNING_BATCH_MIN items with in-memory keys: on the
       worker threads, the caller waiting; otherwise here);
    3. check each signed entry against the chain as stored (:func:`_check_entry`: the row is
       the body, the tips, the weight rule, the signature under the database's key ring),
       its signature verified at once or, for a batch, by :func:`_signatures_check` after.
    """
    t = format_time(now)
    chains: dict[int, _Chain] = {}
    keys: dict[int, tuple[Any, EpochSet]] = {}
    built: list[tuple[_Chain, EpochSet, Any, list[tuple[str, dict, bytes]]]] = []
    tips: dict[int, tuple[int, str | None, int]] = {}
    for it in items:
        m = memories.get(it["memory_id"])
        if m is None:
            raise ValidationError(f"memory {it['memory_id']} does not exist")
        if m.organization_id not in keys:
            # The signer first: looking it up may endorse a new online key, which the key ring
            # must then include.
            signer = _warm_signer(m, now, db) if warm else housekeeper_signer(m.organization, now=now)
            keys[m.organization_id] = (signer, _epoch_set_of(m))
        signer, epochs = keys[m.organization_id]
        chain = chains.get(m.pk) or chains.setdefault(m.pk, _Chain.of(m))
        tip = tips.get(m.pk) or (chain.seq, chain.head, chain.weight_q)
        bodies = _transition_bodies(chain, tip, valence_q=it["valence_q"], evidence=it.get("evidence", []),
                                    eta_q=it.get("eta_q", DEFAULT_ETA_Q), epoch=signer.epoch, time=t)
        node_body, node_digest = bodies[0][1], bodies[0][2]
        tips[m.pk] = (tip[0] + 1, node_digest.hex(), node_body["new_weight_q"])
        built.append((chain, epochs, signer, bodies))
    signed = _signed([(signer, digest) for _, _, signer, bodies in built for _, _, digest in bodies])
    signatures = _signature_batch(len(items))
    nodes: list[_Row] = []
    at = 0
    for chain, epochs, _, bodies in built:
        entries = []
        for kind, body, digest in bodies:
            entries.append((SignedEntry(kind, body, signed[at]), digest))
            at += 1
        _verify_into(chain, entries, epochs, signatures)
        nodes.append(chain.rows[-2])
    _signatures_check(signatures)
    return chains, nodes


def _signed(jobs: list[tuple[Any, bytes]]) -> list[bytes]:
    """The signature of each (signer, hash), in order: for at least 2 × SIGNING_BATCH_MIN hashes
    (a batch's nodes and commitments) whose signers are in-memory Ed25519 keys, on the worker
    threads, one share each, the caller waiting (libsodium signs without the GIL); else here."""
    if len(jobs) < 2 * SIGNING_BATCH_MIN or not all(isinstance(s, _THREADSAFE_SIGNERS) for s, _ in jobs):
        return [signer.sign(digest) for signer, digest in jobs]
    share = -(-len(jobs) // _SIGNATURE_WORKERS)
    out: list[bytes] = []
    for part in _signature_pool().map(_sign_share, [jobs[i:i + share] for i in range(0, len(jobs), share)]):
        out += part
    return out


def _sign_share(jobs: list[tuple[Any, bytes]]) -> list[bytes]:
    return [signer.sign(digest) for signer, digest in jobs]


def _signature_batch(n: int) -> SignatureBatch | None:
    """For a batch of ``n`` items, the checker its signatures go to: they are verified together on
    worker threads once every entry is built and checked (None: a small batch verifies inline)."""
    return SignatureBatch(_signature_pool(), _SIGNATURE_WORKERS) if n >= SIGNATURE_BATCH_MIN else None


def _signatures_check(signatures: SignatureBatch | None) -> None:
    """Wait for a batch's signature checks; refuse the batch (nothing written) on a bad one."""
    if signatures is None:
        return
    try:
        signatures.check()
    except LedgerError as exc:
        raise _rejected(exc, getattr(exc, "memory", "?"), exc.kind or PROVENANCE) from None


def _transitions_one_round_trip(items: list[dict], now: datetime) -> list[ProvenanceNode] | None:
    """The appends in one round trip, or None when that path does not apply or its check failed
    (nothing was written then; the caller takes the locked path)."""
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    if not _one_round_trip(db):
        return None
    alias, name = db.alias, db.settings_dict["NAME"]
    memories: dict[int, Memory] = {}
    for it in items:
        m = _tips.get((alias, name, it["memory_id"])) if isinstance(it.get("memory_id"), int) else None
        if m is None:
            return None
        memories[m.pk] = m
    one_org = len({(m.organization_id, m.epoch_mark) for m in memories.values()}) == 1
    if not one_org and len({m.organization_id for m in memories.values()}) == 1:
        return None  # remembered under different key-epoch marks: one of them is stale
    chains, nodes = _transitions_signed(items, memories, now, warm=True, db=db)
    try:
        if one_org:
            _write_call(list(chains.values()), db)
        else:
            _write(list(chains.values()), guard=_guard_sql([c.memory for c in chains.values()]))
    except DatabaseError:
        # Moved by another process (the check), or refused (a constraint, a trigger): nothing
        # was written. The locked path re-reads the tips and raises a refusal properly.
        for pk in memories:
            _tips.pop((alias, name, pk), None)
        return None
    return [node.instance(alias) for node in nodes]


def entry_insert_verified(*, memory_id: int, entries: list[SignedEntry]) -> list[models.Model]:
    """Verify ``entries`` (in order) against the stored chains of one memory and insert them.

    The single gate every signed entry passes; see the module docstring. Returns the rows.
    """
    require_housekeeper("a ledger write")
    with transaction.atomic():
        memory = _lock_memories([memory_id]).get(memory_id)
        if memory is None:
            raise ValidationError(f"memory {memory_id} does not exist")
        chain = _Chain.of(memory)
        _verify_into(chain, entries, _epoch_set_of(memory))
        _write([chain])
        return [row.instance() for row in chain.rows]


# --------------------------------------------------------------------------- signing services


def memory_genesis_sign(*, memory_ids: list[int], now: datetime | None = None) -> int:
    """Sign the genesis of each unsigned memory (batches of GENESIS_BATCH); return how many.

    Idempotent: memories already signed are skipped.
    """
    require_housekeeper("signing genesis entries")
    now = now or now_utc()
    t = format_time(now)
    signed = 0
    ids = sorted(set(memory_ids))
    for start in range(0, len(ids), GENESIS_BATCH):
        with transaction.atomic():
            memories = [m for m in _lock_memories(ids[start:start + GENESIS_BATCH]).values() if m.chain_head is None]
            chains = []
            by_org: dict[int, tuple[Any, EpochSet]] = {}
            signatures = _signature_batch(len(memories))
            for m in memories:
                if m.organization_id not in by_org:
                    by_org[m.organization_id] = (housekeeper_signer(m.organization, now=now), _epoch_set_of(m))
                signer, epochs = by_org[m.organization_id]
                chain = _Chain.of(m)
                body = genesis_body(chain.tenant, m.store.slug, chain.name, bytes(m.content_sha256).hex(),
                                    WEIGHT_INITIAL_Q, signer.epoch, t)
                _verify_into(chain, [sign_checked_body(GENESIS, body, signer)], epochs, signatures)
                chains.append(chain)
            _signatures_check(signatures)
            _write(chains)
            signed += len(chains)
    return signed


def _transition_bodies(chain: _Chain, tip: tuple[int, str | None, int], *, valence_q: int, evidence: list[str],
                       eta_q: int, epoch: int, time: str) -> list[tuple[str, dict, bytes]]:
    """The node and commitment bodies of one transition on ``tip`` (seq, head, weight) of
    ``chain``, each with its hash (validated by the body builders: hashed once, here)."""
    seq, head, weight_q = tip
    if head is None:
        raise EntryRejected(f"memory {chain.name} has no signed genesis yet; nothing written",
                            cause=ChainBrokenError("no genesis", kind=PROVENANCE, seq=seq + 1))
    try:
        new_q = next_weight_q(weight_q, valence_q, eta_q)
        node = provenance_body(chain.tenant, chain.name, seq + 1, weight_q, new_q, valence_q,
                               [str(e) for e in evidence], head, epoch, time, eta_q=eta_q)
        node_digest = checked_body_hash(PROVENANCE, node)
        commitment = transition_body(chain.tenant, chain.name, seq + 1, new_q, node_digest.hex(), epoch, time)
        return [(PROVENANCE, node, node_digest), (TRANSITION, commitment, checked_body_hash(TRANSITION, commitment))]
    except (LedgerError, ValueError) as exc:
        raise EntryRejected(f"cannot build a transition for memory {chain.name}: {exc}; nothing written",
                            cause=exc if isinstance(exc, LedgerError) else None) from None


def transitions_append(*, items: list[dict], now: datetime | None = None) -> list[ProvenanceNode]:
    """Append many weight transitions in one transaction (items: memory_id, valence_q, evidence,
    optional eta_q); several items may name the same memory. Returns the provenance rows."""
    require_housekeeper("appending transitions")
    now = now or now_utc()
    fast = _transitions_one_round_trip(items, now)
    if fast is not None:
        return fast
    with transaction.atomic():
        memories = _lock_memories([it["memory_id"] for it in items])
        chains, nodes = _transitions_signed(items, memories, now)
        _write(list(chains.values()))
        return [node.instance() for node in nodes]


def transition_append(*, memory_id: int, valence_q: int, evidence: list[str], eta_q: int = DEFAULT_ETA_Q,
                      now: datetime | None = None) -> ProvenanceNode:
    """Append one signed weight transition: provenance node + transition commitment + live weight."""
    return transitions_append(items=[{"memory_id": memory_id, "valence_q": valence_q, "evidence": evidence,
                                      "eta_q": eta_q}], now=now)[0]


def label_append(*, memory_id: int, label: str, reason: str, evidence: dict, actor: str,
                 idempotency_key: str | None = None, now: datetime | None = None) -> EpistemicLabel:
    """Append a signed epistemic label (the second chain) and move the memory's epistemic state.

    With ``idempotency_key`` (kept in the signed evidence as ``idempotency_key``), a repeat
    returns the label already appended for that key instead of appending a duplicate.
    """
    require_housekeeper("appending labels")
    if label not in LABELS:
        raise ValidationError(f"label must be one of {sorted(LABELS)}, not {label!r}")
    now = now or now_utc()
    evidence = dict(evidence)
    if idempotency_key is not None:
        evidence["idempotency_key"] = idempotency_key
    with transaction.atomic():
        memory = _lock_memories([memory_id]).get(memory_id)
        if memory is None:
            raise ValidationError(f"memory {memory_id} does not exist")
        if idempotency_key is not None:
            existing = EpistemicLabel.objects.filter(memory_id=memory_id,
                                                     evidence__idempotency_key=idempotency_key).first()
            if existing is not None:
                return existing
        chain = _Chain.of(memory)
        signer = housekeeper_signer(memory.organization, now=now)
        try:
            entry = sign_checked_body(LABEL, label_body(chain.tenant, chain.name, chain.label_seq + 1, label, reason,
                                                        evidence, actor, chain.label_tip(), signer.epoch,
                                                        format_time(now)), signer)
        except LedgerError as exc:
            raise EntryRejected(f"cannot build a label for memory {chain.name}: {exc}; nothing written",
                                cause=exc) from None
        _verify_into(chain, [entry], _epoch_set_of(memory))
        _write([chain])
        notification_emit(organization_id=memory.organization_id, event="label.signed", payload={
            "memory": memory.pk, "store": memory.store_id, "label": label, "actor": actor,
            "url": site_url(f"/memories/{memory.pk}/")})
        return chain.rows[0].instance()


def decision_labels_sign(*, decision: object, unexpected_args: Sequence = (),
                         unexpected_kwargs: dict | None = None, now: datetime | None = None) -> list[EpistemicLabel]:
    """Append the labels a recorded decision calls for; refuse (and record) anything else.

    ``decision`` is ``proposal:<id>`` or ``finding:<id>``; see ``ledger.decisions`` for what
    makes a decision eligible. A refusal writes a ``SigningRefusal`` (keys page), an activity
    event ``signing.refused`` and a warning, signs nothing, and returns ``[]``.
    """
    require_housekeeper("signing a decision's labels")
    resolved = decision_of_task(decision_resolve, decision=decision, unexpected_args=unexpected_args,
                                unexpected_kwargs=unexpected_kwargs)
    if resolved is None:
        return []
    kind, pk, specs = resolved
    labels = [label_append(memory_id=s.memory_id, label=s.label, reason=s.reason, evidence=s.evidence, actor=s.actor,
                           idempotency_key=s.idempotency_key, now=now) for s in specs]
    if kind == "finding":

        ClassifierFinding.objects.filter(pk=pk, label__isnull=True).update(label=labels[0])
    return labels


def outcomes_apply(*, organization: Organization, now: datetime | None = None) -> int:
    """Fold each memory's unconsumed outcomes into one transition (valence = mean reward).

    The node's evidence lists ``outcome:<id>``; each Outcome's ``transition`` is set once,
    claimed with a conditional update so a concurrent run cannot fold it twice.
    """
    require_housekeeper("applying outcomes")
    with transaction.atomic():
        memory_ids = list(Outcome.objects.filter(organization=organization, transition__isnull=True,
                                                 memory__chain_head__isnull=False)
                          .values_list("memory_id", flat=True).distinct())
        if not memory_ids:
            return 0
        _lock_memories(memory_ids)  # re-read the outcomes only once their memories are locked
        pending: dict[int, list[tuple[int, int]]] = {}
        for oid, mid, reward in (Outcome.objects.filter(memory_id__in=memory_ids, transition__isnull=True)
                                 .order_by("memory_id", "id").values_list("id", "memory_id", "reward_q")):
            pending.setdefault(mid, []).append((oid, reward))
        mids = sorted(pending)
        items = [{"memory_id": mid, "valence_q": valence_from_rewards([r for _, r in pending[mid]]),
                  "evidence": [f"outcome:{oid}" for oid, _ in pending[mid]]} for mid in mids]
        nodes = transitions_append(items=items, now=now)
        for mid, node in zip(mids, nodes):
            ids = [oid for oid, _ in pending[mid]]
            if Outcome.objects.filter(pk__in=ids, transition__isnull=True).update(transition=node) != len(ids):
                raise ValidationError("outcomes were folded concurrently; rolled back")
        return len(nodes)
