"""Portable evidence-bundle verifier: ``python -m ledger.core.verify BUNDLE``.

Standard library + PyNaCl only; no Django, no database. The same check
functions run inside the app (``verify_bundle(bundle) -> list[Finding]``).

Checks, in order (each failure is one :class:`Finding`; a chain stops at its
first break because everything after it depends on it):

1. Epochs: numbering, endorsement chain, optional pinned trust anchor. Only
   the epochs up to the first broken link are trusted for later signatures.
2. Per memory: genesis/provenance/transition chain and label chain (seq
   continuity, prev links, weights, dual commitments, tenant, signatures at
   the body time under a valid, unrevoked epoch); the exported live state
   (weight_q, epistemic state, chain head) equals what the chains give.
3. Tenant log: every entry is a leaf exactly once, in causal order; each
   tree head's signature and root (recomputed from the leaves); tree heads
   grow; a valid consistency proof links each consecutive pair.
1b. Key endorsements (``verify_endorsements``): each online or receipt key is endorsed by a
   trusted epoch key, for a window inside that epoch; numbered without gaps. Entries and tree
   heads naming epoch n verify under epoch n's key or an online key it endorsed, valid then.
4. Receipts: signature by a receipt key *endorsed* for the receipt's time (being listed in
   ``receipt_keys`` is not enough), result inclusion proofs, the STH they cite, and each result
   against the memory's chain.

Exit status: 0 no findings, 1 findings, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Sequence

from ledger.core.bundle import (
    KEY_ENDORSEMENT,
    KEYS_REF,
    MemoryRecord,
    ParsedBundle,
    load_bundle,
    parse_bundle,
)
from ledger.core.canonical import parse_time
from ledger.core.entries import (
    GENESIS,
    LABEL,
    PROVENANCE,
    TRANSITION,
    SignedEntry,
    check_label_chain,
    check_provenance_chain,
)
from ledger.core.errors import BundleError, EpochExpiredError, LedgerError, SignatureInvalidError
from ledger.core.keys import (
    ONLINE,
    EpochSet,
    KeyEndorsement,
    check_key_endorsement,
    endorsed_key_valid_at,
    verify_epoch_chain,
)
from ledger.core.merkle import leaf_hash, roots_at, verify_consistency
from ledger.core.receipts import verify_receipt
from ledger.core.tree_heads import verify_tree_head


@dataclass(frozen=True)
class Finding:
    subject: str  # "memory=m42", "epoch=2", "log", "tree_head size=8", "receipt #0"
    entry: str | None  # "provenance seq=3", or None
    message: str
    error: str  # the typed error's class name

    def __str__(self) -> str:
        where = f"{self.subject} {self.entry}" if self.entry else self.subject
        return f"FAIL {where}: {self.message}"


def _entry_label(kind: str | None, seq: int | None) -> str | None:
    if kind is None:
        return None
    return f"{kind} seq={seq}" if seq is not None else kind


def _finding(subject: str, exc: LedgerError, entry: str | None = None) -> Finding:
    return Finding(subject, entry or _entry_label(exc.kind, exc.seq), exc.message, type(exc).__name__)


@dataclass
class _MemoryResult:
    weights_by_head: dict[str, int]
    states: set[str | None]


class _Hashes:
    """Entry hashes computed once per bundle, shared by chain and log checks."""

    def __init__(self) -> None:
        self._by_id: dict[int, bytes] = {}

    def __call__(self, entry: SignedEntry) -> bytes:
        h = self._by_id.get(id(entry))
        if h is None:
            h = self._by_id[id(entry)] = entry.hash()
        return h


def _check_epochs(b: ParsedBundle, findings: list[Finding], trust_anchor: bytes | None) -> EpochSet:
    trusted = b.epochs
    try:
        verify_epoch_chain(b.epochs, trust_anchor=trust_anchor)
    except LedgerError as exc:
        findings.append(Finding(f"epoch={exc.seq}" if exc.seq is not None else "epochs", None, exc.message,
                                type(exc).__name__))
        bad = exc.seq if exc.seq is not None else 1
        trusted = [e for e in b.epochs if e.number < bad and e.tenant == b.tenant]
    for e in trusted:
        if e.tenant != b.tenant:
            findings.append(Finding(f"epoch={e.number}", None, f"belongs to tenant {e.tenant!r}, bundle is "
                                    f"{b.tenant!r}", "TenantMismatchError"))
            trusted = []
            break
    return EpochSet(trusted)


def verify_endorsements(b: ParsedBundle, epochs: EpochSet, findings: list[Finding]
                        ) -> tuple[EpochSet, dict[str, list[KeyEndorsement]]]:
    """Check the bundle's key endorsements against the trusted epochs (anchor -> epoch -> key).

    1. ``seq`` runs 0, 1, 2... without gaps or repeats (a dropped endorsement is a finding).
    2. Each is signed by the epoch *key* it names, at a time inside that epoch, and endorses a
       window inside that epoch (``check_key_endorsement``); a bad one vouches for nothing.

    Returns the key ring with the good online keys as delegates of their epochs, and the good
    receipt-key endorsements by key id (a receipt key without one is not trusted).
    """
    online, receipt = [], {}
    for i, e in enumerate(sorted(b.key_endorsements, key=lambda e: e.seq)):
        subject = f"key_endorsement seq={e.seq}"
        if e.seq != i:
            findings.append(Finding(subject, None, f"endorsements are not numbered 0..n-1 (expected seq {i})",
                                    "ChainBrokenError"))
        try:
            check_key_endorsement(e, epochs, tenant=b.tenant)
        except LedgerError as exc:
            findings.append(Finding(subject, None, exc.message, type(exc).__name__))
            continue
        if e.purpose == ONLINE:
            online.append(e)
        else:
            receipt.setdefault(e.key_id, []).append(e)
    return EpochSet(epochs.by_number.values(), delegates=online), receipt


def _endorsed_receipt_key(body: dict, endorsed: dict[str, list[KeyEndorsement]], epochs: EpochSet) -> bytes:
    """The receipt key of ``body``, only if an epoch endorsed it for receipts at the receipt's time.

    A key merely listed in ``receipt_keys`` is not enough: anyone can list a key.
    """
    kid = body.get("key_id")
    candidates = endorsed.get(kid, []) if type(kid) is str else []
    if not candidates:
        raise SignatureInvalidError(f"receipt key {kid!r} is not endorsed by an epoch key of this tenant")
    for e in candidates:
        if endorsed_key_valid_at(e, body.get("time"), epochs):
            return e.public_key
    raise EpochExpiredError(f"receipt key {kid} is not endorsed for the receipt's time {body.get('time')!r} "
                            "(outside its window, or revoked)")


def _check_memory(m: MemoryRecord, tenant: str, epochs: EpochSet, hash_of: _Hashes,
                  findings: list[Finding]) -> _MemoryResult:
    subject = f"memory={m.id}"
    result = _MemoryResult({}, {None})
    g = m.genesis.body
    if type(g) is dict:
        if g.get("content_sha256") != m.content_sha256:
            findings.append(Finding(subject, "genesis seq=0", f"content_sha256 {m.content_sha256[:16]}… does "
                                    "not match the genesis commitment", "ChainBrokenError"))
        if g.get("store") != m.store:
            findings.append(Finding(subject, "genesis seq=0", f"store {m.store!r} differs from genesis store "
                                    f"{g.get('store')!r}", "ChainBrokenError"))
    live = m.live
    try:
        prov = check_provenance_chain(m.genesis, m.provenance, m.transitions, tenant=tenant, memory=m.id,
                                      epochs=epochs, hash_of=hash_of)
        result.weights_by_head = prov.weights_by_head
        last = _entry_label(TRANSITION, len(m.transitions)) if m.transitions else "genesis seq=0"
        if live["weight_q"] != prov.weight_q:
            findings.append(Finding(subject, "live", f"weight_q {live['weight_q']!r} but the last transition "
                                    f"({last}) gives {prov.weight_q}", "WeightMismatchError"))
        if live["chain_head"] != prov.head:
            findings.append(Finding(subject, "live", f"chain_head {str(live['chain_head'])[:16]}… is not the "
                                    f"provenance head {prov.head[:16]}…", "ChainBrokenError"))
    except LedgerError as exc:
        findings.append(_finding(subject, exc))
    try:
        lab = check_label_chain(m.labels, tenant=tenant, memory=m.id, epochs=epochs, hash_of=hash_of)
        result.states.update(e.body["label"] for e in m.labels)
        if live["state"] != lab.state:
            last = _entry_label(LABEL, len(m.labels) - 1) if m.labels else "no labels"
            findings.append(Finding(subject, "live", f"state {live['state']!r} but the label chain ({last}) "
                                    f"gives {lab.state!r}", "ChainBrokenError"))
    except LedgerError as exc:
        findings.append(_finding(subject, exc))
    return result


def _check_log(b: ParsedBundle, epochs: EpochSet, hash_of: _Hashes, findings: list[Finding]) -> dict[int, bytes]:
    """Return the recomputed roots at every tree-head size (empty when leaves are unusable)."""
    index: dict[tuple[str, str, int], SignedEntry] = {}
    for m in b.memories:
        for e in m.entries():
            seq = e.seq
            if type(seq) is int:
                index.setdefault((m.id, e.kind, seq), e)
    for ke in b.key_endorsements:
        index.setdefault((KEYS_REF, KEY_ENDORSEMENT, ke.seq), ke)
    seen: set[tuple[str, str, int]] = set()
    leaf_hashes: list[bytes] = []
    usable = True
    # causal order: per memory, the next expected seq of each chain
    next_seq: dict[tuple[str, str], int] = {}
    for i, ref in enumerate(b.leaves):
        mem, kind, seq = ref
        entry = index.get(ref)
        label = _entry_label(kind, seq)
        if entry is None:
            findings.append(Finding(f"memory={mem}", label, f"log leaf {i} names an entry the bundle lacks",
                                    "ChainBrokenError"))
            usable = False
            continue
        if ref in seen:
            findings.append(Finding(f"memory={mem}", label, f"log leaf {i} repeats an entry", "ChainBrokenError"))
        seen.add(ref)
        if kind == KEY_ENDORSEMENT:  # the tenant's endorsements, in seq order; no memory chain
            want = next_seq.get((mem, kind), 0)
            if seq != want:
                findings.append(Finding(f"key_endorsement seq={seq}", None, f"log leaf {i} out of order",
                                        "ChainBrokenError"))
            next_seq[(mem, kind)] = seq + 1
            leaf_hashes.append(leaf_hash(entry.hash()))
            continue
        chain = "labels" if kind == LABEL else kind
        want = next_seq.get((mem, chain), 0 if kind in (GENESIS, LABEL) else 1)
        if kind == PROVENANCE and (mem, GENESIS) not in next_seq:
            want = -1
        if kind == TRANSITION and next_seq.get((mem, PROVENANCE), 1) <= seq:
            want = -1
        if kind == LABEL and (mem, GENESIS) not in next_seq:
            want = -1
        if seq != want:
            findings.append(Finding(f"memory={mem}", label, f"log leaf {i} out of causal order",
                                    "ChainBrokenError"))
        next_seq[(mem, chain)] = seq + 1
        try:
            leaf_hashes.append(leaf_hash(hash_of(entry)))
        except LedgerError as exc:
            findings.append(Finding(f"memory={mem}", label, f"log leaf {i} cannot be hashed: {exc}",
                                    type(exc).__name__))
            usable = False
    for m in b.memories:
        for e in m.entries():
            ref = (m.id, e.kind, e.seq)
            if ref not in seen:
                findings.append(Finding(f"memory={m.id}", _entry_label(e.kind, e.seq) if type(e.seq) is int else e.kind,
                                        "entry is not a leaf of the tenant log", "ChainBrokenError"))
    for ke in b.key_endorsements:
        if (KEYS_REF, KEY_ENDORSEMENT, ke.seq) not in seen:
            findings.append(Finding(f"key_endorsement seq={ke.seq}", None, "endorsement is not a leaf of the tenant "
                                    "log", "ChainBrokenError"))
    roots: dict[int, bytes] = {}
    if usable:
        sizes = [t.body.get("size") for t in b.tree_heads if type(t.body) is dict]
        sizes = [s for s in sizes if type(s) is int and 0 <= s <= len(leaf_hashes)]
        for r in b.receipts:
            s = r.get("body", {}).get("sth_size") if isinstance(r, dict) and isinstance(r.get("body"), dict) else None
            if type(s) is int and 0 <= s <= len(leaf_hashes):
                sizes.append(s)
        roots = roots_at(leaf_hashes, sizes)
    prev = None
    for t in b.tree_heads:
        size = t.body.get("size") if type(t.body) is dict else None
        subject = f"tree_head size={size}"
        try:
            if usable and type(size) is int and size > len(leaf_hashes):
                findings.append(Finding(subject, None, f"size exceeds the {len(leaf_hashes)} log leaves",
                                        "ProofError"))
                verify_tree_head(t, tenant=b.tenant, epochs=epochs)
            else:
                verify_tree_head(t, tenant=b.tenant, epochs=epochs, root=roots.get(size) if usable else None)
        except LedgerError as exc:
            findings.append(_finding(subject, exc))
            prev = None
            continue
        if prev is not None:
            if parse_time(t.body["time"]) < parse_time(prev.body["time"]):
                findings.append(Finding(subject, None, f"issued at {t.body['time']}, before the previous tree head "
                                        f"({prev.body['time']})", "ProofError"))
            if t.size < prev.size:
                findings.append(Finding(subject, None, f"tree heads shrink ({prev.size} -> {t.size})",
                                        "ProofError"))
            elif 0 < prev.size < t.size:
                proofs = [p for (o, n, p) in b.consistency if o == prev.size and n == t.size]
                if not proofs:
                    findings.append(Finding(subject, None, f"no consistency proof from size {prev.size}",
                                            "ProofError"))
                else:
                    try:
                        verify_consistency(prev.size, t.size, proofs[0], prev.root, t.root)
                    except LedgerError as exc:
                        findings.append(_finding(subject, exc, f"consistency {prev.size}->{t.size}"))
            elif prev.size == t.size and prev.root != t.root:
                findings.append(Finding(subject, None, "two tree heads of one size disagree on the root",
                                        "ProofError"))
        prev = t
    return roots


def _check_receipts(b: ParsedBundle, roots: dict[int, bytes], memories: dict[str, tuple[MemoryRecord, _MemoryResult]],
                    findings: list[Finding], endorsed_receipt_keys: dict[str, list[KeyEndorsement]],
                    epochs: EpochSet) -> None:
    for i, r in enumerate(b.receipts):
        subject = f"receipt #{i}"
        try:
            if type(r) is not dict or type(r.get("body")) is not dict:
                raise BundleError("receipt must be an object with a body")
            body = r["body"]
            key = _endorsed_receipt_key(body, endorsed_receipt_keys, epochs)
            verify_receipt(r, key)
        except LedgerError as exc:
            findings.append(_finding(subject, exc))
            continue
        if body["tenant"] != b.tenant:
            findings.append(Finding(subject, None, f"receipt of tenant {body['tenant']!r}", "TenantMismatchError"))
        size = body["sth_size"]
        if size in roots and roots[size].hex() != body["sth_root"]:
            findings.append(Finding(subject, None, f"sth_root differs from the log root at size {size}",
                                    "ProofError"))
        elif roots and size not in roots:
            findings.append(Finding(subject, None, f"sth_size {size} exceeds the log", "ProofError"))
        for res in r["results"]:
            entry = f"rank={res['rank']}"
            mid = res["memory"]
            if mid not in memories:
                findings.append(Finding(subject, entry, f"memory {mid!r} is not in the bundle", "ChainBrokenError"))
                continue
            mem, state = memories[mid]
            if mem.store != body["store"]:
                findings.append(Finding(subject, entry, f"memory {mid} is in store {mem.store!r}, receipt is for "
                                        f"{body['store']!r}", "ChainBrokenError"))
            if res["content_sha256"] != mem.content_sha256:
                findings.append(Finding(subject, entry, f"content hash differs from memory {mid}", "ChainBrokenError"))
            w = state.weights_by_head.get(res["chain_head"])
            if w is None:
                findings.append(Finding(subject, entry, f"chain_head is not on memory {mid}'s provenance chain",
                                        "ChainBrokenError"))
            elif w != res["weight_q"]:
                findings.append(Finding(subject, entry, f"weight_q {res['weight_q']} but memory {mid} had {w} at "
                                        "that chain head", "WeightMismatchError"))
            if res["state"] not in state.states:
                findings.append(Finding(subject, entry, f"state {res['state']!r} never held by memory {mid}",
                                        "ChainBrokenError"))


@dataclass
class Report:
    findings: list[Finding]
    memories: int
    entries: int
    tree_heads: int
    receipts: int
    seconds: float


def verify_parsed(b: ParsedBundle, *, trust_anchor: bytes | None = None) -> Report:
    t0 = time.perf_counter()
    findings: list[Finding] = []
    epochs = _check_epochs(b, findings, trust_anchor)
    epochs, endorsed_receipt_keys = verify_endorsements(b, epochs, findings)
    hash_of = _Hashes()
    memories: dict[str, tuple[MemoryRecord, _MemoryResult]] = {}
    entries = 0
    for m in b.memories:
        if m.id in memories:
            findings.append(Finding(f"memory={m.id}", None, "memory id appears twice", "BundleError"))
            continue
        memories[m.id] = (m, _check_memory(m, b.tenant, epochs, hash_of, findings))
        entries += 1 + len(m.provenance) + len(m.transitions) + len(m.labels)
    roots = _check_log(b, epochs, hash_of, findings)
    _check_receipts(b, roots, memories, findings, endorsed_receipt_keys, epochs)
    return Report(findings, len(b.memories), entries, len(b.tree_heads), len(b.receipts),
                  time.perf_counter() - t0)


def verify_bundle(bundle: dict, *, trust_anchor: bytes | None = None) -> list[Finding]:
    """All findings for a bundle (empty = clean). Raises BundleError if the input is unusable."""
    return verify_parsed(parse_bundle(bundle), trust_anchor=trust_anchor).findings


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ledger.core.verify",
                                 description="Verify a MemAudit evidence bundle (exit 0 clean, 1 findings, 2 unusable).")
    ap.add_argument("bundle", help="bundle JSON file, or a directory (bundle.json, or manifest.json + memories.jsonl)")
    ap.add_argument("--trust-anchor", help="hex public key of the tenant's epoch 1, pinned out of band")
    ap.add_argument("--json", action="store_true", help="print findings as JSON lines")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        anchor = bytes.fromhex(args.trust_anchor) if args.trust_anchor else None
        parsed = parse_bundle(load_bundle(args.bundle))
        load_s = time.perf_counter() - t0
        report = verify_parsed(parsed, trust_anchor=anchor)
    except (BundleError, ValueError) as exc:
        print(f"ERROR: unusable bundle: {exc}", file=sys.stderr)
        return 2
    for f in report.findings:
        print(json.dumps(asdict(f)) if args.json else str(f))
    rate = report.entries / report.seconds if report.seconds > 0 else float("inf")
    status = "OK" if not report.findings else f"FAILED with {len(report.findings)} finding(s)"
    print(f"{status}: {report.memories} memories, {report.entries} entries, {report.tree_heads} tree heads, "
          f"{report.receipts} receipts checked in {report.seconds:.3f}s ({rate:,.0f} entries/s; "
          f"reading the bundle took {load_s:.3f}s more)")
    return 0 if not report.findings else 1


if __name__ == "__main__":
    sys.exit(main())
