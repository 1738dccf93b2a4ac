"""Reads of the ledger: rebuild signed entries from rows (the row *is* the body).

Every body field comes from a column of the entry row or, for the fields the row shares with
its memory, from the memory row (tenant = the entry row's organization slug, memory = the
memory's ``ledger_id``, the genesis content hash = ``Memory.content_sha256``). So editing any of
those columns changes the rebuilt body, hence its hash, and the stored signature stops
verifying. Derived caches (``entry_hash``, ``LogLeaf.leaf_hash``) are never trusted: they are
recomputed from the rebuilt bodies and compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import QuerySet

from ledger.core.entries import GENESIS, LABEL, PROVENANCE, TRANSITION, SignedEntry
from ledger.models import (
    EpistemicLabel,
    GenesisEntry,
    LogLeaf,
    Memory,
    ProvenanceNode,
    Store,
    TransitionCommitment,
    TreeHead,
)
from orgs.models import Organization


def genesis_entry(row: GenesisEntry, *, tenant: str, store: str, memory: str, content_sha256: bytes) -> SignedEntry:
    return SignedEntry(GENESIS, {
        "tenant": tenant, "store": store, "memory": memory, "seq": 0, "content_sha256": bytes(content_sha256).hex(),
        "weight_q": row.weight_q, "epoch": row.epoch, "time": row.time,
    }, bytes(row.signature))


def provenance_entry(row: ProvenanceNode, *, tenant: str, memory: str) -> SignedEntry:
    return SignedEntry(PROVENANCE, {
        "tenant": tenant, "memory": memory, "seq": row.seq, "prev_weight_q": row.prev_weight_q,
        "new_weight_q": row.new_weight_q, "valence_q": row.valence_q, "eta_q": row.eta_q,
        "evidence": row.evidence, "prev": bytes(row.prev).hex(), "epoch": row.epoch, "time": row.time,
    }, bytes(row.signature))


def transition_entry(row: TransitionCommitment, *, tenant: str, memory: str) -> SignedEntry:
    return SignedEntry(TRANSITION, {
        "tenant": tenant, "memory": memory, "seq": row.seq, "new_weight_q": row.new_weight_q,
        "provenance": bytes(row.provenance_hash).hex(), "epoch": row.epoch, "time": row.time,
    }, bytes(row.signature))


def label_entry(row: EpistemicLabel, *, tenant: str, memory: str) -> SignedEntry:
    return SignedEntry(LABEL, {
        "tenant": tenant, "memory": memory, "seq": row.seq, "label": row.label, "reason": row.reason,
        "evidence": row.evidence, "actor": row.actor, "prev": bytes(row.prev).hex(), "epoch": row.epoch,
        "time": row.time,
    }, bytes(row.signature))


@dataclass
class MemoryEntries:
    """One memory's rows rebuilt as signed entries, plus the stored hashes to compare."""

    memory: Memory
    genesis: SignedEntry | None
    provenance: list[SignedEntry] = field(default_factory=list)
    transitions: list[SignedEntry] = field(default_factory=list)
    labels: list[SignedEntry] = field(default_factory=list)
    # (kind, seq) -> entry_hash column as stored, for the rows that keep one
    stored_hashes: dict[tuple[str, int], bytes] = field(default_factory=dict)


def organization_slugs() -> dict[int, str]:
    return dict(Organization.objects.values_list("id", "slug"))


def memory_entries_list(memories: list[Memory], *, slugs: dict[int, str] | None = None) -> list[MemoryEntries]:
    """Rebuild the entries of the given memories in four queries (one per entry table)."""
    slugs = slugs if slugs is not None else organization_slugs()
    ids = [m.pk for m in memories]
    out = {m.pk: MemoryEntries(m, None) for m in memories}
    names = {m.pk: m.ledger_id for m in memories}
    for chunk_start in range(0, len(ids), 500):
        chunk = ids[chunk_start:chunk_start + 500]
        for g in GenesisEntry.objects.filter(memory_id__in=chunk):
            me = out[g.memory_id]
            me.genesis = genesis_entry(g, tenant=slugs.get(g.organization_id, "?"), store=me.memory.store.slug,
                                       memory=names[g.memory_id], content_sha256=me.memory.content_sha256)
            me.stored_hashes[(GENESIS, 0)] = bytes(g.entry_hash)
        for n in ProvenanceNode.objects.filter(memory_id__in=chunk).order_by("memory_id", "seq"):
            me = out[n.memory_id]
            me.provenance.append(provenance_entry(n, tenant=slugs.get(n.organization_id, "?"), memory=names[n.memory_id]))
            me.stored_hashes[(PROVENANCE, n.seq)] = bytes(n.entry_hash)
        for t in TransitionCommitment.objects.filter(memory_id__in=chunk).order_by("memory_id", "seq"):
            out[t.memory_id].transitions.append(
                transition_entry(t, tenant=slugs.get(t.organization_id, "?"), memory=names[t.memory_id]))
        for lab in EpistemicLabel.objects.filter(memory_id__in=chunk).order_by("memory_id", "seq"):
            me = out[lab.memory_id]
            me.labels.append(label_entry(lab, tenant=slugs.get(lab.organization_id, "?"), memory=names[lab.memory_id]))
            me.stored_hashes[(LABEL, lab.seq)] = bytes(lab.entry_hash)
    return [out[i] for i in ids]


def memory_entries_get(memory: Memory) -> MemoryEntries:
    return memory_entries_list([memory])[0]


def memory_list(*, organization=None, store: Store | None = None) -> QuerySet[Memory]:
    qs = Memory.objects.select_related("store", "organization")
    if organization is not None:
        qs = qs.filter(organization=organization)
    if store is not None:
        qs = qs.filter(store=store)
    return qs.order_by("pk")


def log_leaf_list(organization, *, memory: Memory | None = None) -> QuerySet[LogLeaf]:
    qs = LogLeaf.objects.filter(organization=organization)
    if memory is not None:
        qs = qs.filter(memory=memory)
    return qs.order_by("index")


def tree_head_latest(organization) -> TreeHead | None:
    return TreeHead.objects.filter(organization=organization).order_by("-size", "-id").first()
