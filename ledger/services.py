"""The ledger's one write path (DESIGN section 3, "Integrity enforcement").

Every signed entry goes through :func:`entry_insert_verified` (directly or via the services
below), which, inside one transaction holding the memory's row lock:

1. requires the housekeeper role (``ledger.signing``);
2. maps the signed entry to the row that will be stored, rebuilds the body *from that row*
   (``ledger.selectors``) and requires it to equal the signed body (the row is the body);
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
(see "one round trip" below): the same statements behind a check of the remembered tips.
The organization lock is held until COMMIT (the log must stay gap-free), so one organization's
appends commit one after another: each pays its own WAL flush.

A rejection raises :class:`EntryRejected` (a ``ValidationError``; ``.cause`` is the typed
``ledger.core.errors`` error) and nothing is written. Lock order is always memory rows (by id),
then the organization row, so appenders never deadlock; on SQLite the IMMEDIATE transaction
mode serializes writers instead of row locks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import DatabaseError, IntegrityError, connection, connections, models, transaction
from django.db.models import Max
from django.utils.dateparse import parse_datetime
from django.utils.text import slugify

from ledger import selectors
from ledger.core.canonical import format_time, now_utc
from ledger.core.checkpoint import Checkpoint, checkpoint_origin, sign_checkpoint
from ledger.core.entries import (
    GENESIS,
    LABEL,
    LABELS,
    PROVENANCE,
    TRANSITION,
    ZERO_HASH_HEX,
    SignedEntry,
    genesis_body,
    label_body,
    provenance_body,
    sign_entry,
    transition_body,
    verify_entry,
)
from ledger.core.errors import (
    ChainBrokenError,
    LedgerError,
    TenantMismatchError,
    WeightMismatchError,
)
from ledger.core.keys import ONLINE, Epoch, EpochSet, check_key_endorsement
from ledger.core.merkle import leaf_hash, root
from ledger.core.tree_heads import sign_tree_head, verify_tree_head
from ledger.core.weights import WEIGHT_INITIAL_Q, next_weight_q, valence_from_rewards
from ledger.models import (
    EpistemicLabel,
    GenesisEntry,
    KeyEndorsement,
    KeyEpoch,
    LogLeaf,
    Memory,
    Outcome,
    ProvenanceNode,
    Store,
    TransitionCommitment,
    TreeHead,
)
from ledger.signing import (
    endorsement_generation,
    epoch_from_row,
    epoch_set_for,
    epoch_signer,
    epochs_for,
    housekeeper_signer,
    key_directory,
    key_endorsement_from_row,
    require_housekeeper,
)
from orgs.models import Organization
from orgs.notifications import notification_emit, site_url

DEFAULT_ETA_Q = 500  # eta = 0.5: a full reward of +1 multiplies the weight by e^0.5 ~ 1.65
GENESIS_BATCH = 500
RECEIPT_KEY_SKEW = timedelta(seconds=60)


class EntryRejected(ValidationError):
    """A ledger write refused by the write path; nothing was written. ``cause`` is the core error."""

    def __init__(self, message: str, *, cause: LedgerError | None = None) -> None:
        super().__init__(message, code=type(cause).__name__ if cause is not None else "rejected")
        self.cause = cause


# --------------------------------------------------------------------------- keys


def _sync_epochs(organization: Organization) -> list[Epoch]:
    """Record the key directory's epochs (public halves) in KeyEpoch; revocations set once."""
    kd_epochs = key_directory().epochs(organization.slug)
    rows = {r.number: r for r in KeyEpoch.objects.filter(organization=organization)}
    for ep in kd_epochs:
        row = rows.get(ep.number)
        if row is None:
            KeyEpoch.objects.create(
                organization=organization, number=ep.number, public_key=ep.public_key, not_before=ep.not_before,
                not_after=ep.not_after, revoked_at=ep.revoked_at or "", endorsement=ep.endorsement,
            )
        elif bytes(row.public_key) != ep.public_key:
            raise ValidationError(f"epoch {ep.number} of {organization.slug} in the database has another key "
                                  "than the key directory; refusing to continue")
        elif ep.revoked_at and not row.revoked_at:
            KeyEpoch.objects.filter(pk=row.pk, revoked_at="").update(revoked_at=ep.revoked_at)
    return epochs_for(organization)


