"""Ledger entries: body builders, signed entries and chain verification.

A memory has two append-only chains (DESIGN section 3, "Entries"):

* provenance: genesis (seq 0) then nodes ``B_1..B_n``; node 1's ``prev`` is the
  genesis hash, node i's ``prev`` the hash of node i-1. Each node ``B_i`` has a
  transition commitment ``t_i`` (same seq) binding ``hash(B_i)`` and the new
  weight — the dual commitment.
* epistemic labels: seq 0..m; label 0's ``prev`` is :data:`ZERO_HASH_HEX`
  (64 zeros, so ``prev`` is always a 64-hex field), label i's ``prev`` the hash
  of label i-1. The current state is the last label's value.

Every entry's signature is over ``entry_hash(TAG_<kind>, body)`` by the epoch
named in ``body["epoch"]``, with ``body["time"]`` inside that epoch's window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ledger.core.canonical import (
    TAG_GENESIS,
    TAG_LABEL,
    TAG_PROVENANCE,
    TAG_TRANSITION,
    entry_hash,
    parse_time,
)
from ledger.core.errors import (
    BundleError,
    CanonicalError,
    ChainBrokenError,
    LedgerError,
    SignatureInvalidError,
    TenantMismatchError,
    WeightMismatchError,
)
from ledger.core.keys import Epoch, EpochSet, SignatureBatch, Signer
from ledger.core.weights import (
    ETA_MAX_Q,
    VALENCE_MAX_Q,
    VALENCE_MIN_Q,
    WEIGHT_MAX_Q,
    WEIGHT_MIN_Q,
    next_weight_q,
    weight_move_is_explained,
)

GENESIS = "genesis"
PROVENANCE = "provenance"
TRANSITION = "transition"
LABEL = "label"
KIND_TAGS: dict[str, bytes] = {
    GENESIS: TAG_GENESIS,
    PROVENANCE: TAG_PROVENANCE,
    TRANSITION: TAG_TRANSITION,
    LABEL: TAG_LABEL,
}
LABELS = frozenset({"poison_suspect", "poison_likely", "poison_refuted"})
ZERO_HASH_HEX = "0" * 64

Epochs = EpochSet | Sequence[Epoch] | Mapping[int, Epoch]
HashOf = Callable[["SignedEntry"], bytes]


class EntryFormatError(CanonicalError):
    """A body misses a field, has an extra one, or a field has the wrong type/range."""


# --------------------------------------------------------------------------- schemas

_HEX64 = re.compile(r"[0-9a-f]{64}")


def _nonempty_str(v: object) -> bool:
    return type(v) is str and v != ""


def _hex64(v: object) -> bool:
    return type(v) is str and _HEX64.fullmatch(v) is not None


def _int_in(lo: int, hi: int) -> Callable[[object], bool]:
    return lambda v: type(v) is int and lo <= v <= hi


_weight = _int_in(WEIGHT_MIN_Q, WEIGHT_MAX_Q)
_seq = _int_in(0, 2**53 - 1)
_epoch = _int_in(1, 2**31)
_str_list = lambda v: type(v) is list and all(type(x) is str for x in v)  # noqa: E731

_COMMON = {"tenant": _nonempty_str, "memory": _nonempty_str, "seq": _seq, "epoch": _epoch,
           "time": lambda v: type(v) is str}
SCHEMAS: dict[str, tuple[dict[str, Callable[[object], bool]], dict[str, Callable[[object], bool]]]] = {
    GENESIS: ({**_COMMON, "store": _nonempty_str, "content_sha256": _hex64, "weight_q": _weight}, {}),
    PROVENANCE: (
        {**_COMMON, "prev_weight_q": _weight, "new_weight_q": _weight,
         "valence_q": _int_in(VALENCE_MIN_Q, VALENCE_MAX_Q), "evidence": _str_list, "prev": _hex64},
        {"eta_q": _int_in(0, ETA_MAX_Q)},
    ),
    TRANSITION: ({**_COMMON, "new_weight_q": _weight, "provenance": _hex64}, {}),
    LABEL: (
        {**_COMMON, "label": lambda v: v in LABELS if type(v) is str else False, "reason": lambda v: type(v) is str,
         "evidence": lambda v: type(v) is dict, "actor": _nonempty_str, "prev": _hex64},
        {},
    ),
}


def validate_body(kind: str, body: object) -> dict:
    """Raise EntryFormatError unless ``body`` has exactly the fields of ``kind``."""
    if kind not in SCHEMAS:
        raise EntryFormatError(f"unknown entry kind {kind!r}")
    if type(body) is not dict:
        raise EntryFormatError(f"{kind} body is not an object")
    required, optional = SCHEMAS[kind]
    for name, ok in required.items():
        if name not in body:
            raise EntryFormatError(f"{kind} body misses field {name!r}")
        if not ok(body[name]):
            raise EntryFormatError(f"{kind} body field {name!r} has a bad value {body[name]!r}")
    if len(body) != len(required):
        for name, v in body.items():
            if name in required:
                continue
            if name not in optional:
                raise EntryFormatError(f"{kind} body has unexpected field {name!r}")
            if not optional[name](v):
                raise EntryFormatError(f"{kind} body field {name!r} has a bad value {v!r}")
    return body


# The last time string ``parse_time`` accepted in :func:`_built`: the entries of one write
# share their time, and parsing is pure (the same string always parses, or fails, the same).
_time_ok: list[str | None] = [None]


def _built(kind: str, body: dict) -> dict:
    validate_body(kind, body)
    t = body["time"]
    if t != _time_ok[0]:
        try:
            parse_time(t)
        except CanonicalError as exc:
            raise EntryFormatError(f"{kind} body field 'time': {exc}") from None
        _time_ok[0] = t
    return body


# --------------------------------------------------------------------------- builders


def genesis_body(tenant: str, store: str, memory: str, content_sha256_hex: str, weight_q: int,
                 epoch: int, time: str) -> dict:
    return _built(GENESIS, {
        "tenant": tenant, "store": store, "memory": memory, "seq": 0,
        "content_sha256": content_sha256_hex, "weight_q": weight_q, "epoch": epoch, "time": time,
    })


def provenance_body(tenant: str, memory: str, seq: int, prev_weight_q: int, new_weight_q: int,
                    valence_q: int, evidence: list[str], prev_hex: str, epoch: int, time: str,
                    *, eta_q: int | None = None) -> dict:
    """Provenance node ``B_seq``. Pass ``eta_q`` to let verifiers recompute the weight exactly."""
    body = {
        "tenant": tenant, "memory": memory, "seq": seq, "prev_weight_q": prev_weight_q,
        "new_weight_q": new_weight_q, "valence_q": valence_q, "evidence": list(evidence),
        "prev": prev_hex, "epoch": epoch, "time": time,
    }
    if eta_q is not None:
        body["eta_q"] = eta_q
    if seq < 1:
        raise EntryFormatError("provenance seq starts at 1 (genesis is seq 0)")
    return _built(PROVENANCE, body)


def transition_body(tenant: str, memory: str, seq: int, new_weight_q: int, provenance_hash_hex: str,
                    epoch: int, time: str) -> dict:
    return _built(TRANSITION, {
        "tenant": tenant, "memory": memory, "seq": seq, "new_weight_q": new_weight_q,
        "provenance": provenance_hash_hex, "epoch": epoch, "time": time,
    })


def label_body(tenant: str, memory: str, seq: int, label: str, reason: str, evidence: dict, actor: str,
               prev_hex: str, epoch: int, time: str) -> dict:
    return _built(LABEL, {
        "tenant": tenant, "memory": memory, "seq": seq, "label": label, "reason": reason,
        "evidence": dict(evidence), "actor": actor, "prev": prev_hex, "epoch": epoch, "time": time,
    })


# --------------------------------------------------------------------------- signed entries


@dataclass(frozen=True)
class SignedEntry:
    """An entry as stored and exported. Treat ``body`` as immutable."""

    kind: str
    body: dict
    signature: bytes

    def hash(self) -> bytes:
        if self.kind not in KIND_TAGS:
            raise EntryFormatError(f"unknown entry kind {self.kind!r}")
        return entry_hash(KIND_TAGS[self.kind], self.body)

    def hash_hex(self) -> str:
        return self.hash().hex()

    @property
    def seq(self) -> object:
        return self.body.get("seq") if type(self.body) is dict else None

    def to_json(self) -> dict:
        return {"kind": self.kind, "body": self.body, "signature": self.signature.hex()}

    @classmethod
    def from_json(cls, d: object) -> "SignedEntry":
        if type(d) is not dict:
            raise BundleError(f"entry is not an object: {d!r:.80}")
        try:
            kind, body, sig = d["kind"], d["body"], d["signature"]
        except KeyError as exc:
            raise BundleError(f"entry misses key {exc.args[0]!r}") from None
        if type(kind) is not str or type(body) is not dict or type(sig) is not str:
            raise BundleError("entry kind/signature must be strings and body an object")
        try:
            signature = bytes.fromhex(sig)
        except ValueError:
            raise BundleError(f"entry signature is not hex: {sig!r:.80}") from None
        return cls(kind, body, signature)


# --------------------------------------------------------------------------- entries from stored columns
#
# The row *is* the body: every body field comes from a column of the entry row or, for the fields
# the row shares with its memory, from the memory (tenant = the organization's slug, memory = its
# ledger id, the genesis content hash = the memory's ``content_sha256``). Editing any of those
# columns changes the rebuilt body, hence its hash, and the stored signature stops verifying.
# ``row`` is any object with the columns as attributes (a database row, a namespace).


def genesis_entry_of(row: Any, *, tenant: str, store: str, memory: str, content_sha256: bytes) -> SignedEntry:
    return SignedEntry(GENESIS, {
        "tenant": tenant, "store": store, "memory": memory, "seq": 0, "content_sha256": bytes(content_sha256).hex(),
        "weight_q": row.weight_q, "epoch": row.epoch, "time": row.time,
    }, bytes(row.signature))


def provenance_entry_of(row: Any, *, tenant: str, memory: str) -> SignedEntry:
    return SignedEntry(PROVENANCE, {
        "tenant": tenant, "memory": memory, "seq": row.seq, "prev_weight_q": row.prev_weight_q,
        "new_weight_q": row.new_weight_q, "valence_q": row.valence_q, "eta_q": row.eta_q,
        "evidence": row.evidence, "prev": bytes(row.prev).hex(), "epoch": row.epoch, "time": row.time,
    }, bytes(row.signature))


def transition_entry_of(row: Any, *, tenant: str, memory: str) -> SignedEntry:
    return SignedEntry(TRANSITION, {
        "tenant": tenant, "memory": memory, "seq": row.seq, "new_weight_q": row.new_weight_q,
        "provenance": bytes(row.provenance_hash).hex(), "epoch": row.epoch, "time": row.time,
    }, bytes(row.signature))


def label_entry_of(row: Any, *, tenant: str, memory: str) -> SignedEntry:
    return SignedEntry(LABEL, {
        "tenant": tenant, "memory": memory, "seq": row.seq, "label": row.label, "reason": row.reason,
        "evidence": row.evidence, "actor": row.actor, "prev": bytes(row.prev).hex(), "epoch": row.epoch,
        "time": row.time,
    }, bytes(row.signature))


def sign_entry(kind: str, body: dict, signer: Signer) -> SignedEntry:
    """Sign ``entry_hash(tag(kind), body)`` with the housekeeper signer of ``body['epoch']``."""
    validate_body(kind, body)
    return sign_checked_body(kind, body, signer)[0]


# Kinds whose schema admits only exact ``str`` and ``int`` values in the safe range and lists of
# ``str``, under fixed ASCII keys: a body that passed :func:`validate_body` is canonical JSON as
# it stands (``canonical.canonical_json_checked``). A label's evidence is a free object: not here.
_PLAIN_KINDS = frozenset({GENESIS, PROVENANCE, TRANSITION})


def checked_body_hash(kind: str, body: dict) -> bytes:
    """``entry_hash(tag(kind), body)`` of a body the caller has just validated (the ``*_body``
    builders do): for the kinds of :data:`_PLAIN_KINDS` the canonical encoder's own type walk
    is skipped, the schema having checked every value already; the hash is the same."""
    return entry_hash(KIND_TAGS[kind], body, checked=kind in _PLAIN_KINDS)


def sign_checked_body(kind: str, body: dict, signer: Signer) -> tuple[SignedEntry, bytes]:
    """:func:`sign_entry` for a body the caller has just validated (the ``*_body`` builders do),
    returning the entry and its hash: the body is encoded once, not validated again."""
    if body["epoch"] != signer.epoch:
        raise SignatureInvalidError(f"body names epoch {body['epoch']}, signer is epoch {signer.epoch}")
    digest = checked_body_hash(kind, body)
    return SignedEntry(kind, body, signer.sign(digest)), digest


def verify_entry(entry: SignedEntry, *, kind: str, tenant: str, memory: str, epochs: Epochs,
                 hash_of: HashOf | None = None, body_checked: bool = False,
                 signatures: SignatureBatch | None = None) -> bytes:
    """Verify one entry in isolation; return its hash.

    1. Kind and body schema (skipped with ``body_checked``: the caller validated this very body).
    2. Tenant, then memory, match the expected ones (a foreign entry is reported as such, not as
    a bad signature). 3. Signature under the named epoch, at the body's time — with
    ``signatures``, the epoch's window is checked here and the signature itself is handed to
    that batch, whose ``check()`` the caller must pass before it relies on the entry.
    """
    seq = entry.seq
    try:
        if entry.kind != kind:
            raise ChainBrokenError(f"expected a {kind} entry, found {entry.kind!r}")
        body = entry.body if body_checked else validate_body(kind, entry.body)
        if body["tenant"] != tenant:
            raise TenantMismatchError(f"entry belongs to tenant {body['tenant']!r}, not {tenant!r}")
        if body["memory"] != memory:
            raise ChainBrokenError(f"entry belongs to memory {body['memory']!r}, not {memory!r}")
        digest = hash_of(entry) if hash_of is not None else entry.hash()
        if signatures is not None:
            keys = EpochSet.of(epochs).signature_keys(tenant=tenant, number=body["epoch"], time=body["time"])
            signatures.add(keys, digest, entry.signature, kind=kind, seq=seq, number=body["epoch"], memory=memory)
            return digest
        EpochSet.of(epochs).verify(tenant=tenant, number=body["epoch"], time=body["time"],
                                   message=digest, signature=entry.signature)
        return digest
    except LedgerError as exc:
        exc.kind, exc.seq = kind, seq if type(seq) is int else None
        raise


def _fail(error: type[LedgerError], message: str, kind: str, seq: object) -> LedgerError:
    return error(message, kind=kind, seq=seq if type(seq) is int else None)


@dataclass(frozen=True)
class ProvenanceState:
    weight_q: int
    head: str  # hex hash of the last provenance-chain entry (genesis when no nodes)
    weights_by_head: dict[str, int]  # every chain position -> weight after it
    hashes: list[bytes]  # genesis, nodes..., transitions... in that order


def check_provenance_chain(genesis: SignedEntry, nodes: Sequence[SignedEntry],
                           transitions: Sequence[SignedEntry], *, tenant: str, memory: str,
                           epochs: Epochs, hash_of: HashOf | None = None) -> ProvenanceState:
    """Verify a memory's provenance chain and its transitions (see module docstring).

    1. Genesis: seq 0, valid signature, tenant/memory match.
    2. Node i: seq i, ``prev`` = hash of the previous chain entry,
       ``prev_weight_q`` = the weight so far, the weight move explained by the
       rule (exactly, when ``eta_q`` is recorded; in direction otherwise).
    3. Exactly one transition per node, same seq, binding ``hash(B_i)`` and
       the same ``new_weight_q``.
    """
    eps = EpochSet.of(epochs)
    g = verify_entry(genesis, kind=GENESIS, tenant=tenant, memory=memory, epochs=eps, hash_of=hash_of)
    if genesis.body["seq"] != 0:
        raise _fail(ChainBrokenError, f"genesis seq is {genesis.body['seq']}, expected 0", GENESIS, genesis.seq)
    weight = genesis.body["weight_q"]
    prev = g
    node_hashes: list[bytes] = []
    weights_by_head = {g.hex(): weight}
    for i, node in enumerate(nodes, 1):
        h = verify_entry(node, kind=PROVENANCE, tenant=tenant, memory=memory, epochs=eps, hash_of=hash_of)
        b = node.body
        if b["seq"] != i:
            raise _fail(ChainBrokenError, f"seq {b['seq']} at position {i}, expected {i} (gap or reordered)",
                        PROVENANCE, b["seq"])
        if b["prev"] != prev.hex():
            raise _fail(ChainBrokenError, f"prev link {b['prev'][:16]}… does not match hash of seq {i - 1}",
                        PROVENANCE, i)
        if b["prev_weight_q"] != weight:
            raise _fail(WeightMismatchError, f"prev_weight_q {b['prev_weight_q']} but weight after seq {i - 1} "
                        f"is {weight}", PROVENANCE, i)
        if "eta_q" in b:
            want = next_weight_q(weight, b["valence_q"], b["eta_q"])
            if b["new_weight_q"] != want:
                raise _fail(WeightMismatchError, f"new_weight_q {b['new_weight_q']} but the rule gives {want}",
                            PROVENANCE, i)
        elif not weight_move_is_explained(weight, b["new_weight_q"], b["valence_q"]):
            raise _fail(WeightMismatchError, f"weight {weight} -> {b['new_weight_q']} moves against valence "
                        f"{b['valence_q']}", PROVENANCE, i)
        weight = b["new_weight_q"]
        weights_by_head[h.hex()] = weight
        node_hashes.append(h)
        prev = h
    transition_hashes: list[bytes] = []
    for i, t in enumerate(transitions, 1):
        th = verify_entry(t, kind=TRANSITION, tenant=tenant, memory=memory, epochs=eps, hash_of=hash_of)
        b = t.body
        if b["seq"] != i or i > len(nodes):
            raise _fail(ChainBrokenError, f"transition seq {b['seq']} at position {i} has no matching node",
                        TRANSITION, b["seq"])
        if b["provenance"] != node_hashes[i - 1].hex():
            raise _fail(ChainBrokenError, f"binds provenance {b['provenance'][:16]}…, not the hash of node {i}",
                        TRANSITION, i)
        if b["new_weight_q"] != nodes[i - 1].body["new_weight_q"]:
            raise _fail(WeightMismatchError, f"new_weight_q {b['new_weight_q']} but node {i} says "
                        f"{nodes[i - 1].body['new_weight_q']}", TRANSITION, i)
        transition_hashes.append(th)
    if len(transitions) < len(nodes):
        missing = len(transitions) + 1
        raise _fail(WeightMismatchError, f"node {missing} has no transition commitment", PROVENANCE, missing)
    return ProvenanceState(weight, prev.hex(), weights_by_head, [g, *node_hashes, *transition_hashes])


def verify_provenance_chain(genesis: SignedEntry, nodes: Sequence[SignedEntry],
                            transitions: Sequence[SignedEntry], *, tenant: str, memory: str,
                            epochs: Epochs) -> int:
    """Verify the provenance chain; return the final ``weight_q`` or raise a typed error."""
    return check_provenance_chain(genesis, nodes, transitions, tenant=tenant, memory=memory,
                                  epochs=epochs).weight_q


@dataclass(frozen=True)
class LabelState:
    state: str | None
    head: str | None  # hex hash of the last label, None without labels
    hashes: list[bytes]


def check_label_chain(labels: Sequence[SignedEntry], *, tenant: str, memory: str, epochs: Epochs,
                      hash_of: HashOf | None = None) -> LabelState:
    """Verify the label chain: seq 0..m, ``prev`` links from ZERO_HASH_HEX, signatures."""
    eps = EpochSet.of(epochs)
    prev = ZERO_HASH_HEX
    state: str | None = None
    hashes: list[bytes] = []
    for i, lab in enumerate(labels):
        h = verify_entry(lab, kind=LABEL, tenant=tenant, memory=memory, epochs=eps, hash_of=hash_of)
        b = lab.body
        if b["seq"] != i:
            raise _fail(ChainBrokenError, f"seq {b['seq']} at position {i}, expected {i} (gap or reordered)",
                        LABEL, b["seq"])
        if b["prev"] != prev:
            raise _fail(ChainBrokenError, f"prev link {b['prev'][:16]}… does not match "
                        f"{'the zero hash' if i == 0 else f'hash of seq {i - 1}'}", LABEL, i)
        prev = h.hex()
        state = b["label"]
        hashes.append(h)
    return LabelState(state, hashes[-1].hex() if hashes else None, hashes)


def verify_label_chain(labels: Sequence[SignedEntry], *, tenant: str, memory: str,
                       epochs: Epochs) -> str | None:
    """Return the current epistemic state (the last label; None without labels)."""
    return check_label_chain(labels, tenant=tenant, memory=memory, epochs=epochs).state
