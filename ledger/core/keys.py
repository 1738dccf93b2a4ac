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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Mapping, Protocol, Sequence

import nacl.exceptions
import nacl.signing
from nacl.bindings import crypto_sign_open

from ledger.core.canonical import TAG_EPOCH, entry_hash, format_time, parse_time
from ledger.core.errors import (
    BundleError,
    CanonicalError,
    ChainBrokenError,
    EpochExpiredError,
    EpochRevokedError,
    SignatureInvalidError,
    TenantMismatchError,
    UnknownEpochError,
)

DEFAULT_VALIDITY = timedelta(days=365)
_TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


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

    @classmethod
    def generate(cls) -> "Ed25519Key":
        return cls(generate_keypair()[0])

    def sign(self, message: bytes) -> bytes:
        return self._sk.sign(message).signature


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


class EpochSet:
    """Epochs of one tenant by number, with cached verify keys — the verifier's key ring."""

    def __init__(self, epochs: Iterable[Epoch]) -> None:
        self.by_number: dict[int, Epoch] = {}
        self._windows: dict[int, tuple[datetime, datetime, datetime | None]] = {}
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

    @classmethod
    def of(cls, epochs: "EpochSet | Iterable[Epoch] | Mapping[int, Epoch]") -> "EpochSet":
        if isinstance(epochs, EpochSet):
            return epochs
        if isinstance(epochs, Mapping):
            return cls(epochs.values())
        return cls(epochs)

    def verify(self, *, tenant: str, number: object, time: object, message: bytes, signature: bytes) -> None:
        """Check that epoch ``number`` of ``tenant`` could sign at ``time`` and did sign ``message``."""
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
        try:
            verify_signature(ep.public_key, message, signature)
        except SignatureInvalidError:
            raise SignatureInvalidError(f"signature invalid (epoch {number})") from None
