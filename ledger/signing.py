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
import logging
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db import connection, transaction
from django.db.models import Max
from django.utils.module_loading import import_string

from ledger import dispatch
from ledger.core.bundle import KEY_ENDORSEMENT
from ledger.core.canonical import format_time, now_utc, parse_time
from ledger.core.errors import LedgerError
from ledger.core.keys import (
    ONLINE,
    RECEIPT,
    Ed25519Key,
    Epoch,
    EpochSet,
    Signer,
    check_key_endorsement,
    endorsed_key_valid_at,
    epoch_valid_at,
    sign_key_endorsement,
)
from ledger.core.keys import KeyEndorsement as SignedKeyEndorsement
from ledger.core.merkle import leaf_hash
from ledger.keystore import KeyDirectory, Pkcs11KeyStore
from ledger.models import KeyEndorsement, KeyEpoch, LogLeaf, ReceiptKey
from orgs.models import Organization

logger = logging.getLogger(__name__)

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
        cache_key = ("file", str(path))
        store = _keystores.get(cache_key)
        if store is None:  # stateless: one per directory, not one per signature
            store = _keystores[cache_key] = KeyDirectory(path)
        return store
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


_factories: dict[str, Callable[..., Signer]] = {}


def _factory() -> Callable[..., Signer]:
    path = getattr(settings, "HOUSEKEEPER_SIGNER_FACTORY", "") or "ledger.signing.key_directory_signer"
    factory = _factories.get(path)
    if factory is None:
        factory = _factories[path] = import_string(path)
    return factory


def epoch_signer(organization, *, now: datetime | None = None) -> Signer:
    """The epoch key itself (key file or HSM); refuses outside the housekeeper role. Used for
    what only an epoch key may sign: endorsements of other keys."""
    require_housekeeper("signing with the housekeeper key")
    return _factory()(organization, now or now_utc())


def housekeeper_signer(organization, *, now: datetime | None = None) -> Signer:
    """The housekeeper's signer of ``organization`` at ``now`` (entries, tree heads); refuses
    outside the housekeeper role.

    With ``ONLINE_KEY_VALIDITY_HOURS`` > 0 (the default, 24) this is the short-lived *online*
    key: an Ed25519 key generated in this process's memory, never written anywhere, endorsed
    by the epoch key (one HSM signature per rotation instead of one per entry). Its signatures
    name the endorsing epoch; verifiers accept them through the endorsement (docs/bundle.md).
    """
    epoch_key = epoch_signer(organization, now=now)
    hours = getattr(settings, "ONLINE_KEY_VALIDITY_HOURS", 0)
    if not hours or hours <= 0:
        return epoch_key
    return _online_signer(organization, epoch_key, now or now_utc(), hours)


class OnlineSigner:
    """An in-memory Ed25519 key that signs for epoch ``epoch`` through its endorsement."""

    def __init__(self, key: Ed25519Key, epoch: int, endorsement_pk: int, not_before: datetime,
                 not_after: datetime) -> None:
        self._key = key
        self.public_key = key.public_key
        self.key_id = key.key_id
        self.epoch = epoch
        self.endorsement_pk = endorsement_pk
        self.not_before, self.not_after = not_before, not_after
        self.confirmed = False  # set once the transaction that recorded its endorsement commits

    def confirm(self) -> None:
        self.confirmed = True

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    def valid_at(self, t: datetime) -> bool:
        return self.not_before <= t < self.not_after


# Online keys of this process, per (database, organization); newest last. Never persisted.
_online: dict[tuple[str, int], list[OnlineSigner]] = {}
# Bumped whenever this process records an endorsement, so cached key rings (ledger.services)
# that predate it are rebuilt.
_endorsement_generation = 0


def endorsement_generation() -> int:
    return _endorsement_generation


