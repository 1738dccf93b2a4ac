"""Ed25519 housekeeper key epochs and signers (pure: bytes and signers in, no file I/O).

Where private keys live (a key directory, a PKCS#11 token) is ``ledger.keystore``'s business;
this module only takes seeds, public keys and :class:`Signer` objects.

What is signed is always an entry hash ``entry_hash(tag, body)`` (32 bytes),
never raw JSON, so every signature is domain separated by its tag.

Epoch rules (DESIGN section 3, "Keys and epochs"):

1. Epoch 1 is the trust anchor: it carries no endorsement; a verifier that
   holds the tenant's anchor key pins it with ``trust_anchor=``.
2. Epoch n > 1 is endorsed by epoch n-1's key over
   ``entry_hash(TAG_EPOCH, epoch_body(epoch n))``.
3. An epoch signs entries whose body time lies in ``[not_before, not_after)``
   and strictly before ``revoked_at`` when revoked. Rotation does not shorten
   the old epoch (its ``not_after`` is endorsed); revoke it if it must stop.
4. Revocation is a statement of the key directory, not signed: it can only
   make verification stricter.
"""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Mapping, Protocol, Sequence

import nacl.exceptions
import nacl.signing
from nacl.bindings import crypto_sign, crypto_sign_open, crypto_sign_seed_keypair

from ledger.core.canonical import TAG_EPOCH, TAG_KEY_ENDORSEMENT, entry_hash, format_time, parse_time
from ledger.core.errors import (
    BundleError,
    CanonicalError,
    ChainBrokenError,
    EpochExpiredError,
    EpochRevokedError,
    LedgerError,
    SignatureInvalidError,
    TenantMismatchError,
    UnknownEpochError,
)

DEFAULT_VALIDITY = timedelta(days=365)


# --------------------------------------------------------------------------- signing


def generate_keypair() -> tuple[bytes, bytes]:
    """Return ``(seed, public_key)``, 32 bytes each."""
    sk = nacl.signing.SigningKey.generate()
    return bytes(sk), bytes(sk.verify_key)


