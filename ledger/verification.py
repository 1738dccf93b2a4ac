"""Verification inside the app, with the portable verifier's own checks.

Both functions build an evidence bundle from the rows (``ledger.export``) and run
``ledger.core.verify`` on it, so the app and ``python -m ledger.core.verify`` share one checker.
On top, they compare what only the database holds: the cached ``entry_hash`` and ``leaf_hash``
columns against the hashes recomputed from the rebuilt bodies, and (for the organization) the
epochs recorded in ``KeyEpoch`` against the housekeeper's key directory when this process can
read it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ledger import export
from ledger.core.bundle import build_bundle
from ledger.core.errors import BundleError
from ledger.core.verify import Finding, verify_bundle
from ledger.models import Memory
from ledger.signing import epochs_for, key_directory, key_endorsements_for

_CACHE_MAX = 50_000
_clean: OrderedDict[tuple, bool] = OrderedDict()
_lock = threading.Lock()


def _cache_key(memory: Memory) -> tuple:
    return (memory.pk, bytes(memory.chain_head or b""), memory.label_seq, memory.live_weight_q,
            memory.epistemic_state, bytes(memory.content_sha256))


def _database_findings(parts: dict) -> list[Finding]:
    findings = []
    for me in parts["entries"]:
        subject = f"memory={me.memory.ledger_id}"
        # live_seq and label_seq are not in bundles (they are positions, implied by the chains)
        if me.memory.live_seq != len(me.provenance):
            findings.append(Finding(subject, "live", f"live_seq {me.memory.live_seq} but the provenance chain has "
                                    f"{len(me.provenance)} nodes", "ChainBrokenError"))
        if me.memory.label_seq != len(me.labels) - 1:
            findings.append(Finding(subject, "live", f"label_seq {me.memory.label_seq} but the label chain ends at "
                                    f"seq {len(me.labels) - 1}", "ChainBrokenError"))
        entries = [me.genesis, *me.provenance, *me.labels]
        for e in entries:
            stored = me.stored_hashes.get((e.kind, e.body["seq"]))
            if stored is not None and stored != e.hash():
                findings.append(Finding(subject, f"{e.kind} seq={e.body['seq']}", "stored entry_hash differs from the "
                                        "hash of the stored body", "ChainBrokenError"))
    for (index, _, kind, seq, stored), ref, recomputed in zip(parts["leaf_rows"], parts["refs"], parts["leaf_hashes"],
                                                             strict=True):
        if bytes(stored) != recomputed:
            findings.append(Finding(f"memory={ref[0]}", f"{kind} seq={seq}", f"stored leaf_hash of log leaf {index} "
                                    "differs from the hash of its entry", "ProofError"))
    for expected, (index, *_rest) in enumerate(parts["leaf_rows"]):
        if index != expected and parts.get("whole_log"):
            findings.append(Finding("log", None, f"log index {index} at position {expected} (gap or duplicate)",
                                    "ChainBrokenError"))
            break
    return findings


def memory_verify(memory: Memory, *, cached: bool = True) -> list[Finding]:
    """Findings for one memory's chains, live state and log leaves (empty = verified).

    Clean results are cached in-process by (memory, chain head, label seq, live state); any
    legitimate append moves one of those, so the next call re-verifies. That is what recall
    needs; a raw edit that bypasses the triggers leaves the key as it was, so the memory page
    and the API's memory detail ask with ``cached=False`` and always check the rows.
    """
    return memories_verify([memory], cached=cached)[memory.pk]


def _bundle_findings(org, memories: list[Memory]) -> list[Finding]:
    """Every finding of one bundle built from these memories' rows (their chains and leaves only)."""
    parts = export.bundle_parts(org, memories=memories)
    signed = {me.memory.pk for me in parts["entries"]}
    findings = [Finding(f"memory={m.ledger_id}", "genesis", "genesis is not signed yet", "ChainBrokenError")
                for m in memories if m.pk not in signed]
    if not parts["entries"]:
        return findings
    bundle = build_bundle(tenant=parts["tenant"], epochs=epochs_for(org),
                          memories=[export.memory_record_of(me) for me in parts["entries"]],
                          log_leaves=parts["refs"], tree_heads=[], consistency=[],
                          key_endorsements=key_endorsements_for(org))
    try:
        checked = verify_bundle(bundle, require_coverage=False)  # a subset of the log, no tree heads
    except BundleError as exc:
        subject = f"memory={memories[0].ledger_id}" if len(memories) == 1 else "bundle"  # "bundle": no one's
        checked = [Finding(subject, None, f"unusable: {exc}", "BundleError")]
    # An unsigned memory fails on that alone, as when it is checked by itself (its leaves name
    # entries this bundle lacks; saying so again would only differ from the one-memory answer).
    unsigned = {f.subject for f in findings}
    return findings + [f for f in checked + _database_findings(parts) if f.subject not in unsigned]


