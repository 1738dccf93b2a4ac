"""Signed tree heads over an organization's log (and the same head as a C2SP checkpoint note)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from ledger import selectors
from ledger.core.canonical import format_time, now_utc
from ledger.core.checkpoint import Checkpoint, checkpoint_origin, sign_checkpoint
from ledger.core.errors import ChainBrokenError, LedgerError
from ledger.core.merkle import root
from ledger.core.tree_heads import sign_tree_head, verify_tree_head
from ledger.models import KeyEpoch, LogLeaf, TreeHead
from ledger.services.sql import _lock_log
from ledger.services.writes import EntryRejected
from ledger.signing import epoch_set_for, epoch_signer, housekeeper_signer, require_housekeeper
from orgs.models import Organization

logger = logging.getLogger(__name__)


def tree_head_issue(*, organization: Organization, now: datetime | None = None) -> TreeHead:
    """Sign a tree head over the organization's log; returns the latest one if the size is unchanged."""
    require_housekeeper("issuing tree heads")
    now = now or now_utc()
    with transaction.atomic():
        _lock_log(organization.pk)
        # The signer first: a new online key's endorsement is a leaf, and it must be in this head.
        signer = housekeeper_signer(organization, now=now)
        rows = list(LogLeaf.objects.filter(organization=organization).order_by("index")
                    .values_list("index", "leaf_hash"))
        for i, (index, _) in enumerate(rows):
            if index != i:
                raise EntryRejected(f"log of {organization.slug} has a gap at index {i}; refusing to sign",
                                    cause=ChainBrokenError(f"gap at {i}"))
        last = selectors.tree_head_latest(organization)
        if last is not None and last.size == len(rows):
            return last
        if last is not None and last.size > len(rows):
            raise EntryRejected(f"log of {organization.slug} shrank below the last tree head ({last.size})",
                                cause=ChainBrokenError("log shrank"))
        r = root([bytes(h) for _, h in rows])
        sth = sign_tree_head(organization.slug, len(rows), r, format_time(now), signer)
        try:
            verify_tree_head(sth, tenant=organization.slug, epochs=epoch_set_for(organization), root=r)
        except LedgerError as exc:
            raise EntryRejected(f"tree head for {organization.slug} does not verify: {exc}", cause=exc) from None
        # The same head as a C2SP checkpoint note, signed now (the web process serving it holds no
        # key) by the epoch key itself, not the online key: witnesses and auditors pin one log key,
        # and an online key changes every few hours.
        epoch_key = epoch_signer(organization, now=now)
        note = sign_checkpoint(Checkpoint(checkpoint_origin_of(organization), sth.size, r),
                               public_key=epoch_key.public_key, sign=epoch_key.sign)
        return TreeHead.objects.create(organization=organization, size=sth.size, root=r, time=sth.body["time"],
                                       epoch=sth.body["epoch"], signature=sth.signature,
                                       checkpoint_signature=note.signatures[0].signature)


def checkpoint_origin_of(organization: Organization) -> str:
    """The C2SP checkpoint origin (and note key name) of the organization's log."""
    return checkpoint_origin(settings.CHECKPOINT_ORIGIN_PREFIX, organization.slug)


def tree_heads_issue_due(*, now: datetime | None = None) -> int:
    """Sign a tree head for every organization whose log grew past its latest one (the schedule).

    One organization's failure (no valid epoch, a gap in its log) is logged and does not stop
    the others. Returns how many tree heads were signed.
    """
    require_housekeeper("issuing tree heads")
    signed = 0
    # Per organization, each MAX read from the end of its unique (organization, index|size)
    # index: no scan of the whole log every minute.
    for organization in Organization.objects.filter(pk__in=KeyEpoch.objects.values("organization_id")).order_by("pk"):
        top = LogLeaf.objects.filter(organization=organization).aggregate(m=Max("index"))["m"]
        head = TreeHead.objects.filter(organization=organization).aggregate(m=Max("size"))["m"] or 0
        if top is None or top + 1 <= head:
            continue
        try:
            tree_head_issue(organization=organization, now=now)
            signed += 1
        except (EntryRejected, LedgerError, OSError) as exc:
            logger.error("scheduled tree head for %s failed: %s", organization.slug, exc)
    return signed
