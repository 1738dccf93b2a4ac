"""Evidence bundle export (format: docs/bundle.md) of one organization's ledger.

The bundle is built from the rows exactly as stored — bodies rebuilt from their columns
(``ledger.selectors``), live state and log order from the database — so whatever a database
edit changed shows up in the bundle, and ``python -m ledger.core.verify`` finds it without
trusting the exporter. Each memory's ``content_sha256`` is the hash of its stored *text*,
while its genesis body carries the stored ``content_sha256`` column: an edited text or an
edited hash column both leave the two disagreeing. Memories whose genesis is not signed yet
are not in the ledger and are left out.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path

from django.db import connection, transaction

from ledger import selectors
from ledger.checkpoints import checkpoint_notes
from ledger.core.bundle import (
    KEY_ENDORSEMENT,
    KEYS_REF,
    build_bundle,
    consistency_records,
    memory_record,
    write_bundle,
    write_bundle_dir,
)
from ledger.core.canonical import format_time, now_utc
from ledger.core.merkle import leaf_hash
from ledger.core.tree_heads import SignedTreeHead
from ledger.models import LogLeaf, Memory, Receipt, ReceiptKey, TreeHead
from ledger.selectors import MemoryEntries
from ledger.signing import epochs_for, key_endorsements_for


def memory_record_of(me: MemoryEntries) -> dict:
    m = me.memory
    return memory_record(
        memory_id=m.ledger_id, store=m.store.slug,
        content_sha256=hashlib.sha256(m.text.encode("utf-8")).hexdigest(),
        genesis=me.genesis, provenance=me.provenance, transitions=me.transitions, labels=me.labels,
        live_weight_q=m.live_weight_q, live_state=m.epistemic_state or None,
        chain_head=bytes(m.chain_head).hex() if m.chain_head is not None else "",
    )


def tree_head_of(row: TreeHead, tenant: str) -> SignedTreeHead:
    return SignedTreeHead({"tenant": tenant, "size": row.size, "root": bytes(row.root).hex(), "time": row.time,
                           "epoch": row.epoch}, bytes(row.signature))


def _entry_index(entries: list[MemoryEntries]) -> dict[tuple[int, str, int], object]:
    index = {}
    for me in entries:
        pk = me.memory.pk
        if me.genesis is not None:
            index[(pk, "genesis", 0)] = me.genesis
        for kind, items in (("provenance", me.provenance), ("transition", me.transitions), ("label", me.labels)):
            for e in items:
                index[(pk, kind, e.body["seq"])] = e
    return index


def bundle_parts(organization, *, memories: list[Memory] | None = None) -> dict:
    """Everything the bundle holds, plus the rebuilt entries and stored log rows (for ledger_verify).
    Some memories' parts (``memories``) hold their leaves only, and no tree heads or receipts; their
    rows are read again with their chains (``parts["memories"]``: by primary key, as read here,
    absent for a row no longer in the database), so a caller can tell a memory that moved since it
    read it (a label committed meanwhile) from one whose rows disagree with its chains.

    The parts are read in one snapshot of the database where it gives one without blocking
    writers (``_snapshot``). Inside a caller's transaction the reads run in causal order, so that
    what is written meanwhile (a recall, a tree head, an import) leaves no receipt citing a tree
    head or memory the parts lack and no tree head beyond their leaves: receipts, their keys, the
    tree heads (checkpoints are these heads' notes), the log's leaves, memories and entries, key
    endorsements (of receipt keys). Two windows are left there that only the snapshot closes: an
    entry written between the leaves' read and the entries' is in the parts without its leaf,
    which the verifier reports ("entry is not a leaf"); on PostgreSQL (READ COMMITTED) a label
    committed between a memory's read and its entries' leaves the row behind its chain."""
    with _snapshot():
        return _parts(organization, memories)


@contextmanager
def _snapshot():
    """One consistent view for the parts' reads, when not inside a caller's transaction:
    PostgreSQL's REPEATABLE READ, READ ONLY (no lock on writers); SQLite's deferred read
    transaction (WAL: writers go on; Django's own transactions here are IMMEDIATE, which would
    hold every writer until the bundle is read)."""
    if connection.in_atomic_block:
        yield
    elif connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield
    elif connection.vendor == "sqlite":
        with connection.cursor() as cur:
            cur.execute("BEGIN DEFERRED")
            try:
                yield
            finally:
                cur.execute("COMMIT")  # reads only: nothing to undo
    else:
        yield


def _parts(organization, memories: list[Memory] | None) -> dict:
    subset = memories is not None
    receipts = [] if subset else list(Receipt.objects.filter(organization=organization).order_by("id")
                                      .values_list("body", flat=True))
    receipt_keys = [] if subset else [bytes(k) for k in ReceiptKey.objects.filter(organization=organization)
                                      .order_by("id").values_list("public_key", flat=True)]
    heads = [] if subset else list(TreeHead.objects.filter(organization=organization).order_by("size", "id"))
    if subset:  # only these memories' leaves (ledger.verification checks one or a batch of memories)
        # Looked up by memory (the (memory, index) index); filtered by organization and sorted
        # here, because a database planner given the organization prefers its index and reads
        # the organization's whole log (measured: 15 ms instead of 0.1 ms at 120k leaves, SQLite).
        ids = [m.pk for m in memories]
        leaf_rows = sorted((row[1:] for i in range(0, len(ids), 500) for row in LogLeaf.objects.filter(
            memory_id__in=ids[i:i + 500]).order_by().values_list(
            "organization_id", "index", "memory_id", "kind", "seq", "leaf_hash") if row[0] == organization.pk),
            key=lambda row: row[0])
        # The key endorsements' leaves too: they vouch for the keys these memories' entries name.
        # Looked up by `memory IS NULL` alone (the memory index) for the same reason: given the
        # organization, SQLite read the whole log (0.2 s per check at 1M leaves, docs section 11).
        leaf_rows = sorted(leaf_rows + [row[1:] for row in LogLeaf.objects.filter(memory__isnull=True).order_by()
                                        .values_list("organization_id", "index", "memory_id", "kind", "seq",
                                                     "leaf_hash") if row[0] == organization.pk],
                           key=lambda row: row[0])
    else:
        leaf_rows = list(LogLeaf.objects.filter(organization=organization).order_by("index").values_list(
            "index", "memory_id", "kind", "seq", "leaf_hash"))
    slugs = selectors.organization_slugs()
    tenant = organization.slug
    if subset:  # read again, with their chains
        fresh = Memory.objects.select_related("store", "organization").in_bulk(ids)
        memories = [fresh[pk] for pk in ids if pk in fresh]
    else:
        memories = list(selectors.memory_list(organization=organization))
        fresh = {m.pk: m for m in memories}
    entries = [me for me in selectors.memory_entries_list(memories, slugs=slugs) if me.genesis is not None]
    endorsements = key_endorsements_for(organization)
    names = {m.pk: m.ledger_id for m in memories}
    names[None] = KEYS_REF  # a key endorsement's leaf names no memory
    missing = {mid for _, mid, *_ in leaf_rows if mid not in names}
    if missing:  # a leaf naming a memory outside this export (moved or foreign): name it anyway
        for m in Memory.objects.select_related("store").filter(pk__in=missing):
            names[m.pk] = m.ledger_id
    index = _entry_index(entries)
    for e in endorsements:
        index[(None, KEY_ENDORSEMENT, e.seq)] = e
    refs, hashes = [], []
    for _, mid, kind, seq, stored in leaf_rows:
        refs.append([names.get(mid, f"#{mid}"), kind, seq])
        entry = index.get((mid, kind, seq))
        hashes.append(leaf_hash(entry.hash()) if entry is not None else bytes(stored))
    return {"tenant": tenant, "entries": entries, "refs": refs, "leaf_hashes": hashes, "leaf_rows": leaf_rows,
            "heads": heads, "receipts": receipts, "receipt_keys": receipt_keys, "endorsements": endorsements,
            "memories": fresh}


def bundle_build(organization, *, parts: dict | None = None) -> dict:
    """The organization's evidence bundle (receipts and receipt keys included)."""
    parts = parts if parts is not None else bundle_parts(organization)
    tenant = parts["tenant"]
    heads = [tree_head_of(t, tenant) for t in parts["heads"]]
    return build_bundle(
        tenant=tenant,
        epochs=epochs_for(organization),
        memories=[memory_record_of(me) for me in parts["entries"]],
        log_leaves=parts["refs"],
        tree_heads=heads,
        consistency=consistency_records(heads, parts["leaf_hashes"]),
        receipts=parts["receipts"],
        receipt_public_keys=parts["receipt_keys"],
        exported_at=format_time(now_utc()),
        checkpoints=checkpoint_notes(organization, parts["heads"]),
        key_endorsements=parts["endorsements"],
    )


def bundle_write(organization, path: str | Path, *, directory: bool = False) -> dict:
    """Write the bundle to ``path`` (one JSON file, or the manifest + memories.jsonl directory form)."""
    bundle = bundle_build(organization)
    if directory:
        write_bundle_dir(bundle, path)
    else:
        write_bundle(bundle, path)
    return bundle