def housekeeper_init(*, organization: Organization, now: datetime | None = None) -> Epoch:
    """Create epoch 1 (the trust anchor) in the key directory and record its public half."""
    require_housekeeper("housekeeper init")
    kd = key_directory()
    with transaction.atomic():
        if KeyEpoch.objects.filter(organization=organization).exists():
            raise ValidationError(f"organization {organization.slug} already has key epochs; use rotate")
        if not kd.epochs(organization.slug):
            kd.init(organization.slug, now)
        return _sync_epochs(organization)[0]


def housekeeper_rotate(*, organization: Organization, now: datetime | None = None) -> Epoch:
    """Start a new epoch endorsed by the current one."""
    require_housekeeper("housekeeper rotate")
    with transaction.atomic():
        key_directory().rotate(organization.slug, now)
        return _sync_epochs(organization)[-1]


def housekeeper_revoke(*, organization: Organization, epoch: int, now: datetime | None = None) -> Epoch:
    """Revoke an epoch from ``now`` on: entries it signs at or after that time are refused."""
    require_housekeeper("housekeeper revoke")
    with transaction.atomic():
        key_directory().revoke(organization.slug, epoch, now)
        return next(e for e in _sync_epochs(organization) if e.number == epoch)


def receipt_key_endorse(*, organization: Organization, receipt_key_id: int, now: datetime | None = None):
    """Endorse a recorded receipt key with the current epoch key; returns the ``KeyEndorsement`` row.

    The window starts when the key was recorded, less ``RECEIPT_KEY_SKEW`` (receipts signed
    while the endorsement was on its way are covered) but never before the endorsing epoch, and lasts
    ``RECEIPT_KEY_VALIDITY_DAYS`` (never past the epoch). Idempotent while an endorsement is in
    force; a key with a revoked endorsement is never endorsed again.
    """
    from django.conf import settings

    from ledger.core.canonical import parse_time
    from ledger.core.keys import RECEIPT
    from ledger.models import ReceiptKey
    from ledger.signing import epoch_signer, key_endorsement_record, receipt_key_state
    from orgs.services import activity_record

    require_housekeeper("endorsing a receipt key")
    now = now or now_utc()
    rk = ReceiptKey.objects.get(pk=receipt_key_id, organization=organization)
    existing = KeyEndorsement.objects.filter(organization=organization, purpose=RECEIPT, key_id=rk.key_id)
    if existing.exclude(revoked_at="").exists():
        raise ValidationError(f"receipt key {rk.key_id} was revoked; it is not endorsed again")
    if receipt_key_state(organization, rk.key_id, now=now) in ("endorsed", "pending") and existing.exists():
        return existing.order_by("-seq").first()
    signer = epoch_signer(organization, now=now)
    epoch = KeyEpoch.objects.get(organization=organization, number=signer.epoch)
    # A recall takes its time before it loads the key, so its first receipt may carry a time a
    # moment before the key was recorded: the window opens RECEIPT_KEY_SKEW earlier.
    start = max(rk.created_at - RECEIPT_KEY_SKEW, parse_time(epoch.not_before))
    end = min(now + timedelta(days=settings.RECEIPT_KEY_VALIDITY_DAYS), parse_time(epoch.not_after))
    if not start < end:
        raise ValidationError(f"receipt key {rk.key_id} cannot be endorsed: no time left in epoch {epoch.number}")
    row = key_endorsement_record(organization=organization, purpose=RECEIPT, public_key=bytes(rk.public_key),
                                 not_before=start, not_after=end, now=now, signer=signer)
    activity_record(organization=organization, verb="receipt_key.endorsed", actor_label="housekeeper",
                    target=f"receipt key {rk.key_id}", detail={"seq": row.seq, "epoch": row.epoch,
                                                               "not_after": row.not_after})
    return row


def receipt_key_revoke(*, organization: Organization, key_id: str, now: datetime | None = None) -> int:
    """Revoke a receipt key from ``now`` on (its receipts from before stay valid); returns how
    many endorsements were revoked. The next recall rotates to a new, newly endorsed key."""
    from ledger.core.keys import RECEIPT
    from orgs.services import activity_record

    require_housekeeper("revoking a receipt key")
    at = format_time(now or now_utc())
    n = KeyEndorsement.objects.filter(organization=organization, purpose=RECEIPT, key_id=key_id,
                                      revoked_at="").update(revoked_at=at)
    if n:
        activity_record(organization=organization, verb="receipt_key.revoked", actor_label="housekeeper",
                        target=f"receipt key {key_id}", detail={"revoked_at": at})
    return n