def _online_signer(organization, epoch_key: Signer, now: datetime, hours: int) -> Signer:


    cache_key = (str(connection.settings_dict["NAME"]), organization.pk)
    keys = _online.setdefault(cache_key, [])
    t = parse_time(format_time(now))  # the time the entry will carry
    for k in reversed(keys):
        # An endorsement rolled back with a failed write must not leave this process signing with
        # a key nobody can verify: until its transaction has committed (``confirmed``), the row is
        # looked up each time; after that, never again (one round trip per append stays one).
        if k.epoch == epoch_key.epoch and k.valid_at(t) and (k.confirmed or KeyEndorsement.objects.filter(
                organization=organization, purpose=ONLINE, key_id=k.key_id, epoch=k.epoch, revoked_at="").exists()):
            return k
    epoch_row = KeyEpoch.objects.get(organization=organization, number=epoch_key.epoch)
    not_after = min(t + timedelta(hours=hours), parse_time(epoch_row.not_after))
    key = Ed25519Key.generate()
    row = key_endorsement_record(organization=organization, purpose=ONLINE, public_key=key.public_key,
                                 not_before=t, not_after=not_after, now=now, signer=epoch_key)
    signer = OnlineSigner(key, epoch_key.epoch, row.pk, t, not_after)
    transaction.on_commit(signer.confirm)
    keys.append(signer)
    del keys[:-8]  # a long-running worker keeps its few latest keys only
    return signer


def key_endorsement_record(*, organization, purpose: str, public_key: bytes, not_before: datetime,
                           not_after: datetime, now: datetime, signer: Signer):
    """Sign (with an epoch signer) and record the endorsement of ``public_key``; returns the row."""
    global _endorsement_generation


    require_housekeeper("endorsing a key")
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).first()  # serializes seq
        last = KeyEndorsement.objects.filter(organization=organization).aggregate(m=Max("seq"))["m"]
        seq = 0 if last is None else last + 1
        e = sign_key_endorsement(tenant=organization.slug, seq=seq, purpose=purpose, public_key=public_key,
                                 not_before=format_time(not_before), not_after=format_time(not_after),
                                 time=format_time(now), signer=signer)
        row = KeyEndorsement.objects.create(
            organization=organization, seq=seq, purpose=purpose, key_id=e.key_id, public_key=public_key,
            not_before=e.not_before, not_after=e.not_after, epoch=e.epoch, time=e.time, signature=e.signature)
        # Its own leaf of the organization's log (the organization row is locked: no gap, no race).
        last = LogLeaf.objects.filter(organization=organization).aggregate(m=Max("index"))["m"]
        LogLeaf.objects.create(organization=organization, index=0 if last is None else last + 1, memory=None,
                               kind=KEY_ENDORSEMENT, seq=seq, leaf_hash=leaf_hash(e.hash()))
    _endorsement_generation += 1
    return row


def key_endorsement_from_row(row, tenant: str):

    return SignedKeyEndorsement(tenant=tenant, seq=row.seq, purpose=row.purpose, public_key=bytes(row.public_key),
                          not_before=row.not_before, not_after=row.not_after, epoch=row.epoch, time=row.time,
                          signature=bytes(row.signature), revoked_at=row.revoked_at or None)


def key_endorsements_for(organization, *, purpose: str | None = None) -> list:
    """The organization's key endorsements (core objects), in seq order."""
    qs = KeyEndorsement.objects.filter(organization=organization)
    if purpose is not None:
        qs = qs.filter(purpose=purpose)
    return [key_endorsement_from_row(r, organization.slug) for r in qs.order_by("seq")]


def receipt_key_endorsement_for(organization, receipt_body: dict):
    """The endorsement of the key that signed ``receipt_body``, covering its time (or None)."""

    kid, t = receipt_body.get("key_id"), receipt_body.get("time")
    if not isinstance(kid, str):
        return None
    ring = EpochSet(epochs_for(organization))
    for e in reversed([e for e in key_endorsements_for(organization, purpose=RECEIPT) if e.key_id == kid]):
        if endorsed_key_valid_at(e, t, ring):
            return e
    return None


def epoch_set_for(organization) -> EpochSet:
    """The organization's key ring as recorded: epochs plus the online keys they endorsed
    (each endorsement checked against the epochs; one that does not verify is left out)."""
    epochs = EpochSet(epochs_for(organization))
    good = []
    for e in key_endorsements_for(organization, purpose=ONLINE):
        try:
            check_key_endorsement(e, epochs, tenant=organization.slug)
        except LedgerError:
            continue
        good.append(e)
    return EpochSet(epochs.by_number.values(), delegates=good)


