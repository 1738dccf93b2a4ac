"""Who may sign, and with which key.

"Only the housekeeper signs" (DESIGN section 3, "Keys and epochs") is enforced in two layers:

1. **Key store.** Private keys never enter the database. With ``HOUSEKEEPER_SIGNER=file``
   (development) they are files (mode 0600) under ``settings.HOUSEKEEPER_KEY_DIR``; with
   ``HOUSEKEEPER_SIGNER=pkcs11`` they are non-extractable Ed25519 keys on a PKCS#11 token and
   never exist outside it (``ledger.keystore``).
2. **Process role.** :func:`housekeeper_signer` refuses with :class:`NotHousekeeperError` unless
   the caller holds the housekeeper role, so a web request that calls a signing service
   directly (instead of queueing a ``ledger.tasks`` task) fails loudly even where the web
   process could read the key directory. The role is held

   * by a process started with ``MEMAUDIT_ROLE=housekeeper`` (a dedicated housekeeper worker:
     ``MEMAUDIT_ROLE=housekeeper celery -A memaudit_site worker -Q housekeeper``);
   * inside :func:`housekeeper_role`, which ``ledger.tasks`` enter (those tasks are routed to
     the ``housekeeper`` queue only, and run in-process only in eager mode) and which the
     operator's ``housekeeper`` management command enters;
   * in tests, through the ``housekeeper`` fixture (it sets ``MEMAUDIT_ROLE``).

   A web or audit process never enters it.

The signer source is pluggable: ``settings.HOUSEKEEPER_SIGNER_FACTORY`` is a dotted path to a
callable ``(organization, now) -> ledger.core.keys.Signer`` (a KMS/HSM adapter); the default,
:func:`key_directory_signer`, reads the key directory. Receipts are signed by a separate,
lower-privilege key (:func:`receipt_signer`) that any recall-serving process may hold.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.utils.module_loading import import_string

from ledger.core.canonical import now_utc
from ledger.core.keys import Ed25519Key, Epoch, Signer
from ledger.keystore import KeyDirectory, Pkcs11KeyStore

ROLE_ENV = "MEMAUDIT_ROLE"
HOUSEKEEPER = "housekeeper"

_role: contextvars.ContextVar[str | None] = contextvars.ContextVar("memaudit_role", default=None)


class NotHousekeeperError(PermissionDenied):
    """A signing operation was attempted outside the housekeeper role."""


def is_housekeeper() -> bool:
    return _role.get() == HOUSEKEEPER or os.environ.get(ROLE_ENV) == HOUSEKEEPER


def require_housekeeper(what: str = "this ledger write") -> None:
    if not is_housekeeper():
        raise NotHousekeeperError(
            f"{what} must run in the housekeeper (MEMAUDIT_ROLE={HOUSEKEEPER}); queue a ledger.tasks task instead"
        )


@contextlib.contextmanager
def housekeeper_role() -> Iterator[None]:
    """Hold the housekeeper role for the duration of the block (tasks, operator commands)."""
    token = _role.set(HOUSEKEEPER)
    try:
        yield
    finally:
        _role.reset(token)


_keystores: dict[tuple, KeyDirectory] = {}


def key_directory() -> KeyDirectory:
    """The configured epoch key store (``settings.HOUSEKEEPER_SIGNER``): ``file`` keeps seeds in
    ``HOUSEKEEPER_KEY_DIR``; ``pkcs11`` keeps non-extractable keys on the token named by
    ``PKCS11_MODULE`` / ``PKCS11_TOKEN_LABEL`` (PIN ``PKCS11_PIN``). Both keep the public epoch
    records in ``HOUSEKEEPER_KEY_DIR``."""
    backend = getattr(settings, "HOUSEKEEPER_SIGNER", "file") or "file"
    path = Path(settings.HOUSEKEEPER_KEY_DIR)
    if backend == "file":
        return KeyDirectory(path)
    if backend != "pkcs11":
        raise ImproperlyConfigured(f"HOUSEKEEPER_SIGNER must be 'file' or 'pkcs11', not {backend!r}")
    module, label = settings.PKCS11_MODULE, settings.PKCS11_TOKEN_LABEL
    cache_key = (str(path), module, label)
    store = _keystores.get(cache_key)
    if store is None:  # one token session per process, reused by every signature
        store = _keystores[cache_key] = Pkcs11KeyStore(path, module=module, token_label=label,
                                                       pin=settings.PKCS11_PIN)
    return store


def signer_backend_describe() -> dict[str, str]:
    """Which backend holds the epoch keys, for the keys page (no PIN, no key material)."""
    backend = getattr(settings, "HOUSEKEEPER_SIGNER", "file") or "file"
    if backend == "pkcs11":
        return {"backend": "pkcs11", "text": f"PKCS#11 token '{settings.PKCS11_TOKEN_LABEL}' "
                f"({Path(settings.PKCS11_MODULE).name}): non-extractable Ed25519 keys, signing on the token"}
    return {"backend": "file", "text": f"key files in {settings.HOUSEKEEPER_KEY_DIR} (mode 0600; development)"}


# A signer is cached per (key store, tenant, epochs.json mtime): loading a seed costs a file read
# and a key expansion (a token lookup for PKCS#11), which would otherwise dominate a single
# append. A rotation or revocation rewrites epochs.json, which changes the mtime and so drops it.
_signer_cache: dict[tuple, tuple[list[Epoch], dict[int, Signer]]] = {}


def key_directory_signer(organization, now: datetime) -> Signer:
    """Default factory: the newest epoch of ``organization`` valid at ``now``, from the key store."""
    from ledger.core.keys import epoch_valid_at

    kd = key_directory()
    tenant = organization.slug
    mtime = kd.epochs_mtime(tenant)
    if mtime is None:
        return kd.signer(tenant, now)  # raises: no epochs
    cache_key = (kd.backend, str(kd.path), tenant, mtime)
    cached = _signer_cache.get(cache_key)
    if cached is None:
        cached = (kd.epochs(tenant), {})
        _signer_cache.clear()
        _signer_cache[cache_key] = cached
    epochs, signers = cached
    for ep in reversed(epochs):
        if epoch_valid_at(ep, now):
            if ep.number not in signers:
                signers[ep.number] = kd.epoch_signer(tenant, ep.number)
            return signers[ep.number]
    return kd.signer(tenant, now)  # raises EpochExpiredError with the tenant named


def _factory() -> Callable[..., Signer]:
    path = getattr(settings, "HOUSEKEEPER_SIGNER_FACTORY", "") or "ledger.signing.key_directory_signer"
    return import_string(path)


def housekeeper_signer(organization, *, now: datetime | None = None) -> Signer:
    """The housekeeper signer of ``organization`` at ``now``; refuses outside the housekeeper role."""
    require_housekeeper("signing with the housekeeper key")
    return _factory()(organization, now or now_utc())


def epochs_for(organization) -> list[Epoch]:
    """The organization's key epochs as recorded in the database (public halves only)."""
    from ledger.models import KeyEpoch

    return [epoch_from_row(row, organization.slug) for row in KeyEpoch.objects.filter(organization=organization)
            .order_by("number")]