def _epoch_set(organization_id: int, tenant: str) -> EpochSet:
    """Epochs and the online keys they endorsed (the signer this process uses is among them)."""
    epochs = EpochSet(epoch_from_row(r, tenant) for r in KeyEpoch.objects.filter(organization_id=organization_id))
    delegates = []
    for row in KeyEndorsement.objects.filter(organization_id=organization_id, purpose=ONLINE).order_by("seq"):
        e = key_endorsement_from_row(row, tenant)
        try:
            check_key_endorsement(e, epochs, tenant=tenant)
        except LedgerError:
            continue  # a bad endorsement vouches for nothing
        delegates.append(e)
    return EpochSet(epochs.by_number.values(), delegates=delegates)


# The KeyEpoch rows of an organization, summarized by values that change whenever the set does:
# a new epoch raises the count and the newest id (and brings a fresh random key, so ids reused
# after a rollback do not match), a revocation raises the revoked count and sets a revoked_at.
# They are read in the statement that locks the memories (:func:`_lock_memories`), so a cached
# EpochSet is only used while the rows it was built from are still the rows in the database.
_EPOCH_MARKS = {
    "epoch_n": "COUNT(*)",
    "epoch_max_id": "MAX(e.id)",
    "epoch_revoked_n": "SUM(CASE WHEN e.revoked_at <> '' THEN 1 ELSE 0 END)",
    "epoch_revoked_max": "MAX(e.revoked_at)",
}
_epoch_sets: dict[tuple, tuple[tuple, EpochSet]] = {}


def _epoch_set_of(memory: Memory) -> EpochSet:
    """The organization's EpochSet for a memory locked by :func:`_lock_memories` (cached by its marks)."""
    tenant = memory.organization.slug
    key = (connection.alias, connection.settings_dict["NAME"], memory.organization_id, tenant)
    mark = (memory.epoch_mark, endorsement_generation())
    cached = _epoch_sets.get(key)
    if cached is not None and cached[0] == mark:
        return cached[1]
    epochs = _epoch_set(memory.organization_id, tenant)
    _epoch_sets[key] = (mark, epochs)
    return epochs


# --------------------------------------------------------------------------- stores and memories


def store_create(*, organization: Organization, name: str, slug: str | None = None, **policy: Any) -> Store:
    store = Store(organization=organization, name=name, slug=slug or slugify(name)[:64], **policy)
    store.full_clean()
    store.save()
    return store


def _as_datetime(value: object, external_id: str) -> datetime:
    if value is None:
        return now_utc()
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        dt = parse_datetime(value.replace("Z", "+00:00"))
        if dt is None:
            raise ValidationError(f"memory {external_id!r}: created_at {value!r} is not an ISO 8601 time")
    else:
        raise ValidationError(f"memory {external_id!r}: created_at must be a time")
    if dt.tzinfo is None:
        raise ValidationError(f"memory {external_id!r}: created_at {value!r} has no time zone")
    return dt


def memories_create(*, store: Store, records: list[dict]) -> list[Memory]:
    """Insert unsigned memories (content hash computed here); all or none.

    Raises ValidationError naming the id of a duplicate (in the batch or already stored) or
    of a malformed record. The housekeeper signs their genesis later (:func:`memory_genesis_sign`).
    """
    seen: set[str] = set()
    objs = []
    for i, rec in enumerate(records):
        ext = rec.get("id")
        if not isinstance(ext, str) or not ext or len(ext) > 255:
            raise ValidationError(f"record {i}: id must be a non-empty string of at most 255 characters")
        if ext in seen:
            raise ValidationError(f"duplicate memory id {ext!r} in this batch")
        seen.add(ext)
        text = rec.get("text")
        if not isinstance(text, str) or not text:
            raise ValidationError(f"memory {ext!r}: text must be a non-empty string")
        metadata = rec.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ValidationError(f"memory {ext!r}: metadata must be an object")
        objs.append(Memory(
            organization_id=store.organization_id, store=store, external_id=ext, text=text, metadata=metadata,
            content_sha256=hashlib.sha256(text.encode("utf-8")).digest(),
            created_at=_as_datetime(rec.get("created_at"), ext),
        ))
    ids = list(seen)
    for start in range(0, len(ids), 900):
        clash = Memory.objects.filter(store=store, external_id__in=ids[start:start + 900]).values_list(
            "external_id", flat=True).first()
        if clash is not None:
            raise ValidationError(f"memory id {clash!r} already exists in store {store.slug}")
    try:
        with transaction.atomic():
            created = Memory.objects.bulk_create(objs, batch_size=500)
    except IntegrityError as exc:
        raise ValidationError(f"a memory id in this batch was stored concurrently: {exc}") from None
    if created and created[0].pk is None:  # backends without RETURNING
        by_ext = dict(Memory.objects.filter(store=store, external_id__in=ids).values_list("external_id", "pk"))
        for m in created:
            m.pk = by_ext[m.external_id]
    return created


