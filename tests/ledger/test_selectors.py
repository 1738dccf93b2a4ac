"""Selectors select: a lookup outside the organization raises the model's DoesNotExist (never an
HTTP exception), and the request layer turns it into a 404 for pages and the API alike."""

from __future__ import annotations

import pytest
from django.http import Http404
from django.test import RequestFactory

from ledger import selectors, store_selectors
from ledger.core.entries import GENESIS
from ledger.models import ImportJob, Memory, Receipt, Store
from orgs.api import exception_handler
from orgs.models import Organization
from orgs.permissions import org_required

pytestmark = pytest.mark.django_db


def test_it_raises_does_not_exist_for_another_organizations_objects(memories, store):
    other = Organization.objects.create(name="Globex", slug="globex-sel")
    with pytest.raises(Store.DoesNotExist):
        store_selectors.store_get(organization=other, store_id=store.pk)
    with pytest.raises(Memory.DoesNotExist):
        store_selectors.memory_get(organization=other, memory_id=memories[0].pk)
    with pytest.raises(Receipt.DoesNotExist):
        store_selectors.receipt_get(organization=other, receipt_id=10**9)
    with pytest.raises(ImportJob.DoesNotExist):
        store_selectors.import_job_get(organization=other, job_id=10**9)
    assert store_selectors.store_get(organization=store.organization, store_id=store.pk) == store


def test_the_api_answers_does_not_exist_with_404():
    response = exception_handler(Store.DoesNotExist("no"), {"view": None})
    assert response.status_code == 404 and response.data == {"detail": "Not found."}


def test_an_org_page_answers_does_not_exist_with_404(memories, organization):
    @org_required()
    def page(request):
        return store_selectors.memory_get(organization=Organization(pk=10**9), memory_id=memories[0].pk)

    request = RequestFactory().get("/")
    request.user = type("U", (), {"is_authenticated": True})()
    request.membership = type("M", (), {"is_admin": True})()
    with pytest.raises(Http404):
        page(request)


def test_entries_come_back_as_the_signed_bodies(ledger, memories):
    me = selectors.memory_entries_get(Memory.objects.select_related("store").get(pk=memories[0].pk))
    assert me.genesis.kind == GENESIS and me.genesis.body["memory"] == memories[0].ledger_id
    assert me.stored_hashes[(GENESIS, 0)] == me.genesis.hash()