def epoch_from_row(row, tenant: str) -> Epoch:
    return Epoch(
        tenant=tenant,
        number=row.number,
        public_key=bytes(row.public_key),
        not_before=row.not_before,
        not_after=row.not_after,
        revoked_at=row.revoked_at or None,
        endorsement=bytes(row.endorsement) if row.endorsement is not None else None,
    )


_receipt_keys: dict[tuple[str, str], Ed25519Key] = {}


def receipt_signer(organization) -> Ed25519Key:
    """The organization's recall-receipt key (lower privilege than the housekeeper key).

    Created on first use as ``RECEIPT_KEY_DIR/<slug>.key`` (mode 0600); its public half is
    recorded in ``ReceiptKey`` so exported bundles can carry it.
    """
    from ledger.models import ReceiptKey

    base = Path(settings.RECEIPT_KEY_DIR)
    cache_key = (str(base), organization.slug)
    key = _receipt_keys.get(cache_key)
    if key is None:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = base / f"{organization.slug}.key"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            key = Ed25519Key(bytes.fromhex(path.read_text().strip()))
        else:
            key = Ed25519Key.generate()
            with os.fdopen(fd, "w") as f:
                f.write(key._sk.encode().hex() + "\n")
        _receipt_keys[cache_key] = key
    ReceiptKey.objects.get_or_create(organization=organization, key_id=key.key_id,
                                     defaults={"public_key": key.public_key})
    return key