# --------------------------------------------------------------------------- the verified write path


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
    rows: list[models.Model] = field(default_factory=list)
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


def _row_for(chain: _Chain, entry: SignedEntry) -> models.Model:
    """The row that would store ``entry`` (field values straight from the body)."""
    m = chain.memory
    b = entry.body
    common = {"organization_id": m.organization_id, "memory_id": m.pk, "epoch": b.get("epoch"),
              "time": b.get("time"), "signature": entry.signature}
    try:
        if entry.kind == GENESIS:
            return GenesisEntry(weight_q=b["weight_q"], **common)
        if entry.kind == PROVENANCE:
            return ProvenanceNode(seq=b["seq"], prev_weight_q=b["prev_weight_q"], new_weight_q=b["new_weight_q"],
                                  valence_q=b["valence_q"], eta_q=b["eta_q"], evidence=b["evidence"],
                                  prev=bytes.fromhex(b["prev"]), **common)
        if entry.kind == TRANSITION:
            return TransitionCommitment(seq=b["seq"], new_weight_q=b["new_weight_q"],
                                        provenance_hash=bytes.fromhex(b["provenance"]), **common)
        if entry.kind == LABEL:
            return EpistemicLabel(seq=b["seq"], label=b["label"], reason=b["reason"], evidence=b["evidence"],
                                  actor=b["actor"], prev=bytes.fromhex(b["prev"]), **common)
    except (KeyError, TypeError, ValueError) as exc:
        raise ChainBrokenError(f"{entry.kind} body cannot be stored: {exc!r}", kind=entry.kind,
                               seq=b.get("seq") if isinstance(b.get("seq"), int) else None) from None
    raise ChainBrokenError(f"unknown entry kind {entry.kind!r}")


def _rebuilt(chain: _Chain, entry: SignedEntry, row: models.Model) -> SignedEntry:
    m = chain.memory
    if entry.kind == GENESIS:
        return selectors.genesis_entry(row, tenant=chain.tenant, store=m.store.slug, memory=chain.name,
                                       content_sha256=m.content_sha256)
    build = {PROVENANCE: selectors.provenance_entry, TRANSITION: selectors.transition_entry,
             LABEL: selectors.label_entry}[entry.kind]
    return build(row, tenant=chain.tenant, memory=chain.name)


def _check_entry(chain: _Chain, entry: SignedEntry, epochs: EpochSet) -> None:
    """Steps 2-4 of the module docstring for one entry; appends the row to ``chain.rows``."""
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
    digest = verify_entry(rebuilt, kind=kind, tenant=chain.tenant, memory=chain.name, epochs=epochs)
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
        row.entry_hash = digest
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
        row.entry_hash = digest
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
        row.entry_hash = digest
        chain.label_seq, chain.label_head, chain.state = seq, digest.hex(), body["label"]
    chain.rows.append(row)
    chain.leaves.append((kind, seq, digest))
    chain.changed = True