def epochs_for(organization) -> list[Epoch]:
    """The organization's key epochs as recorded in the database (public halves only)."""

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
# Per (database, organization, key id): when its endorsement was last looked up; that is done at
# most every RECEIPT_ENDORSEMENT_RECHECK seconds, so a revocation is seen that quickly.
_receipt_checked: dict[tuple[str, int, str], float] = {}
RECEIPT_ENDORSEMENT_RECHECK = 30.0


def _receipt_key_path(organization) -> Path:
    return Path(settings.RECEIPT_KEY_DIR) / f"{organization.slug}.key"


def _receipt_key_write(path: Path, key: Ed25519Key, *, replace: bool) -> None:
    """Write the seed owner-only; ``replace`` swaps it in atomically (a rotation)."""
    target = path.with_suffix(".key.tmp") if replace else path
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key._sk.encode().hex() + "\n")
    if replace:
        os.replace(target, path)


def receipt_key_state(organization, key_id: str, *, now: datetime | None = None) -> str:
    """``endorsed`` (an unrevoked receipt endorsement covers ``now``), ``ended`` (every
    endorsement of the key is revoked or over: time for a new key) or ``pending`` (none yet)."""
    t = now or now_utc()
    rows = list(KeyEndorsement.objects.filter(organization=organization, purpose=RECEIPT, key_id=key_id)
                .values_list("not_before", "not_after", "revoked_at"))
    if not rows:
        return "pending"
    for nb, na, revoked in rows:
        if parse_time(nb) <= t < parse_time(na) and not revoked:
            return "endorsed"
    if any(not revoked and t < parse_time(nb) for nb, _, revoked in rows):
        return "pending"
    return "ended"


def receipt_signer(organization, *, now: datetime | None = None) -> Ed25519Key:
    """The organization's recall-receipt key (lower privilege than the housekeeper key).

    Created on first use as ``RECEIPT_KEY_DIR/<slug>.key`` (mode 0600); its public half is
    recorded in ``ReceiptKey``. A receipt key is trusted only through an endorsement by a
    housekeeper epoch key, which this process cannot sign: it asks the housekeeper
    (``receipt_key_endorse_task``), and the endorsement covers receipts from the key's creation.
    When the key's endorsement is revoked or over, a new key replaces it (a rotation).
    """



    base = Path(settings.RECEIPT_KEY_DIR)
    cache_key = (str(base), organization.slug)
    key = _receipt_keys.get(cache_key)
    if key is None:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = _receipt_key_path(organization)
        try:
            key = Ed25519Key(bytes.fromhex(path.read_text().strip()))
        except FileNotFoundError:
            key = Ed25519Key.generate()
            try:
                _receipt_key_write(path, key, replace=False)
            except FileExistsError:  # another process created it first: use theirs
                key = Ed25519Key(bytes.fromhex(path.read_text().strip()))
        _receipt_keys[cache_key] = key
    check_key = (str(connection.settings_dict["NAME"]), organization.pk, key.key_id)
    checked = _receipt_checked.get(check_key)
    if checked is not None and time.monotonic() - checked < RECEIPT_ENDORSEMENT_RECHECK:
        return key  # endorsed, or pending (its endorsement, when it comes, covers receipts from the key's creation)
    row, _ = ReceiptKey.objects.get_or_create(organization=organization, key_id=key.key_id,
                                              defaults={"public_key": key.public_key})
    state = receipt_key_state(organization, key.key_id, now=now)
    if state == "ended":  # revoked or expired: rotate to a fresh key, endorsed afresh
        key = Ed25519Key.generate()
        _receipt_key_write(_receipt_key_path(organization), key, replace=True)
        _receipt_keys[cache_key] = key
        row = ReceiptKey.objects.create(organization=organization, key_id=key.key_id, public_key=key.public_key)
        check_key = (check_key[0], organization.pk, key.key_id)
        state = "pending"
    if state == "pending":  # asked at most once a recheck period
        try:
            dispatch.receipt_key_endorse(organization.pk, row.pk)
        except Exception:  # noqa: BLE001 - eager mode runs it here; a recall never fails for it
            logger.exception("receipt key %s of %s: endorsement request failed", key.key_id, organization.slug)
    _receipt_checked[check_key] = time.monotonic()
    return key