def key_id(public_key: bytes) -> str:
    """Short, stable identifier of a public key: first 16 hex of its SHA-256."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> None:
    """Raise SignatureInvalidError unless ``signature`` is valid for ``message``."""
    if len(signature) != 64 or len(public_key) != 32:
        raise SignatureInvalidError("signature or public key has the wrong length")
    try:
        crypto_sign_open(signature + message, public_key)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError, TypeError):
        raise SignatureInvalidError("signature invalid") from None


class Signer(Protocol):
    """Anything that signs for a housekeeper epoch (key file, KMS, HSM)."""

    epoch: int
    public_key: bytes

    def sign(self, message: bytes) -> bytes: ...


class Ed25519Key:
    """A plain Ed25519 key (e.g. the lower-privilege recall receipt key)."""

    def __init__(self, seed: bytes) -> None:
        if len(seed) != 32:
            raise ValueError("Ed25519 seed must be 32 bytes")
        self._sk = nacl.signing.SigningKey(seed)
        self.public_key: bytes = bytes(self._sk.verify_key)
        self.key_id: str = key_id(self.public_key)
        # libsodium's 64-byte secret key, derived once: signing through the binding skips
        # PyNaCl's SignedMessage wrapper (same libsodium call, same signature).
        self._secret = crypto_sign_seed_keypair(seed)[1]

    @classmethod
    def generate(cls) -> "Ed25519Key":
        return cls(generate_keypair()[0])

    def sign(self, message: bytes) -> bytes:
        return crypto_sign(message, self._secret)[:64]


class Ed25519Signer(Ed25519Key):
    """Housekeeper signer for one epoch, from a private key seed."""

    def __init__(self, seed: bytes, epoch: int) -> None:
        super().__init__(seed)
        self.epoch = epoch


# --------------------------------------------------------------------------- epochs


@dataclass(frozen=True)
class Epoch:
    tenant: str
    number: int
    public_key: bytes
    not_before: str
    not_after: str
    revoked_at: str | None = None
    endorsement: bytes | None = None

    def body(self) -> dict:
        return epoch_body(
            tenant=self.tenant,
            number=self.number,
            public_key=self.public_key,
            not_before=self.not_before,
            not_after=self.not_after,
        )

    def to_json(self) -> dict:
        return {
            "tenant": self.tenant,
            "number": self.number,
            "public_key": self.public_key.hex(),
            "not_before": self.not_before,
            "not_after": self.not_after,
            "revoked_at": self.revoked_at,
            "endorsement": self.endorsement.hex() if self.endorsement is not None else None,
        }

    @classmethod
    def from_json(cls, d: Mapping) -> "Epoch":
        try:
            endorsement = d.get("endorsement")
            return cls(
                tenant=_str(d["tenant"], "tenant"),
                number=_int(d["number"], "number"),
                public_key=bytes.fromhex(_str(d["public_key"], "public_key")),
                not_before=_str(d["not_before"], "not_before"),
                not_after=_str(d["not_after"], "not_after"),
                revoked_at=d.get("revoked_at"),
                endorsement=bytes.fromhex(endorsement) if endorsement is not None else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BundleError(f"epoch record unusable: {exc!r}") from None


def _str(v: object, name: str) -> str:
    if type(v) is not str:
        raise TypeError(f"{name} must be a string")
    return v


def _int(v: object, name: str) -> int:
    if type(v) is not int:
        raise TypeError(f"{name} must be an integer")
    return v


def epoch_body(*, tenant: str, number: int, public_key: bytes, not_before: str, not_after: str) -> dict:
    """The endorsed statement about an epoch (revocation is deliberately not part of it)."""
    return {
        "tenant": tenant,
        "epoch": number,
        "public_key": public_key.hex(),
        "not_before": not_before,
        "not_after": not_after,
    }


def _as_dt(t: str | datetime) -> datetime:
    return parse_time(t) if isinstance(t, str) else t


def check_epoch_at(epoch: Epoch, time: str | datetime) -> None:
    """Raise EpochExpiredError / EpochRevokedError unless ``epoch`` may sign at ``time``."""
    t = _as_dt(time)
    if epoch.revoked_at is not None and t >= parse_time(epoch.revoked_at):
        raise EpochRevokedError(
            f"epoch {epoch.number} revoked at {epoch.revoked_at}, entry time {format_time(t)}",
            kind="epoch",
            seq=epoch.number,
        )
    if not parse_time(epoch.not_before) <= t < parse_time(epoch.not_after):
        raise EpochExpiredError(
            f"entry time {format_time(t)} outside epoch {epoch.number} validity "
            f"[{epoch.not_before}, {epoch.not_after})",
            kind="epoch",
            seq=epoch.number,
        )


def epoch_valid_at(epoch: Epoch, time: str | datetime) -> bool:
    try:
        check_epoch_at(epoch, time)
    except (EpochExpiredError, EpochRevokedError):
        return False
    return True


def verify_epoch_chain(epochs: Sequence[Epoch], *, trust_anchor: bytes | None = None) -> None:
    """Check a tenant's epoch list; return None or raise a typed error.

    1. Numbers are 1..N in order, one tenant, well-formed keys and times.
    2. Epoch 1's key equals ``trust_anchor`` when one is given.
    3. Each epoch n > 1 is endorsed by epoch n-1's key, and epoch n-1 was not
       revoked before epoch n begins (a revoked key cannot vouch for a successor).
    """
    if not epochs:
        raise UnknownEpochError("no epochs")
    tenant = epochs[0].tenant
    for i, ep in enumerate(epochs):
        where = {"kind": "epoch", "seq": ep.number}
        if ep.number != i + 1:
            raise ChainBrokenError(f"epoch number {ep.number} at position {i}, expected {i + 1}", **where)
        if ep.tenant != tenant:
            raise TenantMismatchError(f"epoch {ep.number} belongs to tenant {ep.tenant!r}, not {tenant!r}", **where)
        if len(ep.public_key) != 32:
            raise SignatureInvalidError(f"epoch {ep.number} public key is not 32 bytes", **where)
        try:
            nb, na = parse_time(ep.not_before), parse_time(ep.not_after)
            if ep.revoked_at is not None:
                parse_time(ep.revoked_at)
        except CanonicalError as exc:
            raise EpochExpiredError(f"epoch {ep.number}: {exc}", **where) from None
        if not nb < na:
            raise EpochExpiredError(f"epoch {ep.number} not_before is not before not_after", **where)
        if i == 0:
            if trust_anchor is not None and ep.public_key != trust_anchor:
                raise SignatureInvalidError("epoch 1 key does not match the trust anchor", **where)
            continue
        prev = epochs[i - 1]
        if ep.endorsement is None:
            raise SignatureInvalidError(f"epoch {ep.number} carries no endorsement", **where)
        try:
            verify_signature(prev.public_key, entry_hash(TAG_EPOCH, ep.body()), ep.endorsement)
        except SignatureInvalidError:
            raise SignatureInvalidError(
                f"epoch {ep.number} endorsement invalid under epoch {prev.number}", **where
            ) from None
        if prev.revoked_at is not None and parse_time(prev.revoked_at) <= nb:
            raise EpochRevokedError(
                f"epoch {ep.number} endorsed by epoch {prev.number}, revoked at {prev.revoked_at}", **where
            )


# --------------------------------------------------------------------------- endorsed keys

ONLINE = "online"  # signs ledger entries and tree heads for its epoch; lives only in the housekeeper's memory
RECEIPT = "receipt"  # signs recall receipts
PURPOSES = (ONLINE, RECEIPT)
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class KeyEndorsement:
    """An epoch key's signed statement that ``public_key`` may sign for ``purpose`` in
    ``[not_before, not_after)`` (DESIGN: "Keys and epochs"; docs/bundle.md "Endorsed keys").

    Signed by epoch ``epoch`` over ``entry_hash(TAG_KEY_ENDORSEMENT, body())`` at ``time``.
    ``seq`` numbers a tenant's endorsements 0, 1, 2... (their order in the tenant log).
    ``revoked_at``, like an epoch's, is an unsigned statement that only makes checks stricter.
    """

    tenant: str
    seq: int
    purpose: str
    public_key: bytes
    not_before: str
    not_after: str
    epoch: int
    time: str
    signature: bytes
    revoked_at: str | None = None

    @property
    def key_id(self) -> str:
        return key_id(self.public_key)

    def body(self) -> dict:
        return key_endorsement_body(tenant=self.tenant, seq=self.seq, purpose=self.purpose,
                                    public_key=self.public_key, not_before=self.not_before,
                                    not_after=self.not_after, epoch=self.epoch, time=self.time)

    def hash(self) -> bytes:
        return entry_hash(TAG_KEY_ENDORSEMENT, self.body())

    def to_json(self) -> dict:
        return {"body": self.body(), "signature": self.signature.hex(), "revoked_at": self.revoked_at}

    @classmethod
    def from_json(cls, d: object) -> "KeyEndorsement":
        if type(d) is not dict or type(d.get("body")) is not dict or type(d.get("signature")) is not str:
            raise BundleError("key endorsement must be an object with body (object) and signature (hex)")
        b = d["body"]
        expected = {"tenant", "seq", "purpose", "key_id", "public_key", "not_before", "not_after", "epoch", "time"}
        if set(b) != expected:
            raise BundleError(f"key endorsement body fields {sorted(b)} differ from {sorted(expected)}")
        revoked = d.get("revoked_at")
        try:
            if not _HEX64_RE.fullmatch(_str(b["public_key"], "public_key")):
                raise ValueError("public_key must be 64 lowercase hex")
            e = cls(tenant=_str(b["tenant"], "tenant"), seq=_int(b["seq"], "seq"), purpose=_str(b["purpose"], "purpose"),
                    public_key=bytes.fromhex(b["public_key"]), not_before=_str(b["not_before"], "not_before"),
                    not_after=_str(b["not_after"], "not_after"), epoch=_int(b["epoch"], "epoch"),
                    time=_str(b["time"], "time"), signature=bytes.fromhex(d["signature"]),
                    revoked_at=_str(revoked, "revoked_at") if revoked is not None else None)
        except (TypeError, ValueError) as exc:
            raise BundleError(f"key endorsement unusable: {exc}") from None
        if b["key_id"] != e.key_id:
            raise BundleError(f"key endorsement key_id {b['key_id']!r} does not name its public key")
        return e


def key_endorsement_body(*, tenant: str, seq: int, purpose: str, public_key: bytes, not_before: str, not_after: str,
                         epoch: int, time: str) -> dict:
    return {"tenant": tenant, "seq": seq, "purpose": purpose, "key_id": key_id(public_key),
            "public_key": public_key.hex(), "not_before": not_before, "not_after": not_after, "epoch": epoch,
            "time": time}


def sign_key_endorsement(*, tenant: str, seq: int, purpose: str, public_key: bytes, not_before: str,
                         not_after: str, time: str, signer: Signer) -> KeyEndorsement:
    """Endorse ``public_key`` with an *epoch* signer (never an online key: an endorsed key
    cannot endorse another, so nothing outlives the epoch that vouched for it)."""
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {PURPOSES}")
    unsigned = KeyEndorsement(tenant, seq, purpose, public_key, not_before, not_after, signer.epoch, time, b"")
    return KeyEndorsement(tenant, seq, purpose, public_key, not_before, not_after, signer.epoch, time,
                          signer.sign(unsigned.hash()))


# Endorsements whose signature verified (the whole signed statement and the epoch key are the
# key): the app verifies every endorsement with each memory it checks, and a year of daily online
# keys would otherwise cost ~400 signature checks each time. Oldest dropped first.
_ENDORSEMENTS_VERIFIED: dict[tuple, None] = {}
_ENDORSEMENTS_VERIFIED_MAX = 4096


def check_key_endorsement(e: KeyEndorsement, epochs: "EpochSet", *, tenant: str) -> None:
    """Raise a typed error unless ``e`` is a well-formed endorsement by a valid epoch of ``tenant``.

    1. purpose known, 32-byte key, times parse, ``not_before < not_after``;
    2. signed by the *epoch key* ``e.epoch`` (not a delegate) at ``e.time``, inside that epoch's
       validity and before its revocation;
    3. the endorsed window lies inside the endorsing epoch's validity window.
    """
    where = {"kind": "key_endorsement", "seq": e.seq if type(e.seq) is int else None}
    if e.tenant != tenant:
        raise TenantMismatchError(f"key endorsement {e.seq} belongs to tenant {e.tenant!r}, not {tenant!r}", **where)
    if e.purpose not in PURPOSES:
        raise SignatureInvalidError(f"key endorsement {e.seq}: unknown purpose {e.purpose!r}", **where)
    if len(e.public_key) != 32:
        raise SignatureInvalidError(f"key endorsement {e.seq}: public key is not 32 bytes", **where)
    try:
        nb, na = parse_time(e.not_before), parse_time(e.not_after)
        parse_time(e.time)
        if e.revoked_at is not None:
            parse_time(e.revoked_at)
    except CanonicalError as exc:
        raise EpochExpiredError(f"key endorsement {e.seq}: {exc}", **where) from None
    if not nb < na:
        raise EpochExpiredError(f"key endorsement {e.seq}: not_before is not before not_after", **where)
    ep = epochs.by_number.get(e.epoch) if type(e.epoch) is int else None
    memo = (ep.public_key, e.tenant, e.seq, e.purpose, e.public_key, e.not_before, e.not_after, e.epoch, e.time,
            e.signature) if ep is not None else None
    try:
        if memo is not None and memo in _ENDORSEMENTS_VERIFIED:
            # This exact statement verified under this exact key before; only the time rules,
            # which depend on the epochs given now (a revocation), are checked again.
            epochs.check_time(tenant=tenant, number=e.epoch, time=e.time)
        else:
            epochs.verify(tenant=tenant, number=e.epoch, time=e.time, message=e.hash(), signature=e.signature,
                          delegates=False)
            if memo is not None:
                if len(_ENDORSEMENTS_VERIFIED) >= _ENDORSEMENTS_VERIFIED_MAX:
                    _ENDORSEMENTS_VERIFIED.pop(next(iter(_ENDORSEMENTS_VERIFIED)))
                _ENDORSEMENTS_VERIFIED[memo] = None
    except LedgerError as exc:
        raise type(exc)(f"key endorsement {e.seq} ({e.purpose} key {e.key_id}): {exc.message}", **where) from None
    ep = epochs.by_number[e.epoch]
    if nb < parse_time(ep.not_before) or na > parse_time(ep.not_after):
        raise EpochExpiredError(f"key endorsement {e.seq}: window [{e.not_before}, {e.not_after}) reaches outside "
                                f"epoch {e.epoch} [{ep.not_before}, {ep.not_after})", **where)


def endorsed_key_valid_at(e: KeyEndorsement, time: str | datetime, epochs: "EpochSet") -> bool:
    """The endorsed key may sign at ``time``: inside its window, not revoked, and its epoch not revoked."""
    try:
        t = _as_dt(time)
        if not parse_time(e.not_before) <= t < parse_time(e.not_after):
            return False
        if e.revoked_at is not None and t >= parse_time(e.revoked_at):
            return False
    except CanonicalError:
        return False
    ep = epochs.by_number.get(e.epoch)
    return ep is not None and (ep.revoked_at is None or t < parse_time(ep.revoked_at))


class EpochSet:
    """Epochs of one tenant by number, with cached verify keys — the verifier's key ring.

    ``delegates`` are *already checked* online-key endorsements (:func:`check_key_endorsement`):
    a signature naming epoch ``n`` is accepted from epoch ``n``'s key or from an online key that
    epoch endorsed, valid at the signed time.
    """

    def __init__(self, epochs: Iterable[Epoch], delegates: Iterable[KeyEndorsement] = ()) -> None:
        self._last_keys: tuple[tuple, tuple[bytes, ...]] | None = None  # see signature_keys
        self.by_number: dict[int, Epoch] = {}
        self._windows: dict[int, tuple[datetime, datetime, datetime | None]] = {}
        self._delegates: dict[int, list[tuple[bytes, datetime, datetime, datetime | None]]] = {}
        for ep in epochs:
            self.by_number[ep.number] = ep
            try:
                self._windows[ep.number] = (
                    parse_time(ep.not_before),
                    parse_time(ep.not_after),
                    parse_time(ep.revoked_at) if ep.revoked_at is not None else None,
                )
            except CanonicalError:
                continue  # an epoch with unusable times signs nothing
        for d in delegates:
            if d.purpose != ONLINE:
                continue
            try:
                window = (parse_time(d.not_before), parse_time(d.not_after),
                          parse_time(d.revoked_at) if d.revoked_at is not None else None)
            except CanonicalError:
                continue
            # Newest first: a housekeeper signs with its newest online key.
            self._delegates.setdefault(d.epoch, []).insert(0, (d.public_key, *window))

    @classmethod
    def of(cls, epochs: "EpochSet | Iterable[Epoch] | Mapping[int, Epoch]") -> "EpochSet":
        if isinstance(epochs, EpochSet):
            return epochs
        if isinstance(epochs, Mapping):
            return cls(epochs.values())
        return cls(epochs)

    def delegate_count(self) -> int:
        return sum(len(v) for v in self._delegates.values())

    def check_time(self, *, tenant: str, number: object, time: object) -> tuple[Epoch, datetime]:
        """Raise unless epoch ``number`` of ``tenant`` may sign at ``time``; return it and the time."""
        if type(number) is not int or number not in self._windows:
            raise UnknownEpochError(f"unknown epoch {number!r}")
        ep = self.by_number[number]
        if ep.tenant != tenant:
            raise TenantMismatchError(f"epoch {number} belongs to tenant {ep.tenant!r}, not {tenant!r}")
        t = parse_time(time)  # type: ignore[arg-type]
        nb, na, revoked = self._windows[number]
        if revoked is not None and t >= revoked:
            raise EpochRevokedError(f"epoch {number} revoked at {ep.revoked_at}, entry time {time}")
        if not nb <= t < na:
            raise EpochExpiredError(
                f"entry time {time} outside epoch {number} validity [{ep.not_before}, {ep.not_after})"
            )
        return ep, t

    def signature_keys(self, *, tenant: str, number: object, time: object, delegates: bool = True
                       ) -> tuple[bytes, ...]:
        """The keys that may have signed for epoch ``number`` of ``tenant`` at ``time``: the online
        keys it endorsed then (unless ``delegates=False``), newest first, then its own. Raises as
        :meth:`check_time` does.

        The last answer is kept: the entries of one write share their tenant, epoch and time, and
        the answer depends on nothing else (the set's epochs and delegates do not change after
        it is built). Refusals are not kept; they raise each time."""
        ask = (tenant, number, time, delegates)
        last = self._last_keys
        if last is not None and last[0] == ask and type(number) is int and type(time) is str:
            return last[1]
        ep, t = self.check_time(tenant=tenant, number=number, time=time)
        if not delegates:
            keys: tuple[bytes, ...] = (ep.public_key,)
        else:
            keys = (*(pub for pub, dnb, dna, drev in self._delegates.get(number, ())
                      if dnb <= t < dna and (drev is None or t < drev)), ep.public_key)
        self._last_keys = (ask, keys)
        return keys

    def verify(self, *, tenant: str, number: object, time: object, message: bytes, signature: bytes,
               delegates: bool = True) -> None:
        """Check that epoch ``number`` of ``tenant`` could sign at ``time`` and did sign ``message``
        (with its own key, or — unless ``delegates=False`` — an online key it endorsed)."""
        keys = self.signature_keys(tenant=tenant, number=number, time=time, delegates=delegates)
        if not signed_by_any(keys, message, signature):
            raise SignatureInvalidError(f"signature invalid (epoch {number})")


def signed_by_any(keys: Sequence[bytes], message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` over ``message`` is valid under one of ``keys``."""
    for pub in keys:
        try:
            verify_signature(pub, message, signature)
            return True
        except SignatureInvalidError:
            continue
    return False