def _verify_into(chain: _Chain, entries: Iterable[SignedEntry], epochs: EpochSet) -> None:
    for entry in entries:
        try:
            _check_entry(chain, entry, epochs)
        except LedgerError as exc:
            where = f"{exc.kind or entry.kind} seq={exc.seq}" if exc.seq is not None else (exc.kind or entry.kind)
            raise EntryRejected(f"rejected {where} for memory {chain.name}: {exc.message} ({type(exc).__name__}); "
                                "nothing written", cause=exc) from None
    if chain.pending is not None:
        exc = WeightMismatchError(f"provenance seq={chain.pending[0]} has no transition commitment",
                                  kind=PROVENANCE, seq=chain.pending[0])
        raise EntryRejected(f"rejected provenance seq={chain.pending[0]} for memory {chain.name}: {exc.message}; "
                            "nothing written", cause=exc)


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
    ids = sorted(set(ids))
    q = _lock_query()
    names_m, names_o, names_s = q.names
    nm, no, ns = len(names_m), len(names_o), len(names_s)
    out: dict[int, Memory] = {}
    for start in range(0, len(ids), 900):
        chunk = ids[start:start + 900]
        with connection.cursor() as cur:
            cur.execute(q.head + ", ".join(["%s"] * len(chunk)) + q.tail, chunk)
            rows = cur.fetchall()
        for raw in rows:
            row = _converted(raw, q.converters)
            m = Memory.from_db(connection.alias, names_m, row[:nm])
            org = Organization.from_db(connection.alias, names_o, row[nm:nm + no])
            store = Store.from_db(connection.alias, names_s, row[nm + no:nm + no + ns])
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
    from psycopg import ClientCursor
    from psycopg.types.json import Jsonb

    connection.ensure_connection()
    raw = connection.connection
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
    out: list[list[tuple]] = []
    with connection.cursor() as cur:
        # psycopg 3 only: psycopg2 cannot return the results of later statements (no nextset).
        if connection.vendor == "postgresql" and connection.Database.__name__ == "psycopg":
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


_WRITE_CHUNK = 500


_insert_templates: dict[tuple[str, type], tuple[str, str, str, list[tuple[str, Any]]]] = {}


def _insert_sql(model: type[models.Model], rows: list[models.Model]) -> _Statement:
    """``INSERT ... VALUES (...), ... RETURNING id`` for ``rows`` (all concrete fields but the pk)."""
    template = _insert_templates.get((connection.vendor, model))
    if template is None:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        qn = connection.ops.quote_name
        # Integers and strings go to the driver as they are (the bodies were schema-checked);
        # only JSON and bytes need the field's adaptation.
        plain = (models.IntegerField, models.CharField, models.ForeignKey)
        attrs = [(f.attname, None if isinstance(f, plain) and not isinstance(f, models.JSONField) else f)
                 for f in fields]
        template = _insert_templates[(connection.vendor, model)] = (
            f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) VALUES ",
            "(" + ", ".join(["%s"] * len(fields)) + ")", f" RETURNING {qn(model._meta.pk.column)}", attrs)
    head, one, tail, attrs = template
    db = connections[connection.alias]  # the wrapper itself: one proxy lookup, not one per value
    stmt: _Statement = [(head, ())]
    for i, row in enumerate(rows):
        values = []
        for attname, f in attrs:
            v = getattr(row, attname)
            values.append(v if f is None or v is None else f.get_db_prep_save(v, db))
        stmt.append((one if i == 0 else ", " + one, values))
    stmt.append((tail, ()))
    return stmt


def _leaves_sql(organization_id: int, leaves: list[tuple[int, str, int, bytes]]) -> _Statement:
    """Append ``leaves`` (memory id, kind, seq, leaf hash) to the organization's log after its
    current last index. The index is read by this statement, after the organization row is
    locked by an earlier one, so it sees every leaf committed before."""
    qn = connection.ops.quote_name
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


def _write(chains: list[_Chain], *, guard: list[_Statement] | None = None) -> None:
    """Insert the verified rows, their log leaves, and move the live state (triggers re-check it).

    All in one batch of statements (:func:`_run_statements`): lock each organization row
    (serializes its log; memory rows are already locked, so the lock order holds), insert the
    entry rows, append the log leaves after the last index, update each memory. ``guard``
    statements go first (the one-round-trip path: they lock the memory rows and check the tips).
    Once committed, the memories are remembered as this process last wrote them (:data:`_tips`).
    """
    chains = [c for c in chains if c.changed]
    if not chains:
        return
    qn = connection.ops.quote_name
    org_ids = sorted({c.memory.organization_id for c in chains})
    statements: list[_Statement] = list(guard or [])
    if connection.features.has_select_for_update:
        statements += [[(f"SELECT 1 FROM {qn(Organization._meta.db_table)} WHERE {qn('id')} = %s FOR UPDATE", [o])]
                       for o in org_ids]
    by_model: dict[type, list[models.Model]] = {}
    for c in chains:
        for row in c.rows:
            by_model.setdefault(type(row), []).append(row)
    inserted: list[tuple[int, list[models.Model]]] = []
    for model in (GenesisEntry, ProvenanceNode, TransitionCommitment, EpistemicLabel):
        rows = by_model.get(model, [])
        for start in range(0, len(rows), _WRITE_CHUNK):
            chunk = rows[start:start + _WRITE_CHUNK]
            inserted.append((len(statements), chunk))
            statements.append(_insert_sql(model, chunk))
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
            row._state.adding, row._state.db = False, connection.alias
    for m, updates in moved:
        for k, v in updates.items():
            setattr(m, k, v)
    written = [c.memory for c in chains]
    if connection.in_atomic_block:
        transaction.on_commit(lambda: _tips_remember(written))
    else:
        _tips_remember(written)


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


