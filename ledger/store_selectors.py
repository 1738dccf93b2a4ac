"""Reads behind the store, memory, receipt and import endpoints (and the UI's browser/search).

Everything is scoped to an organization: an object of another organization is "not found" — the
model's ``DoesNotExist``, as in every selector; the request layer answers it with a 404
(``orgs.permissions.org_required`` for pages, ``orgs.api.exception_handler`` for the API).
"""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from ledger.models import ImportJob, Memory, Receipt, Store

MEMORY_STATES = ("none", "poison_suspect", "poison_likely", "poison_refuted")


def store_list(*, organization) -> QuerySet[Store]:
    return Store.objects.filter(organization=organization).annotate(memory_count=Count("memories")).order_by("name")


def store_get(*, organization, store_id: int) -> Store:
    return Store.objects.select_related("organization").get(organization=organization, pk=store_id)


def memory_search(*, store: Store, state: str | None = None, weight_min: float | None = None,
                  weight_max: float | None = None, q: str | None = None) -> QuerySet[Memory]:
    """Memories of a store filtered by epistemic state ("none" = unlabelled), live weight range
    (inclusive, in weight units) and a substring of the text or id."""
    qs = Memory.objects.filter(store=store)
    if state:
        qs = qs.filter(epistemic_state="" if state == "none" else state)
    if weight_min is not None:
        qs = qs.filter(live_weight_q__gte=round(weight_min * 1000))
    if weight_max is not None:
        qs = qs.filter(live_weight_q__lte=round(weight_max * 1000))
    if q:
        qs = qs.filter(Q(text__icontains=q) | Q(external_id__icontains=q))
    return qs.order_by("pk")


def memory_get(*, organization, memory_id: int) -> Memory:
    return Memory.objects.select_related("store", "organization").get(organization=organization, pk=memory_id)


def receipt_get(*, organization, receipt_id: int) -> Receipt:
    return Receipt.objects.select_related("store").get(organization=organization, pk=receipt_id)


def import_job_get(*, organization, job_id: int) -> ImportJob:
    return ImportJob.objects.get(organization=organization, pk=job_id)
