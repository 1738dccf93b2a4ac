"""Key management: housekeeper epochs (init, rotate, revoke), receipt-key endorsements, and the
organization's key ring (EpochSet) the write path verifies against, cached by its marks."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from ledger.core.canonical import format_time, now_utc, parse_time
from ledger.core.errors import LedgerError
from ledger.core.keys import ONLINE, RECEIPT, Epoch, EpochSet, check_key_endorsement
from ledger.models import KeyEndorsement, KeyEpoch, Memory, ReceiptKey
from ledger.signing import (
    endorsement_generation,
    epoch_from_row,
    epoch_signer,
    epochs_for,
    key_directory,
    key_endorsement_from_row,
    key_endorsement_record,
    receipt_key_state,
    require_housekeeper,
)
from orgs.models import Organization
from orgs.services import activity_record

RECEIPT_KEY_SKEW = timedelta(seconds=60)


def _sync_epochs(organization: Organization) -> list[Epoch]:
    """Record the key directory's epochs (public halves) in KeyEpoch; revocations set once."""
    kd_epochs = key_directory().epochs(organization.slug)
    rows = {r.number: r for r in KeyEpoch.objects.filter(organization=organization)}
    for ep in kd_epochs:
        row = rows.get(ep.number)
        if row is None:
            KeyEpoch.objects.create(
                organization=organization, number=ep.number, public_key=ep.public_key, not_before=ep.not_before,
                not_after=ep.not_after, revoked_at=ep.revoked_at or "", endorsement=ep.endorsement,
            )
        elif bytes(row.public_key) != ep.public_key:
            raise ValidationError(f"epoch {ep.number} of {organization.slug} in the database has another key "
                                  "than the key directory; refusing to continue")
        elif ep.revoked_at and not row.revoked_at:
            KeyEpoch.objects.filter(pk=row.pk, revoked_at="").update(revoked_at=ep.revoked_at)
    return epochs_for(organization)


def housekeeper_init(*, organization: Organization, now: datetime | None = None) -> Epoch:
    """Create epoch 1 (the trust anchor) in the key directory and record its public half."""
    require_housekeeper("housekeeper init")
    kd = key_directory()
    with transaction.atomic():
        if KeyEpoch.objects.filter(organization=organization).exists():
            raise ValidationError(f"organization {organization.slug} already has key epochs; use rotate")
        if not kd.epochs(organization.slug):
            kd.init(organization.slug, now)
        return _sync_epochs(organization)[0]


def housekeeper_rotate(*, organization: Organization, now: datetime | None = None) -> Epoch:
    """Start a new epoch endorsed by the current one."""
    require_housekeeper("housekeeper rotate")
    with transaction.atomic():
        key_directory().rotate(organization.slug, now)
        return _sync_epochs(organization)[-1]


def housekeeper_revoke(*, organization: Organization, epoch: int, now: datetime | None = None) -> Epoch:
    """Revoke an epoch from ``now`` on: entries it signs at or after that time are refused."""
    require_housekeeper("housekeeper revoke")
    with transaction.atomic():
        key_directory().revoke(organization.slug, epoch, now)
        return next(e for e in _sync_epochs(organization) if e.number == epoch)