def _tips_key(memory_id: int) -> tuple:
    return (connection.alias, connection.settings_dict["NAME"], memory_id)


def _tips_remember(memories: list[Memory]) -> None:
    if connection.vendor != "postgresql":
        return
    for m in memories:
        if getattr(m, "epoch_mark", None) is not None:
            _tips[_tips_key(m.pk)] = m
    while len(_tips) > _TIPS_MAX:
        _tips.pop(next(iter(_tips)))


def _one_round_trip() -> bool:
    return (connection.vendor == "postgresql" and connection.Database.__name__ == "psycopg"
            and not connection.in_atomic_block and connection.get_autocommit())


def _guard_sql(chains: list[_Chain]) -> list[_Statement]:
    """Lock the memory rows (by id) and require their tips, and their organizations' key-epoch
    marks, to equal what the entries were verified against."""
    qn = connection.ops.quote_name
    col = {n: qn(Memory._meta.get_field(n).column) for n in ("live_seq", "chain_head", "live_weight_q", "label_seq")}
    chains = sorted(chains, key=lambda c: c.memory.pk)
    stmt: _Statement = [(
        f"SELECT ledger_expect(COUNT(*) = %s AND COALESCE(BOOL_AND(m.{col['live_seq']} = v.column2 "
        f"AND m.{col['chain_head']} = v.column3 AND m.{col['live_weight_q']} = v.column4 "
        f"AND m.{col['label_seq']} = v.column5), false), 'a chain tip') FROM (SELECT {qn('id')}, "
        f"{', '.join(col.values())} FROM {qn(Memory._meta.db_table)} WHERE {qn('id')} IN "
        f"({', '.join(['%s'] * len(chains))}) ORDER BY {qn('id')} FOR UPDATE) m JOIN (VALUES ",
        [len(chains), *(c.memory.pk for c in chains)])]
    for i, c in enumerate(chains):
        m = c.memory
        stmt.append(("(%s, %s, %s::bytea, %s, %s)" if i == 0 else ", (%s, %s, %s::bytea, %s, %s)",
                     (m.pk, m.live_seq, bytes(m.chain_head), m.live_weight_q, m.label_seq)))
    stmt.append((f") AS v ON v.column1 = m.{qn('id')}", ()))
    out = [stmt]
    ke = qn(KeyEpoch._meta.db_table)
    for org_id, m in sorted({c.memory.organization_id: c.memory for c in chains}.items()):
        *counts, newest = m.epoch_mark
        checks = " AND ".join(f"{agg} IS NOT DISTINCT FROM %s" for agg in _EPOCH_MARKS.values())
        out.append([(f"SELECT ledger_expect({checks} AND (SELECT n.public_key FROM {ke} n WHERE "
                     f"n.organization_id = %s ORDER BY n.id DESC LIMIT 1) IS NOT DISTINCT FROM %s::bytea, "
                     f"'the key epochs') FROM {ke} e WHERE e.organization_id = %s",
                     [*counts, org_id, newest, org_id])])
    return out


