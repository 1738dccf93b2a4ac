"""Reads of the ledger: memories, their entry rows, the log and tree heads.

A memory's entry rows come back as signed entries, mapped column for column by
``ledger.core.entries`` (``*_entry_of``: the row *is* the body). Derived caches (``entry_hash``,
``LogLeaf.leaf_hash``) are never trusted: they come along as stored, to be compared with the
hashes recomputed from the bodies. Lookups that find nothing raise the model's ``DoesNotExist``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import QuerySet

from ledger.core.entries import (
    GENESIS,
    LABEL,
    PROVENANCE,
    SignedEntry,
    genesis_entry_of,
    label_entry_of,
    provenance_entry_of,
    transition_entry_of,
)
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
    """The entries of the given memories, read in four queries (one per entry table)."""
    slugs = slugs if slugs is not None else organization_slugs()
    ids = [m.pk for m in memories]
    out = {m.pk: MemoryEntries(m, None) for m in memories}
    names = {m.pk: m.ledger_id for m in memories}
    for chunk_start in range(0, len(ids), 500):
        chunk = ids[chunk_start:chunk_start + 500]
        for g in GenesisEntry.objects.filter(memory_id__in=chunk):
            me = out[g.memory_id]
            me.genesis = genesis_entry_of(g, tenant=slugs.get(g.organization_id, "?"), store=me.memory.store.slug,
                                       memory=names[g.memory_id], content_sha256=me.memory.content_sha256)
            me.stored_hashes[(GENESIS, 0)] = bytes(g.entry_hash)
        for n in ProvenanceNode.objects.filter(memory_id__in=chunk).order_by("memory_id", "seq"):
            me = out[n.memory_id]
            me.provenance.append(provenance_entry_of(n, tenant=slugs.get(n.organization_id, "?"), memory=names[n.memory_id]))
            me.stored_hashes[(PROVENANCE, n.seq)] = bytes(n.entry_hash)
        for t in TransitionCommitment.objects.filter(memory_id__in=chunk).order_by("memory_id", "seq"):
            out[t.memory_id].transitions.append(
                transition_entry_of(t, tenant=slugs.get(t.organization_id, "?"), memory=names[t.memory_id]))
        for lab in EpistemicLabel.objects.filter(memory_id__in=chunk).order_by("memory_id", "seq"):
            me = out[lab.memory_id]
            me.labels.append(label_entry_of(lab, tenant=slugs.get(lab.organization_id, "?"), memory=names[lab.memory_id]))
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