def receipt_key_endorse(*, organization: Organization, receipt_key_id: int, now: datetime | None = None):
    """Endorse a recorded receipt key with the current epoch key; returns the ``KeyEndorsement`` row.

    The window starts when the key was recorded, less ``RECEIPT_KEY_SKEW`` (receipts signed
    while the endorsement was on its way are covered) but never before the endorsing epoch, and lasts
    ``RECEIPT_KEY_VALIDITY_DAYS`` (never past the epoch). Idempotent while an endorsement is in
    force; a key with a revoked endorsement is never endorsed again.
    """
    require_housekeeper("endorsing a receipt key")
    now = now or now_utc()
    rk = ReceiptKey.objects.get(pk=receipt_key_id, organization=organization)
    existing = KeyEndorsement.objects.filter(organization=organization, purpose=RECEIPT, key_id=rk.key_id)
    if existing.exclude(revoked_at="").exists():
        raise ValidationError(f"receipt key {rk.key_id} was revoked; it is not endorsed again")
    if receipt_key_state(organization, rk.key_id, now=now) in ("endorsed", "pending") and existing.exists():
        return existing.order_by("-seq").first()
    signer = epoch_signer(organization, now=now)
    epoch = KeyEpoch.objects.get(organization=organization, number=signer.epoch)
    # A recall takes its time before it loads the key, so its first receipt may carry a time a
    # moment before the key was recorded: the window opens RECEIPT_KEY_SKEW earlier.
    start = max(rk.created_at - RECEIPT_KEY_SKEW, parse_time(epoch.not_before))
    end = min(now + timedelta(days=settings.RECEIPT_KEY_VALIDITY_DAYS), parse_time(epoch.not_after))
    if not start < end:
        raise ValidationError(f"receipt key {rk.key_id} cannot be endorsed: no time left in epoch {epoch.number}")
    row = key_endorsement_record(organization=organization, purpose=RECEIPT, public_key=bytes(rk.public_key),
                                 not_before=start, not_after=end, now=now, signer=signer)
    activity_record(organization=organization, verb="receipt_key.endorsed", actor_label="housekeeper",
                    target=f"receipt key {rk.key_id}", detail={"seq": row.seq, "epoch": row.epoch,
                                                               "not_after": row.not_after})
    return row


def receipt_key_revoke(*, organization: Organization, key_id: str, now: datetime | None = None) -> int:
    """Revoke a receipt key from ``now`` on (its receipts from before stay valid); returns how
    many endorsements were revoked. The next recall rotates to a new, newly endorsed key."""
    require_housekeeper("revoking a receipt key")
    at = format_time(now or now_utc())
    n = KeyEndorsement.objects.filter(organization=organization, purpose=RECEIPT, key_id=key_id,
                                      revoked_at="").update(revoked_at=at)
    if n:
        activity_record(organization=organization, verb="receipt_key.revoked", actor_label="housekeeper",
                        target=f"receipt key {key_id}", detail={"revoked_at": at})
    return n


def _epoch_set(organization_id: int, tenant: str) -> EpochSet:
    """Epochs and the online keys they endorsed (the signer this process uses is among them)."""
    epochs = EpochSet(epoch_from_row(r, tenant) for r in KeyEpoch.objects.filter(organization_id=organization_id))
    delegates = []
    for row in KeyEndorsement.objects.filter(organization_id=organization_id, purpose=ONLINE).order_by("seq"):
        e = key_endorsement_from_row(row, tenant)
        try:
            check_key_endorsement(e, epochs, tenant=tenant)
        except LedgerError:
            continue  # a bad endorsement vouches for nothing
        delegates.append(e)
    return EpochSet(epochs.by_number.values(), delegates=delegates)


# The KeyEpoch rows of an organization, summarized by values that change whenever the set does:
# a new epoch raises the count and the newest id (and brings a fresh random key, so ids reused
# after a rollback do not match), a revocation raises the revoked count and sets a revoked_at.
# They are read in the statement that locks the memories (:func:`_lock_memories`), so a cached
# EpochSet is only used while the rows it was built from are still the rows in the database.
_EPOCH_MARKS = {
    "epoch_n": "COUNT(*)",
    "epoch_max_id": "MAX(e.id)",
    "epoch_revoked_n": "SUM(CASE WHEN e.revoked_at <> '' THEN 1 ELSE 0 END)",
    "epoch_revoked_max": "MAX(e.revoked_at)",
}
_epoch_sets: dict[tuple, tuple[tuple, EpochSet]] = {}


def _epoch_set_of(memory: Memory) -> EpochSet:
    """The organization's EpochSet for a memory locked by :func:`_lock_memories` (cached by its marks)."""
    db = connections[DEFAULT_DB_ALIAS]  # the default connection: one lookup, not one per use
    tenant = memory.organization.slug
    key = (db.alias, db.settings_dict["NAME"], memory.organization_id, tenant)
    mark = (memory.epoch_mark, endorsement_generation())
    cached = _epoch_sets.get(key)
    if cached is not None and cached[0] == mark:
        return cached[1]
    epochs = _epoch_set(memory.organization_id, tenant)
    _epoch_sets[key] = (mark, epochs)
    return epochs