def _transitions_signed(items: list[dict], memories: dict[int, Memory], now: datetime
                        ) -> tuple[dict[int, _Chain], list[ProvenanceNode]]:
    """Build, sign and verify each item's transition on its memory's chain (several items may
    name one memory); the chains to write and the provenance rows, in item order."""
    t = format_time(now)
    chains: dict[int, _Chain] = {}
    keys: dict[int, tuple[Any, EpochSet]] = {}
    nodes: list[ProvenanceNode] = []
    for it in items:
        m = memories.get(it["memory_id"])
        if m is None:
            raise ValidationError(f"memory {it['memory_id']} does not exist")
        if m.organization_id not in keys:
            keys[m.organization_id] = (housekeeper_signer(m.organization, now=now), _epoch_set_of(m))
        signer, epochs = keys[m.organization_id]
        chain = chains.setdefault(m.pk, _Chain.of(m))
        entries = _transition_entries(chain, valence_q=it["valence_q"], evidence=it.get("evidence", []),
                                      eta_q=it.get("eta_q", DEFAULT_ETA_Q), signer=signer, time=t)
        _verify_into(chain, entries, epochs)
        nodes.append(chain.rows[-2])
    return chains, nodes


def _transitions_one_round_trip(items: list[dict], now: datetime) -> list[ProvenanceNode] | None:
    """The appends in one round trip, or None when that path does not apply or its check failed
    (nothing was written then; the caller takes the locked path)."""
    if not _one_round_trip():
        return None
    memories: dict[int, Memory] = {}
    for it in items:
        m = _tips.get(_tips_key(it["memory_id"])) if isinstance(it.get("memory_id"), int) else None
        if m is None:
            return None
        memories[m.pk] = m
    chains, nodes = _transitions_signed(items, memories, now)
    try:
        _write(list(chains.values()), guard=_guard_sql(list(chains.values())))
    except DatabaseError:
        # Moved by another process (the check), or refused (a constraint, a trigger): nothing
        # was written. The locked path re-reads the tips and raises a refusal properly.
        for pk in memories:
            _tips.pop(_tips_key(pk), None)
        return None
    return nodes


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
        return chain.rows


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
            for m in memories:
                if m.organization_id not in by_org:
                    by_org[m.organization_id] = (housekeeper_signer(m.organization, now=now), _epoch_set_of(m))
                signer, epochs = by_org[m.organization_id]
                chain = _Chain.of(m)
                body = genesis_body(chain.tenant, m.store.slug, chain.name, bytes(m.content_sha256).hex(),
                                    WEIGHT_INITIAL_Q, signer.epoch, t)
                _verify_into(chain, [sign_entry(GENESIS, body, signer)], epochs)
                chains.append(chain)
            _write(chains)
            signed += len(chains)
    return signed


