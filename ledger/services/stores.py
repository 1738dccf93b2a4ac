"""Stores and (unsigned) memories: created here, signed later by the write path."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.dateparse import parse_datetime
from django.utils.text import slugify

from ledger.core.canonical import now_utc
from ledger.models import Memory, Store
from orgs.models import Organization


def store_create(*, organization: Organization, name: str, slug: str | None = None, **policy: Any) -> Store:
    store = Store(organization=organization, name=name, slug=slug or slugify(name)[:64], **policy)
    store.full_clean()
    store.save()
    return store


def _as_datetime(value: object, external_id: str) -> datetime:
    if value is None:
        return now_utc()
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        dt = parse_datetime(value.replace("Z", "+00:00"))
        if dt is None:
            raise ValidationError(f"memory {external_id!r}: created_at {value!r} is not an ISO 8601 time")
    else:
        raise ValidationError(f"memory {external_id!r}: created_at must be a time")
    if dt.tzinfo is None:
        raise ValidationError(f"memory {external_id!r}: created_at {value!r} has no time zone")
    return dt


def memories_create(*, store: Store, records: list[dict]) -> list[Memory]:
    """Insert unsigned memories (content hash computed here); all or none.

    Raises ValidationError naming the id of a duplicate (in the batch or already stored) or
    of a malformed record. The housekeeper signs their genesis later (:func:`memory_genesis_sign`).
    """
    seen: set[str] = set()
    objs = []
    for i, rec in enumerate(records):
        ext = rec.get("id")
        if not isinstance(ext, str) or not ext or len(ext) > 255:
            raise ValidationError(f"record {i}: id must be a non-empty string of at most 255 characters")
        if ext in seen:
            raise ValidationError(f"duplicate memory id {ext!r} in this batch")
        seen.add(ext)
        text = rec.get("text")
        if not isinstance(text, str) or not text:
            raise ValidationError(f"memory {ext!r}: text must be a non-empty string")
        metadata = rec.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ValidationError(f"memory {ext!r}: metadata must be an object")
        objs.append(Memory(
            organization_id=store.organization_id, store=store, external_id=ext, text=text, metadata=metadata,
            content_sha256=hashlib.sha256(text.encode("utf-8")).digest(),
            created_at=_as_datetime(rec.get("created_at"), ext),
        ))
    ids = list(seen)
    for start in range(0, len(ids), 900):
        clash = Memory.objects.filter(store=store, external_id__in=ids[start:start + 900]).values_list(
            "external_id", flat=True).first()
        if clash is not None:
            raise ValidationError(f"memory id {clash!r} already exists in store {store.slug}")
    try:
        with transaction.atomic():
            created = Memory.objects.bulk_create(objs, batch_size=500)
    except IntegrityError as exc:
        raise ValidationError(f"a memory id in this batch was stored concurrently: {exc}") from None
    if created and created[0].pk is None:  # backends without RETURNING
        by_ext = dict(Memory.objects.filter(store=store, external_id__in=ids).values_list("external_id", "pk"))
        for m in created:
            m.pk = by_ext[m.external_id]
    return created