class SignatureBatch:
    """Signature checks of a batch of entries, kept while the caller checks (and signs) the rest
    and run at :meth:`check` on a pool of threads, one share each, while the caller waits
    (libsodium runs without the GIL; run beside the caller's own Python, each check's return to
    the interpreter waited on the caller's GIL and made the batch slower than checking inline).
    :meth:`check` raises :class:`SignatureInvalidError`, with the entry's kind, seq and
    ``memory``, for the first entry of the batch whose signature is invalid. Every other check of
    an entry stays the caller's."""

    def __init__(self, pool: Executor, workers: int) -> None:
        self._pool = pool
        self._workers = max(1, workers)
        self._todo: list[tuple] = []  # (keys, message, signature, kind, seq, epoch number, memory)

    def add(self, keys: tuple[bytes, ...], message: bytes, signature: bytes, *, kind: str, seq: object,
            number: object, memory: str) -> None:
        self._todo.append((keys, message, signature, kind, seq if type(seq) is int else None, number, memory))

    def check(self) -> None:
        todo, self._todo = self._todo, []
        if not todo:
            return
        share = -(-len(todo) // self._workers)
        for bad in self._pool.map(_first_invalid, [todo[i:i + share] for i in range(0, len(todo), share)]):
            if bad is not None:
                _, _, _, kind, seq, number, memory = bad
                exc = SignatureInvalidError(f"signature invalid (epoch {number})", kind=kind, seq=seq)
                exc.memory = memory  # which chain: seqs repeat across the batch's memories
                raise exc


def _first_invalid(checks: Sequence[tuple]) -> tuple | None:
    for check in checks:
        if not signed_by_any(check[0], check[1], check[2]):
            return check
    return None