def _transition_entries(chain: _Chain, *, valence_q: int, evidence: list[str], eta_q: int, signer, time: str
                        ) -> list[SignedEntry]:
    if chain.head is None:
        raise EntryRejected(f"memory {chain.name} has no signed genesis yet; nothing written",
                            cause=ChainBrokenError("no genesis", kind=PROVENANCE, seq=chain.seq + 1))
    try:
        new_q = next_weight_q(chain.weight_q, valence_q, eta_q)
        node = sign_entry(PROVENANCE, provenance_body(
            chain.tenant, chain.name, chain.seq + 1, chain.weight_q, new_q, valence_q, [str(e) for e in evidence],
            chain.head, signer.epoch, time, eta_q=eta_q), signer)
        commitment = sign_entry(TRANSITION, transition_body(
            chain.tenant, chain.name, chain.seq + 1, new_q, node.hash_hex(), signer.epoch, time), signer)
    except (LedgerError, ValueError) as exc:
        raise EntryRejected(f"cannot build a transition for memory {chain.name}: {exc}; nothing written",
                            cause=exc if isinstance(exc, LedgerError) else None) from None
    return [node, commitment]


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
        return nodes


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
            entry = sign_entry(LABEL, label_body(chain.tenant, chain.name, chain.label_seq + 1, label, reason,
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
        return chain.rows[0]


def decision_labels_sign(*, decision: object, unexpected_args: Sequence = (),
                         unexpected_kwargs: dict | None = None, now: datetime | None = None) -> list[EpistemicLabel]:
    """Append the labels a recorded decision calls for; refuse (and record) anything else.

    ``decision`` is ``proposal:<id>`` or ``finding:<id>``; see ``ledger.decisions`` for what
    makes a decision eligible. A refusal writes a ``SigningRefusal`` (keys page), an activity
    event ``signing.refused`` and a warning, signs nothing, and returns ``[]``.
    """
    from ledger.decisions import Refused, decision_resolve, refusal_record

    require_housekeeper("signing a decision's labels")
    kwargs = dict(unexpected_kwargs or {})
    try:
        if unexpected_args or kwargs:
            raise Refused("the task carries fields besides a decision id (" +
                          ", ".join(sorted(map(str, kwargs))[:8] or ["positional arguments"]) + ")")
        kind, pk, specs = decision_resolve(decision)
    except Refused as exc:
        refusal_record(reason=exc.reason, args=tuple(unexpected_args), organization=exc.organization,
                       kwargs={"decision": decision, **kwargs})
        return []
    labels = [label_append(memory_id=s.memory_id, label=s.label, reason=s.reason, evidence=s.evidence, actor=s.actor,
                           idempotency_key=s.idempotency_key, now=now) for s in specs]
    if kind == "finding":
        from ledger.models import ClassifierFinding

        ClassifierFinding.objects.filter(pk=pk, label__isnull=True).update(label=labels[0])
    return labels


def tree_head_issue(*, organization: Organization, now: datetime | None = None) -> TreeHead:
    """Sign a tree head over the organization's log; returns the latest one if the size is unchanged."""
    require_housekeeper("issuing tree heads")
    now = now or now_utc()
    with transaction.atomic():
        _lock_log(organization.pk)
        # The signer first: a new online key's endorsement is a leaf, and it must be in this head.
        signer = housekeeper_signer(organization, now=now)
        rows = list(LogLeaf.objects.filter(organization=organization).order_by("index")
                    .values_list("index", "leaf_hash"))
        for i, (index, _) in enumerate(rows):
            if index != i:
                raise EntryRejected(f"log of {organization.slug} has a gap at index {i}; refusing to sign",
                                    cause=ChainBrokenError(f"gap at {i}"))
        last = selectors.tree_head_latest(organization)
        if last is not None and last.size == len(rows):
            return last
        if last is not None and last.size > len(rows):
            raise EntryRejected(f"log of {organization.slug} shrank below the last tree head ({last.size})",
                                cause=ChainBrokenError("log shrank"))
        r = root([bytes(h) for _, h in rows])
        sth = sign_tree_head(organization.slug, len(rows), r, format_time(now), signer)
        try:
            verify_tree_head(sth, tenant=organization.slug, epochs=epoch_set_for(organization), root=r)
        except LedgerError as exc:
            raise EntryRejected(f"tree head for {organization.slug} does not verify: {exc}", cause=exc) from None
        # The same head as a C2SP checkpoint note, signed now (the web process serving it holds no
        # key) by the epoch key itself, not the online key: witnesses and auditors pin one log key,
        # and an online key changes every few hours.
        epoch_key = epoch_signer(organization, now=now)
        note = sign_checkpoint(Checkpoint(checkpoint_origin_of(organization), sth.size, r),
                               public_key=epoch_key.public_key, sign=epoch_key.sign)
        return TreeHead.objects.create(organization=organization, size=sth.size, root=r, time=sth.body["time"],
                                       epoch=sth.body["epoch"], signature=sth.signature,
                                       checkpoint_signature=note.signatures[0].signature)


def checkpoint_origin_of(organization: Organization) -> str:
    """The C2SP checkpoint origin (and note key name) of the organization's log."""
    from django.conf import settings

    return checkpoint_origin(settings.CHECKPOINT_ORIGIN_PREFIX, organization.slug)


def tree_heads_issue_due(*, now: datetime | None = None) -> int:
    """Sign a tree head for every organization whose log grew past its latest one (the schedule).

    One organization's failure (no valid epoch, a gap in its log) is logged and does not stop
    the others. Returns how many tree heads were signed.
    """
    import logging

    require_housekeeper("issuing tree heads")
    signed = 0
    # Per organization, each MAX read from the end of its unique (organization, index|size)
    # index: no scan of the whole log every minute.
    for organization in Organization.objects.filter(pk__in=KeyEpoch.objects.values("organization_id")).order_by("pk"):
        top = LogLeaf.objects.filter(organization=organization).aggregate(m=Max("index"))["m"]
        head = TreeHead.objects.filter(organization=organization).aggregate(m=Max("size"))["m"] or 0
        if top is None or top + 1 <= head:
            continue
        try:
            tree_head_issue(organization=organization, now=now)
            signed += 1
        except (EntryRejected, LedgerError, OSError) as exc:
            logging.getLogger(__name__).error("scheduled tree head for %s failed: %s", organization.slug, exc)
    return signed


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
