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
5. Coverage: every log leaf lies under a valid signed tree head.
6. Checkpoints: each C2SP checkpoint note the bundle carries is signed by an
   epoch key and twins a tree head; a pinned checkpoint (``--checkpoint``) is
   extended by the newest tree head (RFC 6962 consistency), so tree heads or
   history dropped after it are a finding; optional k-of-n witness cosignatures.

The epoch keys are only as good as the anchor: without ``--anchor`` (the
organization's epoch-1 key, pinned out of band) the command prints
``UNANCHORED`` first and exits 3 even when every check passes.

Exit status: 0 no findings (anchored), 1 findings, 2 unusable input, 3 no
findings but unanchored.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
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
from ledger.core.checkpoint import Checkpoint, OpenedCheckpoint, open_checkpoint
from ledger.core.entries import (
    GENESIS,
    LABEL,
    PROVENANCE,
    TRANSITION,
    SignedEntry,
    check_label_chain,
    check_provenance_chain,
)
from ledger.core.errors import BundleError, EpochExpiredError, LedgerError, ProofError, SignatureInvalidError
from ledger.core.keys import (
    ONLINE,
    EpochSet,
    KeyEndorsement,
    check_key_endorsement,
    endorsed_key_valid_at,
    verify_epoch_chain,
)
from ledger.core.merkle import EMPTY_ROOT, consistency_proof, leaf_hash, roots_at, verify_consistency
from ledger.core.note import COSIGNATURE_V1, NoteError, VerifierKey, cosigned_by, parse_verifier_key
from ledger.core.receipts import verify_receipt
from ledger.core.tree_heads import SignedTreeHead, verify_tree_head


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


@dataclass
class _Log:
    roots: dict[int, bytes]  # recomputed roots at every tree-head/receipt size (empty: leaves unusable)
    leaf_hashes: list[bytes] | None  # None when the leaves are unusable
    heads: list[SignedTreeHead]  # tree heads whose signature (and root, when computable) verified


def _check_log(b: ParsedBundle, epochs: EpochSet, hash_of: _Hashes, findings: list[Finding]) -> _Log:
    """Leaves, tree heads and their consistency; the recomputed roots and the tree heads that verified."""
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
    verified: list[SignedTreeHead] = []
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
                verified.append(t)
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
    return _Log(roots, leaf_hashes if usable else None, verified)


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


# --------------------------------------------------------------------------- anchoring, checkpoints, coverage


def _check_coverage(b: ParsedBundle, log: _Log, findings: list[Finding]) -> None:
    """Every log leaf must lie under a signed tree head: leaves past the newest one are unattested
    (anything after it could be dropped or rewritten with no signature noticing)."""
    n = len(b.leaves)
    newest = max((t.size for t in log.heads), default=None)
    if n == 0:
        return
    if newest is None:
        findings.append(Finding("log", None, f"none of the {n} log leaves is covered by a valid signed tree head",
                                "ProofError"))
    elif newest < n:
        findings.append(Finding("log", None, f"log leaves {newest}..{n - 1} ({n - newest}) lie beyond the newest "
                                f"signed tree head (size {newest})", "ProofError"))


def _epoch_keys(epochs: EpochSet) -> list[bytes]:
    return [e.public_key for e in epochs.by_number.values()]


def _consistency_proof_for(b: ParsedBundle, log: _Log, old: int, new: int) -> list[bytes] | None:
    carried = [p for (o, n, p) in b.consistency if o == old and n == new]
    if carried:
        return carried[0]
    if log.leaf_hashes is not None and 0 < old <= new <= len(log.leaf_hashes):
        return consistency_proof(old, log.leaf_hashes[:new])
    return None


def _check_consistent_with(subject: str, cp: Checkpoint, head: SignedTreeHead | None, b: ParsedBundle, log: _Log,
                           findings: list[Finding]) -> None:
    """The bundle's newest tree head must extend ``cp`` (RFC 6962 consistency)."""
    if head is None or head.size < cp.size:
        have = "no valid tree head" if head is None else f"its newest valid tree head has size {head.size}"
        findings.append(Finding(subject, None, f"checkpoint of size {cp.size} is newer than the bundle ({have}): "
                                "tree heads or history were dropped after it", "ProofError"))
        return
    try:
        if cp.size == 0:
            if cp.root != EMPTY_ROOT:
                raise ProofError("size-0 checkpoint does not carry the empty root")
        elif cp.size == head.size:
            if cp.root != head.root:
                raise ProofError(f"checkpoint and tree head of size {cp.size} disagree on the root")
        else:
            proof = _consistency_proof_for(b, log, cp.size, head.size)
            if proof is None:
                raise ProofError(f"no consistency proof {cp.size}->{head.size} in the bundle and the leaves are "
                                 "unusable to compute one")
            verify_consistency(cp.size, head.size, proof, cp.root, head.root)
        if log.leaf_hashes is not None and cp.size <= len(log.leaf_hashes):
            if roots_at(log.leaf_hashes, [cp.size])[cp.size] != cp.root:
                raise ProofError(f"the bundle's first {cp.size} log leaves do not hash to the checkpoint root")
    except LedgerError as exc:
        findings.append(_finding(subject, exc))


def _open_checkpoint(subject: str, data: str, b: ParsedBundle, epochs: EpochSet,
                     findings: list[Finding]) -> OpenedCheckpoint | None:
    try:
        opened = open_checkpoint(data, _epoch_keys(epochs))
    except LedgerError as exc:
        findings.append(_finding(subject, exc))
        return None
    if opened.checkpoint.tenant != b.tenant:
        findings.append(Finding(subject, None, f"checkpoint origin {opened.checkpoint.origin!r} is not tenant "
                                f"{b.tenant!r}", "TenantMismatchError"))
        return None
    return opened


def _check_bundle_checkpoints(b: ParsedBundle, epochs: EpochSet, log: _Log,
                              findings: list[Finding]) -> list[OpenedCheckpoint]:
    """Checkpoint notes the bundle carries: signed by an epoch key, each the twin of a tree head."""
    by_size = {t.size: t for t in log.heads}
    out = []
    for i, data in enumerate(b.checkpoints):
        subject = f"checkpoint #{i}"
        opened = _open_checkpoint(subject, data, b, epochs, findings)
        if opened is None:
            continue
        cp = opened.checkpoint
        twin = by_size.get(cp.size)
        if twin is None or twin.root != cp.root:
            findings.append(Finding(subject, None, f"size {cp.size} matches no valid tree head of the bundle",
                                    "ProofError"))
            continue
        out.append(opened)
    return out


def _check_witnesses(subject: str, opened: OpenedCheckpoint | None, witnesses: Sequence[VerifierKey],
                     threshold: int, findings: list[Finding]) -> None:
    if threshold <= 0:
        return
    if opened is None:
        findings.append(Finding(subject, None, f"no checkpoint to hold {threshold} witness cosignature(s)",
                                "SignatureInvalidError"))
        return
    try:
        good = cosigned_by(opened.note, witnesses)
    except LedgerError as exc:
        findings.append(_finding(subject, exc))
        return
    if len(good) < threshold:
        findings.append(Finding(subject, None, f"cosigned by {len(good)} of the {len(witnesses)} known witnesses, "
                                f"{threshold} required", "SignatureInvalidError"))


@dataclass
class Report:
    findings: list[Finding]
    memories: int
    entries: int
    tree_heads: int
    receipts: int
    seconds: float
    anchored: bool = False
    checkpoint_size: int | None = None  # the pinned checkpoint the bundle was checked against
    newest_tree_head: int | None = None


def verify_parsed(b: ParsedBundle, *, trust_anchor: bytes | None = None, checkpoint: str | None = None,
                  witnesses: Sequence[VerifierKey] = (), witness_threshold: int = 0,
                  require_coverage: bool = True) -> Report:
    """All checks. ``checkpoint``: a pinned C2SP checkpoint note the bundle must extend;
    ``witnesses``/``witness_threshold``: k-of-n cosignatures on the checkpoint relied on (the
    pinned one, else the newest the bundle carries); ``require_coverage``: every log leaf under
    a signed tree head (the in-app check of a live log turns it off: the log grows between heads).
    """
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
    log = _check_log(b, epochs, hash_of, findings)
    _check_receipts(b, log.roots, memories, findings, endorsed_receipt_keys, epochs)
    if require_coverage:
        _check_coverage(b, log, findings)
    newest = max(log.heads, key=lambda t: t.size, default=None)
    carried = _check_bundle_checkpoints(b, epochs, log, findings)
    relied: OpenedCheckpoint | None = max(carried, key=lambda o: o.checkpoint.size, default=None)
    pinned_size = None
    if checkpoint is not None:
        relied = _open_checkpoint("pinned checkpoint", checkpoint, b, epochs, findings)
        if relied is not None:
            pinned_size = relied.checkpoint.size
            _check_consistent_with("pinned checkpoint", relied.checkpoint, newest, b, log, findings)
    _check_witnesses("pinned checkpoint" if checkpoint is not None else "newest checkpoint", relied, witnesses,
                     witness_threshold, findings)
    return Report(findings, len(b.memories), entries, len(b.tree_heads), len(b.receipts),
                  time.perf_counter() - t0, anchored=trust_anchor is not None, checkpoint_size=pinned_size,
                  newest_tree_head=newest.size if newest is not None else None)


def verify_bundle(bundle: dict, *, trust_anchor: bytes | None = None, checkpoint: str | None = None,
                  witnesses: Sequence[VerifierKey] = (), witness_threshold: int = 0,
                  require_coverage: bool = True) -> list[Finding]:
    """All findings for a bundle (empty = clean). Raises BundleError if the input is unusable."""
    return verify_parsed(parse_bundle(bundle), trust_anchor=trust_anchor, checkpoint=checkpoint,
                         witnesses=witnesses, witness_threshold=witness_threshold,
                         require_coverage=require_coverage).findings


# --------------------------------------------------------------------------- command line

EXIT_OK, EXIT_FINDINGS, EXIT_UNUSABLE, EXIT_UNANCHORED = 0, 1, 2, 3
UNANCHORED_LINE = ("UNANCHORED: no --anchor given, so the epoch keys are the bundle's own; a bundle signed with "
                   "freshly generated keys passes every other check. Pin the organization's epoch-1 public key.")


def _read_arg(value: str) -> str:
    """A value given inline, or ``@FILE`` / the path of an existing file holding it."""
    path = value[1:] if value.startswith("@") else value
    if value.startswith("@") or (len(value) < 4096 and os.path.isfile(path)):
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from None
    return value


def parse_anchor(value: str) -> bytes:
    """The epoch-1 public key: 64 hex, standard base64 of 32 bytes, a note verifier key
    (``name+keyid+base64(0x01 || key)``), or a file holding one of those."""
    text = _read_arg(value).strip()
    if len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text):
        return bytes.fromhex(text)
    if text.count("+") >= 2 and len(text.split("+", 2)[1]) == 8:
        try:
            return parse_verifier_key(text).public_key
        except NoteError:
            pass
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == 32:
        return raw
    raise ValueError("anchor must be the 32-byte Ed25519 epoch-1 key as 64 hex, base64, a verifier key, or a "
                     "file holding one")


