"""Verification inside the app, with the portable verifier's own checks.

Both functions build an evidence bundle from the rows (``ledger.export``) and run
``ledger.core.verify`` on it, so the app and ``python -m ledger.core.verify`` share one checker.
On top, they compare what only the database holds: the cached ``entry_hash`` and ``leaf_hash``
columns against the hashes recomputed from the rebuilt bodies, and (for the organization) the
epochs recorded in ``KeyEpoch`` against the housekeeper's key directory when this process can
read it.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ledger import export
from ledger.core.bundle import build_bundle
from ledger.core.errors import BundleError
from ledger.core.verify import Finding, verify_bundle
from ledger.models import Memory
from ledger.signing import epochs_for, key_directory

logger = logging.getLogger(__name__)
_CACHE_MAX = 50_000
_clean: OrderedDict[tuple, bool] = OrderedDict()
_lock = threading.Lock()


def live_state(memory: Memory) -> tuple:
    """What a verification vouches for besides the memory's id: chain head, label seq, live
    weight, state and content hash (a transition or label moves one of the first four; a raw edit
    of the text and its hash moves only the last)."""
    return (bytes(memory.chain_head or b""), memory.label_seq, memory.live_weight_q, memory.epistemic_state or "",
            bytes(memory.content_sha256))


def _cache_key(memory: Memory) -> tuple:
    return (memory.pk, *live_state(memory))


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


MOVED_RETRIES = 3  # checks of one memory (memory_verify) that each found it changed since it was read


def memory_verify(memory: Memory, *, cached: bool = True) -> list[Finding]:
    """Findings for one memory's chains, live state and log leaves (empty = verified).

    Clean results are cached in-process by (memory, chain head, label seq, live state); any
    legitimate append moves one of those, so the next call re-verifies. That is what recall
    needs; a raw edit that bypasses the triggers leaves the key as it was, so the memory page
    and the API's memory detail ask with ``cached=False`` and always check the rows.
    A memory that a concurrent write moved after the caller read it is read again and checked
    in its new state (``memories_verify`` returns None for it), up to ``MOVED_RETRIES`` checks.
    """
    for _ in range(MOVED_RETRIES):
        found = memories_verify([memory], cached=cached)[memory.pk]
        if found is not None:
            return found
        memory = Memory.objects.select_related("store", "organization").filter(pk=memory.pk).first()
        if memory is None:
            break
    subject = f"memory={memory.ledger_id}" if memory is not None else "memory"
    return [Finding(subject, "live", f"changed by a concurrent write during each of {MOVED_RETRIES} checks, or no "
                    "longer in the database: not verified", "StateMoved")]


def _bundle_findings(org, memories: list[Memory]) -> tuple[list[Finding], set[int]]:
    """Every finding of one bundle built from these memories' rows (their chains and leaves
    only), and the memories that moved: whose row, read again with its chains in one snapshot
    (``export.bundle_parts``), no longer has the live state the caller read. A write committed
    in between (a label, a transition) is no evidence of anything; the check read the new state
    with the new chains, which the caller did not ask about, so nothing is said of those."""
    parts = export.bundle_parts(org, memories=memories)
    fresh = parts["memories"]
    moved = {m.pk for m in memories if m.pk in fresh and live_state(fresh[m.pk]) != live_state(m)}
    findings = [Finding(f"memory={m.ledger_id}", "live", "memory no longer in the database", "ChainBrokenError")
                for m in memories if m.pk not in fresh]
    signed = {me.memory.pk for me in parts["entries"]}
    findings += [Finding(f"memory={m.ledger_id}", "genesis", "genesis is not signed yet", "ChainBrokenError")
                 for m in memories if m.pk in fresh and m.pk not in signed and m.pk not in moved]
    if not parts["entries"]:
        return findings, moved
    bundle = build_bundle(tenant=parts["tenant"], epochs=epochs_for(org),
                          memories=[export.memory_record_of(me) for me in parts["entries"]],
                          log_leaves=parts["refs"], tree_heads=[], consistency=[],
                          key_endorsements=parts["endorsements"])
    try:
        checked = verify_bundle(bundle, require_coverage=False)  # a subset of the log, no tree heads
    except BundleError as exc:
        subject = f"memory={memories[0].ledger_id}" if len(memories) == 1 else "bundle"  # "bundle": no one's
        checked = [Finding(subject, None, f"unusable: {exc}", "BundleError")]
    # An unsigned memory fails on that alone, as when it is checked by itself (its leaves name
    # entries this bundle lacks; saying so again would only differ from the one-memory answer).
    unsigned = {f.subject for f in findings}
    moved_subjects = {f"memory={m.ledger_id}" for m in memories if m.pk in moved}
    return findings + [f for f in checked + _database_findings(parts)
                       if f.subject not in unsigned and f.subject not in moved_subjects], moved


def memories_verify(memories: list[Memory], *, cached: bool = True) -> dict[int, list[Finding] | None]:
    """``memory_verify`` for several memories at once: their findings by primary key, or None
    for a memory that moved (a write committed after the caller read it and before this check
    read it: nothing verified for the state the caller holds; read it again and ask again).

    One ``bundle_parts`` and one ``verify_bundle`` for all of them (one per organization; recall
    verifies its first-seen candidates together). Each finding names its memory ("memory=<ledger id>"), so a tampered
    memory fails alone and the others are verified. A finding that names none of them (an
    epoch, an unusable bundle) cannot be attributed: then each memory is verified on its own,
    as ``memory_verify`` would, so a batch never condemns or clears a memory that a check of
    that memory alone would not.
    """
    out: dict[int, list[Finding] | None] = {}
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
        findings, moved = _bundle_findings(group[0].organization, group)
        by_subject = {f"memory={m.ledger_id}": m.pk for m in group}
        if len(group) == 1:
            out[group[0].pk] = findings
        elif len(by_subject) != len(group) or any(f.subject not in by_subject for f in findings):
            moved = set()
            for m in group:  # not attributable: each memory alone
                out[m.pk], alone_moved = _bundle_findings(m.organization, [m])
                moved |= alone_moved
        else:
            for f in findings:
                out[by_subject[f.subject]].append(f)
        for pk in moved:
            out[pk] = None
    clean = [_cache_key(m) for m in todo if out[m.pk] == []]
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




# --------------------------------------------------------------------------- verified ahead of recall
#
# A recall adopts a candidate only after its chains verify. Verifying first-seen candidates in the
# request (a bundle read and the signatures of each) was a third of the recall's CPU under load
# (docs/benchmarks.md section 11), so a worker verifies a store's memories ahead of time
# (``store_preverify``, run by ``ledger.tasks.recall_prepare_task``) and records, per memory, the
# exact live state it verified: (chain head, label seq, live weight, state), "verified through
# log position N". Recall adopts a candidate on that record only when the row it is about to
# vouch for has exactly that state (any transition or label moves the chain head or the label
# seq); everything that moved since is verified in the request, as before. The file is
# authenticated with a key derived from SECRET_KEY (a file the web process did not get from a
# worker of the same deployment is ignored) and carries the organization's key epochs as they
# were checked: a rotated or revoked epoch invalidates it.

PREVERIFY_CHUNK = 1000  # memories per bundle when verifying a store ahead of recall
_PREVERIFY_VERSION = b"memaudit-preverified/2"


@dataclass(frozen=True)
class Preverified:
    """What a worker verified for one store: sorted primary keys and, per key, the state it verified."""

    log_position: int
    pks: np.ndarray  # (n,) int64, sorted
    heads: np.ndarray  # (n, 32) uint8
    contents: np.ndarray  # (n, 32) uint8: content_sha256 (a raw edit of text and hash moves no chain head)
    label_seq: np.ndarray  # (n,) int64
    weight_q: np.ndarray  # (n,) int64
    states: np.ndarray  # (n,) int16 codes into state_names
    state_names: tuple[str, ...]

    def mask(self, *, pks: np.ndarray, heads: list[bytes], contents: list[bytes], label_seq: np.ndarray,
             weight_q: np.ndarray, states: list[str]) -> np.ndarray:
        """True for each row (of a store index) whose exact live state was verified."""
        out = np.zeros(len(pks), dtype=bool)
        if not len(pks) or not len(self.pks):
            return out
        at = np.minimum(np.searchsorted(self.pks, pks), len(self.pks) - 1)
        known = self.pks[at] == pks
        rows = np.flatnonzero(known)
        if not len(rows):
            return out
        at = at[rows]
        ok = (self.label_seq[at] == label_seq[rows]) & (self.weight_q[at] == weight_q[rows])
        code = {name: i for i, name in enumerate(self.state_names)}
        ok &= self.states[at] == np.array([code.get(states[r], -1) for r in rows], dtype=np.int16)
        head_rows = np.frombuffer(b"".join(heads[r] if len(heads[r]) == 32 else bytes(32) for r in rows),
                                  dtype=np.uint8).reshape(len(rows), 32)
        ok &= (self.heads[at] == head_rows).all(axis=1)
        content_rows = np.frombuffer(b"".join(contents[r] if len(contents[r]) == 32 else bytes(32) for r in rows),
                                     dtype=np.uint8).reshape(len(rows), 32)
        ok &= (self.contents[at] == content_rows).all(axis=1)
        out[rows] = ok
        return out


def _preverify_key() -> bytes:
    from django.conf import settings  # local: the verification core stays importable without settings

    return hmac.new(str(settings.SECRET_KEY).encode(), b"memaudit preverified recall state", hashlib.sha256).digest()


def preverified_path(store_id: int) -> Path:
    from django.conf import settings  # local: the verification core stays importable without settings

    return Path(settings.VAR_DIR) / "recall" / f"preverified-store-{store_id}.npz"


def _epochs_fingerprint(organization) -> str:
    h = hashlib.sha256()
    for e in epochs_for(organization):
        h.update(repr((e.number, e.public_key.hex(), str(e.not_before), str(e.not_after), str(e.revoked_at),
                       (e.endorsement or b"").hex())).encode())
    return h.hexdigest()


def preverified_load(store) -> Preverified | None:
    """The store's verified-ahead record, if present, authentic, and made under the
    organization's current key epochs; else None (recall then verifies every candidate itself)."""
    path = preverified_path(store.pk)
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    mac, data = raw[:32], raw[32:]
    if len(raw) < 32 or not hmac.compare_digest(mac, hmac.new(_preverify_key(), data, hashlib.sha256).digest()):
        logger.warning("ignoring %s: not written by this deployment (authentication failed)", path)
        return None
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if meta.get("version") != _PREVERIFY_VERSION.decode() or meta.get("store") != store.pk:
                return None
            if meta.get("epochs") != _epochs_fingerprint(store.organization):
                return None  # an epoch was added, rotated or revoked since: verify again
            pre = Preverified(log_position=int(meta["log_position"]), pks=z["pks"].astype(np.int64),
                              heads=z["heads"].astype(np.uint8), contents=z["contents"].astype(np.uint8),
                              label_seq=z["label_seq"].astype(np.int64),
                              weight_q=z["weight_q"].astype(np.int64), states=z["states"].astype(np.int16),
                              state_names=tuple(meta["state_names"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("ignoring %s: unreadable (%s)", path, exc)
        return None
    if pre.heads.shape != (len(pre.pks), 32) or pre.contents.shape != pre.heads.shape or not (len(pre.pks) == len(pre.label_seq) == len(pre.weight_q)
                                                      == len(pre.states)):
        return None
    return pre


def _preverified_write(store, *, log_position: int, rows: list[tuple], epochs: str) -> None:
    rows = sorted(rows)
    names = sorted({r[4] for r in rows})
    code = {name: i for i, name in enumerate(names)}
    buf = io.BytesIO()
    np.savez(buf,
             meta=np.frombuffer(json.dumps({"version": _PREVERIFY_VERSION.decode(), "store": store.pk,
                                            "log_position": log_position, "epochs": epochs,
                                            "state_names": names}).encode(), dtype=np.uint8),
             pks=np.array([r[0] for r in rows], dtype=np.int64),
             heads=np.frombuffer(b"".join(r[1] for r in rows), dtype=np.uint8).reshape(len(rows), 32),
             contents=np.frombuffer(b"".join(r[5] for r in rows), dtype=np.uint8).reshape(len(rows), 32),
             label_seq=np.array([r[2] for r in rows], dtype=np.int64),
             weight_q=np.array([r[3] for r in rows], dtype=np.int64),
             states=np.array([code[r[4]] for r in rows], dtype=np.int16))
    data = buf.getvalue()
    path = preverified_path(store.pk)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # owner-only, like the rest of VAR_DIR
    with os.fdopen(fd, "wb") as f:
        f.write(hmac.new(_preverify_key(), data, hashlib.sha256).digest() + data)
    os.replace(tmp, path)


def store_preverify(store, *, log_position: int, rows: list[tuple] | None = None) -> dict:
    """Verify the store's signed memories whose current state the saved record does not cover,
    and save the record (clean memories only; a memory with findings is left for recall to
    verify, exclude and alert on). ``log_position``: the tenant log's last leaf index read
    *before* the memories were, so the record claims no more than it checked. ``rows``: every
    signed memory's (pk, chain head, label seq, live weight, state, content hash) as int, bytes,
    int, int, str ("" for none), bytes, ascending pk, as read at or after ``log_position`` (the
    worker's store index has them); else read here.
    Each memory is re-read and its state compared before it is verified either way.

    Returns counts: ``kept`` (already verified in this state), ``verified``, ``failed``, ``moved``
    (changed since they were listed: left for the next run)."""
    epochs = _epochs_fingerprint(store.organization)
    old = preverified_load(store)
    if rows is None:
        rows = [(int(pk), bytes(head), int(seq), int(w), state or "", bytes(content))
                for pk, head, seq, w, state, content in Memory.objects.filter(
                    store=store, chain_head__isnull=False).order_by("pk").values_list(
                    "pk", "chain_head", "label_seq", "live_weight_q", "epistemic_state", "content_sha256")]
    if old is not None and rows:
        kept_mask = old.mask(pks=np.array([r[0] for r in rows], dtype=np.int64), heads=[r[1] for r in rows],
                             contents=[r[5] for r in rows], label_seq=np.array([r[2] for r in rows], dtype=np.int64),
                             weight_q=np.array([r[3] for r in rows], dtype=np.int64), states=[r[4] for r in rows])
    else:
        kept_mask = np.zeros(len(rows), dtype=bool)
    clean = [r for r, kept in zip(rows, kept_mask, strict=True) if kept]
    todo = [r for r, kept in zip(rows, kept_mask, strict=True) if not kept]
    failed = 0
    for i in range(0, len(todo), PREVERIFY_CHUNK):
        chunk = todo[i:i + PREVERIFY_CHUNK]
        memories = Memory.objects.select_related("store", "organization").in_bulk([r[0] for r in chunk])
        batch = []
        for r in chunk:
            m = memories.get(r[0])
            # Vouch only for the state verified: a memory that moved since it was listed waits for the next run.
            if m is not None and live_state(m) == r[1:]:
                batch.append(m)
        findings = memories_verify(batch, cached=False)
        by_pk = {r[0]: r for r in chunk}
        for m in batch:
            if findings[m.pk] is None:
                continue  # changed since it was read: waits for the next run, like the ones above
            if findings[m.pk]:
                failed += 1
            else:
                clean.append(by_pk[m.pk])
    _preverified_write(store, log_position=log_position, rows=clean, epochs=epochs)
    kept = int(kept_mask.sum())
    verified = len(clean) - kept
    return {"kept": kept, "verified": verified, "failed": failed, "moved": len(todo) - verified - failed,
            "log_position": log_position}


__all__ = ["Finding", "Preverified", "live_state", "memories_verify", "memory_verify", "memory_verify_cache_clear",
           "organization_verify", "preverified_load", "preverified_path", "store_preverify"]