def memories_verify(memories: list[Memory], *, cached: bool = True) -> dict[int, list[Finding]]:
    """``memory_verify`` for several memories at once: their findings by primary key.

    One ``bundle_parts`` and one ``verify_bundle`` for all of them (one per organization; recall
    verifies its first-seen candidates together). Each finding names its memory ("memory=<ledger id>"), so a tampered
    memory fails alone and the others are verified. A finding that names none of them (an
    epoch, an unusable bundle) cannot be attributed: then each memory is verified on its own,
    as ``memory_verify`` would, so a batch never condemns or clears a memory that a check of
    that memory alone would not.
    """
    out: dict[int, list[Finding]] = {}
    todo: list[Memory] = []
    with _lock:
        for m in memories:
            key = _cache_key(m)
            if cached and key in _clean:
                _clean.move_to_end(key)
                out[m.pk] = []
            elif m.pk not in out:
                out[m.pk] = []
                todo.append(m)
    if not todo:
        return out
    groups: dict[int, list[Memory]] = {}
    for m in todo:  # one bundle per organization (a row moved to another one is checked as its own)
        groups.setdefault(m.organization_id, []).append(m)
    for group in groups.values():
        findings = _bundle_findings(group[0].organization, group)
        by_subject = {f"memory={m.ledger_id}": m.pk for m in group}
        if len(group) == 1:
            out[group[0].pk] = findings
        elif len(by_subject) != len(group) or any(f.subject not in by_subject for f in findings):
            for m in group:  # not attributable: each memory alone
                out[m.pk] = _bundle_findings(m.organization, [m])
        else:
            for f in findings:
                out[by_subject[f.subject]].append(f)
    clean = [_cache_key(m) for m in todo if not out[m.pk]]
    if clean:
        with _lock:
            for key in clean:
                _clean[key] = True
                _clean.move_to_end(key)
            while len(_clean) > _CACHE_MAX:
                _clean.popitem(last=False)
    return out


def memory_verify_cache_clear() -> None:
    with _lock:
        _clean.clear()


def _key_directory_findings(organization) -> list[Finding]:
    try:
        kd_epochs = {e.number: e for e in key_directory().epochs(organization.slug)}
    except (OSError, ValueError, BundleError):
        return []  # this process cannot read the key directory: nothing to compare
    if not kd_epochs:
        return []
    findings = []
    db_epochs = {e.number: e for e in epochs_for(organization)}
    for n in sorted(set(kd_epochs) | set(db_epochs)):
        a, b = kd_epochs.get(n), db_epochs.get(n)
        if a != b:
            what = "missing from the database" if b is None else "missing from the key directory" if a is None else \
                "differs from the key directory (" + ", ".join(
                    f for f in ("public_key", "not_before", "not_after", "revoked_at", "endorsement")
                    if getattr(a, f) != getattr(b, f)) + ")"
            findings.append(Finding(f"epoch={n}", None, f"recorded epoch {what}", "EpochMismatch"))
    return findings


def organization_verify(organization) -> list[Finding]:
    """Findings for the whole organization: every memory, the log and its tree heads, receipts."""
    parts = export.bundle_parts(organization)
    parts["whole_log"] = True
    try:
        # The live log grows between tree heads (signed every TREE_HEAD_INTERVAL_S): leaves past the
        # newest head are expected here; an exported bundle is checked for coverage by the verifier.
        findings = verify_bundle(export.bundle_build(organization, parts=parts), require_coverage=False)
    except BundleError as exc:
        return [Finding("bundle", None, f"unusable: {exc}", "BundleError")]
    findings += _database_findings(parts)
    findings += _key_directory_findings(organization)
    return findings


__all__ = ["Finding", "memories_verify", "memory_verify", "memory_verify_cache_clear", "organization_verify"]