def parse_witness(value: str) -> VerifierKey:
    """A witness verifier key ``name+keyid+base64(0x04 || key)`` (C2SP tlog-cosignature), or a file."""
    try:
        vk = parse_verifier_key(_read_arg(value).strip())
    except NoteError as exc:
        raise ValueError(f"witness key: {exc}") from None
    if vk.type != COSIGNATURE_V1:
        raise ValueError(f"witness key {vk.name} is not a cosignature/v1 (0x04) key")
    return vk


def _add_trust_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--anchor", "--trust-anchor", dest="anchor",
                    help="the organization's epoch-1 public key (hex, base64, verifier key, or a file), pinned out "
                         "of band; without it the result is UNANCHORED (exit 3)")
    ap.add_argument("--checkpoint", help="a pinned checkpoint (C2SP tlog-checkpoint note file, as served at "
                                         "/api/v1/orgs/<slug>/checkpoint) the evidence must be consistent with")
    ap.add_argument("--witness", action="append", default=[],
                    help="a known witness key name+keyid+base64(0x04||key) (repeatable)")
    ap.add_argument("--witness-threshold", type=int, default=None,
                    help="how many of the --witness keys must cosign the checkpoint (default: all given)")
    ap.add_argument("--json", action="store_true", help="print findings as JSON lines")


