"""Where the housekeeper's epoch keys live: a key directory (development) or a PKCS#11 token.

Both backends keep the tenant's public epoch records in ``<key dir>/<tenant>/epochs.json``
(public halves, validity, endorsements, revocations) and differ only in the private half:

* :class:`KeyDirectory` — a hex seed per epoch in ``epoch-<n>.key`` (mode 0600). Anyone who can
  read the file holds the key; fine for development and tests.
* :class:`Pkcs11KeyStore` — an Ed25519 key pair generated *on the token* (CKM_EC_EDWARDS_KEY_PAIR_GEN,
  curve 1.3.101.112) with ``CKA_EXTRACTABLE=false, CKA_SENSITIVE=true``, labelled
  ``memaudit:<tenant>:epoch-<n>``; signing is CKM_EDDSA on the token. The private key never
  exists outside the HSM (SoftHSM2 in CI, an HSM or a cloud KMS's PKCS#11 bridge in production).

``ledger.core.keys`` stays pure: it gets public keys and :class:`~ledger.core.keys.Signer`
objects from here and never touches a file or a token.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from ledger.core.canonical import TAG_EPOCH, entry_hash, format_time, now_utc, parse_time
from ledger.core.errors import EpochExpiredError, UnknownEpochError
from ledger.core.keys import (
    DEFAULT_VALIDITY,
    Ed25519Signer,
    Epoch,
    Signer,
    check_epoch_at,
    epoch_valid_at,
    generate_keypair,
)

# A tenant's key directory is named after its slug: only names that cannot leave ``path``.
_TENANT_DIR_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass
class KeyDirectory:
    """Epoch keys as files (mode 0600) under ``path/<tenant>/``; stdlib I/O only.

    Layout: ``epochs.json`` (public epoch records, the tenant's key history)
    and ``epoch-<n>.key`` (hex seed). Only the housekeeper process should be
    given this directory.
    """

    path: Path
    validity: timedelta = field(default=DEFAULT_VALIDITY)

    backend = "file"

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def describe(self) -> str:
        return f"key files in {self.path} (mode 0600, development)"

    # -- helpers
    def _tenant_dir(self, tenant: str) -> Path:
        if not _TENANT_DIR_RE.fullmatch(tenant):
            raise ValueError(f"tenant {tenant!r} is not a safe directory name")
        return self.path / tenant

    def _write_epochs(self, tenant: str, epochs: list[Epoch]) -> None:
        d = self._tenant_dir(tenant)
        tmp = d / "epochs.json.tmp"
        tmp.write_text(json.dumps([e.to_json() for e in epochs], indent=2) + "\n")
        os.replace(tmp, d / "epochs.json")

    def _write_seed(self, tenant: str, number: int, seed: bytes) -> None:
        p = self._tenant_dir(tenant) / f"epoch-{number}.key"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(seed.hex() + "\n")

    def _read_seed(self, tenant: str, number: int) -> bytes:
        return bytes.fromhex((self._tenant_dir(tenant) / f"epoch-{number}.key").read_text().strip())

    # -- the private half (what a hardware backend overrides)
    def _generate(self, tenant: str, number: int) -> bytes:
        """Create epoch ``number``'s private key where this backend keeps it; return the public key."""
        seed, pub = generate_keypair()
        self._write_seed(tenant, number, seed)
        return pub

    def epoch_signer(self, tenant: str, number: int) -> Signer:
        return Ed25519Signer(self._read_seed(tenant, number), number)

    # -- public API
    def epochs(self, tenant: str) -> list[Epoch]:
        p = self._tenant_dir(tenant) / "epochs.json"
        if not p.exists():
            return []
        return [Epoch.from_json(d) for d in json.loads(p.read_text())]

    def epochs_mtime(self, tenant: str) -> int | None:
        try:
            return (self._tenant_dir(tenant) / "epochs.json").stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def init(self, tenant: str, now: datetime | None = None) -> Epoch:
        """Create epoch 1 (the trust anchor) for a tenant with no keys yet."""
        d = self._tenant_dir(tenant)
        if self.epochs(tenant):
            raise FileExistsError(f"tenant {tenant!r} already has key epochs")
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        d.mkdir(mode=0o700, exist_ok=True)
        now = now or now_utc()
        pub = self._generate(tenant, 1)
        ep = Epoch(tenant, 1, pub, format_time(now), format_time(now + self.validity))
        self._write_epochs(tenant, [ep])
        return ep

    def rotate(self, tenant: str, now: datetime | None = None) -> Epoch:
        """Start epoch N+1 at ``now``, endorsed by epoch N's key (which must still be valid)."""
        epochs = self.epochs(tenant)
        if not epochs:
            raise UnknownEpochError(f"tenant {tenant!r} has no epochs; run init first")
        now = now or now_utc()
        prev = epochs[-1]
        check_epoch_at(prev, now)
        endorser = self.epoch_signer(tenant, prev.number)
        pub = self._generate(tenant, prev.number + 1)
        unsigned = Epoch(tenant, prev.number + 1, pub, format_time(now), format_time(now + self.validity))
        ep = replace(unsigned, endorsement=endorser.sign(entry_hash(TAG_EPOCH, unsigned.body())))
        self._write_epochs(tenant, epochs + [ep])
        return ep

    def revoke(self, tenant: str, epoch: int, now: datetime | None = None) -> Epoch:
        """Mark an epoch revoked from ``now`` on (an earlier revocation time is kept)."""
        epochs = self.epochs(tenant)
        for i, ep in enumerate(epochs):
            if ep.number == epoch:
                at = format_time(now or now_utc())
                if ep.revoked_at is not None and parse_time(ep.revoked_at) <= parse_time(at):
                    return ep
                epochs[i] = replace(ep, revoked_at=at)
                self._write_epochs(tenant, epochs)
                return epochs[i]
        raise UnknownEpochError(f"tenant {tenant!r} has no epoch {epoch}")

    def signer(self, tenant: str, now: datetime | None = None) -> Signer:
        """Signer of the newest epoch valid at ``now``."""
        now = now or now_utc()
        for ep in reversed(self.epochs(tenant)):
            if epoch_valid_at(ep, now):
                return self.epoch_signer(tenant, ep.number)
        raise EpochExpiredError(f"tenant {tenant!r} has no epoch valid at {format_time(now)}")


# --------------------------------------------------------------------------- PKCS#11

ED25519_OID = "1.3.101.112"


class Pkcs11Error(RuntimeError):
    """The PKCS#11 backend is misconfigured or the token refused (the message names which)."""


class Pkcs11Signer:
    """Signs with a non-extractable Ed25519 private key on a PKCS#11 token (CKM_EDDSA)."""

    def __init__(self, store: "Pkcs11KeyStore", label: str, epoch: int, public_key: bytes) -> None:
        self._store = store
        self._label = label
        self.epoch = epoch
        self.public_key = public_key

    def sign(self, message: bytes) -> bytes:
        return self._store._sign(self._label, message)


@dataclass
class Pkcs11KeyStore(KeyDirectory):
    """Epoch keys generated on and used inside a PKCS#11 token; public records as in :class:`KeyDirectory`.

    One session per process, opened on first use and guarded by a lock (a PKCS#11 session is
    not safe to share between threads at once).
    """

    module: str = ""
    token_label: str = ""
    pin: str = field(default="", repr=False)

    backend = "pkcs11"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.module or not self.token_label:
            raise Pkcs11Error("HOUSEKEEPER_SIGNER=pkcs11 needs PKCS11_MODULE and PKCS11_TOKEN_LABEL")
        self._lock = threading.Lock()
        self._session = None
        self._handles: dict[str, object] = {}

    def describe(self) -> str:
        return (f"PKCS#11 token '{self.token_label}' ({Path(self.module).name}): non-extractable Ed25519 keys, "
                "signing on the token")

    @staticmethod
    def key_label(tenant: str, number: int) -> str:
        return f"memaudit:{tenant}:epoch-{number}"

    def _open(self):
        if self._session is None:
            try:
                import pkcs11  # local: optional python-pkcs11
            except ImportError:
                raise Pkcs11Error("HOUSEKEEPER_SIGNER=pkcs11 needs the python-pkcs11 package") from None
            try:
                token = _pkcs11_lib(self.module).get_token(token_label=self.token_label)
                try:
                    self._session = token.open(user_pin=self.pin or None, rw=True)
                except pkcs11.exceptions.UserAlreadyLoggedIn:
                    # Login is per token and application: another session of this process has
                    # logged in already, and a new session shares that login.
                    self._session = token.open(rw=True)
            except (pkcs11.PKCS11Error, RuntimeError, OSError) as exc:
                # The exception class names the failure (no PIN or module path in it).
                raise Pkcs11Error(f"cannot open PKCS#11 token '{self.token_label}': {type(exc).__name__}") from None
        return self._session

    def _generate(self, tenant: str, number: int) -> bytes:
        from pkcs11 import Attribute, KeyType, Mechanism  # local: optional python-pkcs11
        from pkcs11.util.ec import encode_named_curve_parameters  # local: optional python-pkcs11

        label = self.key_label(tenant, number)
        with self._lock:
            session = self._open()
            if list(session.get_objects({Attribute.LABEL: label})):
                raise FileExistsError(f"the token already holds a key labelled {label}")
            pub, _ = session.generate_keypair(
                KeyType.EC_EDWARDS, mechanism=Mechanism.EC_EDWARDS_KEY_PAIR_GEN, store=True, label=label,
                public_template={Attribute.EC_PARAMS: encode_named_curve_parameters(ED25519_OID),
                                 Attribute.TOKEN: True, Attribute.VERIFY: True},
                private_template={Attribute.TOKEN: True, Attribute.PRIVATE: True, Attribute.SIGN: True,
                                  Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: False})
            return _ed25519_point(bytes(pub[Attribute.EC_POINT]))

    def _sign(self, label: str, message: bytes) -> bytes:
        from pkcs11 import Mechanism, ObjectClass  # local: optional python-pkcs11

        with self._lock:
            key = self._handles.get(label)
            if key is None:  # one object search per key, not per signature
                key = self._handles[label] = self._open().get_key(label=label, object_class=ObjectClass.PRIVATE_KEY)
            return bytes(key.sign(message, mechanism=Mechanism.EDDSA))

    def private_key_attributes(self, tenant: str, number: int) -> dict[str, bool]:
        """CKA_EXTRACTABLE / CKA_SENSITIVE of an epoch's private key, as the token reports them."""
        from pkcs11 import Attribute, ObjectClass  # local: optional python-pkcs11

        with self._lock:
            key = self._open().get_key(label=self.key_label(tenant, number), object_class=ObjectClass.PRIVATE_KEY)
            return {"extractable": bool(key[Attribute.EXTRACTABLE]), "sensitive": bool(key[Attribute.SENSITIVE])}

    def epoch_signer(self, tenant: str, number: int) -> Signer:
        ep = next((e for e in self.epochs(tenant) if e.number == number), None)
        if ep is None:
            raise UnknownEpochError(f"tenant {tenant!r} has no epoch {number}")
        return Pkcs11Signer(self, self.key_label(tenant, number), number, ep.public_key)


_libs: dict[str, object] = {}


def _pkcs11_lib(module: str):
    """The loaded PKCS#11 module (a module can be initialised once per process)."""
    import pkcs11  # local: optional python-pkcs11

    if module not in _libs:
        _libs[module] = pkcs11.lib(module)
    return _libs[module]


def _ed25519_point(ec_point: bytes) -> bytes:
    """The 32-byte public key from CKA_EC_POINT: a DER OCTET STRING (04 20 ...) or the raw 32 bytes."""
    if len(ec_point) == 34 and ec_point[:2] == b"\x04\x20":
        return ec_point[2:]
    if len(ec_point) == 32:
        return ec_point
    raise Pkcs11Error(f"the token returned an EC point of {len(ec_point)} bytes, not an Ed25519 key")