def _trust(args: argparse.Namespace) -> tuple[bytes | None, str | None, list[VerifierKey], int]:
    anchor = parse_anchor(args.anchor) if args.anchor else None
    checkpoint = _read_arg(args.checkpoint) if args.checkpoint else None
    witnesses = [parse_witness(w) for w in args.witness]
    threshold = len(witnesses) if args.witness_threshold is None else args.witness_threshold
    if threshold > len(witnesses) or threshold < 0:
        raise ValueError(f"--witness-threshold {threshold} needs at least that many --witness keys")
    return anchor, checkpoint, witnesses, threshold


def _bundle_main(argv: Sequence[str], prog: str) -> int:
    ap = argparse.ArgumentParser(prog=prog, description="Verify a MemAudit evidence bundle (exit 0 clean, "
                                 "1 findings, 2 unusable, 3 clean but unanchored).")
    ap.add_argument("bundle", help="bundle JSON file, or a directory (bundle.json, or manifest.json + memories.jsonl)")
    _add_trust_args(ap)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        anchor, checkpoint, witnesses, threshold = _trust(args)
        parsed = parse_bundle(load_bundle(args.bundle))
        load_s = time.perf_counter() - t0
        report = verify_parsed(parsed, trust_anchor=anchor, checkpoint=checkpoint, witnesses=witnesses,
                               witness_threshold=threshold)
    except (BundleError, ValueError) as exc:
        print(f"ERROR: unusable bundle: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    if anchor is None:
        print(UNANCHORED_LINE)
    for f in report.findings:
        print(json.dumps(asdict(f)) if args.json else str(f))
    rate = report.entries / report.seconds if report.seconds > 0 else float("inf")
    status = ("OK" if anchor is not None else "UNANCHORED") if not report.findings else \
        f"FAILED with {len(report.findings)} finding(s)"
    pin = (f"; consistent with the pinned checkpoint of size {report.checkpoint_size}"
           if report.checkpoint_size is not None and not report.findings else "")
    print(f"{status}: {report.memories} memories, {report.entries} entries, {report.tree_heads} tree heads "
          f"(newest size {report.newest_tree_head}), {report.receipts} receipts checked in {report.seconds:.3f}s "
          f"({rate:,.0f} entries/s; reading the bundle took {load_s:.3f}s more){pin}")
    if report.findings:
        return EXIT_FINDINGS
    return EXIT_OK if anchor is not None else EXIT_UNANCHORED


def main(argv: Sequence[str] | None = None, prog: str = "python -m ledger.core.verify") -> int:
    """``[bundle] BUNDLE …`` or ``receipt RECEIPT …`` (a bare path means ``bundle``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {prog} [bundle] BUNDLE [--anchor KEY] [--checkpoint FILE] [--witness KEY ...]\n"
              f"       {prog} receipt RECEIPT [--anchor KEY] [--checkpoint FILE] [--proof FILE]\n"
              f"'{prog} bundle --help' and '{prog} receipt --help' list every option. Exit status: 0 verified, "
              "1 findings, 2 unusable input, 3 no findings but UNANCHORED (no --anchor).")
        return EXIT_OK if argv else EXIT_UNUSABLE
    if argv[0] == "receipt":
        from ledger.core.receipt_check import receipt_main  # local: receipt_check imports this module

        return receipt_main(argv[1:], f"{prog} receipt")
    if argv[0] == "bundle":
        argv = argv[1:]
    return _bundle_main(argv, prog)


def console_main() -> int:
    """Entry point of the packaged ``memaudit-verify`` command."""
    return main(prog="memaudit-verify")


if __name__ == "__main__":
    sys.exit(main())
