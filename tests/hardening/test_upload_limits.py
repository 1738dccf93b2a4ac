"""Uploads cannot be made to cost the server (issue 11, "Uploads").

Reproduced on main: 600 KB of ``{}`` lines stored 400,000 issues (a 56 MB response, 30 MB in the
database, a 35 s page), and 1 M tiny lines were parsed for 23 s inside the web request. Now an
import keeps at most ``MAX_KEPT_ISSUES`` issues plus their total, everywhere (API, page,
database), and a file over ``IMPORT_INLINE_MAX_BYTES`` is staged and parsed on a worker: the
request only answers with the job, whose page shows its progress.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from audits.models import Incident
from interchange.issues import MAX_KEPT_ISSUES
from ledger.models import ImportJob, Memory
from orgs.models import Role
from tests.conftest import _member

pytestmark = pytest.mark.django_db

EMPTY_LINES = b"{}\n" * 200_000  # 600 KB; every line misses id and text: 400,000 issues
EMPTY_ISSUES = 400_000


@pytest.fixture
def ana(organization):
    """An analyst of Acme (the shared organization whose housekeeper key the tests hold)."""
    return _member(organization, "ana", Role.ANALYST)


@pytest.fixture(autouse=True)
def _hashing_embedder(settings):
    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"


def _api(user) -> APIClient:
    c = APIClient()
    c.force_login(user)
    return c


def _page(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _file(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def test_the_api_keeps_at_most_100_issues_and_the_total(store, ana):
    r = _api(ana).post(f"/api/v1/stores/{store.pk}/memories/", {"file": _file("memories.jsonl", EMPTY_LINES)},
                       format="multipart")

    assert r.status_code == 400
    body = r.json()
    assert len(body["errors"]) == MAX_KEPT_ISSUES
    assert body["job"]["issue_count"] == EMPTY_ISSUES
    assert "400,000" in body["detail"]
    assert len(r.content) < 40_000  # was 56 MB
    job = ImportJob.objects.get(pk=body["job"]["id"])
    assert (len(job.errors), job.issue_count, job.status) == (MAX_KEPT_ISSUES, EMPTY_ISSUES, "failed")
    assert not Memory.objects.filter(store=store).exists()


def test_the_page_shows_at_most_100_issues_and_says_how_many_there_were(store, ana):
    r = _page(ana).post(f"/stores/{store.pk}/import/", {"file": _file("memories.jsonl", EMPTY_LINES)})

    assert r.status_code == 400
    html = r.content.decode()
    assert html.count('<tr class="issue">') == MAX_KEPT_ISSUES
    assert "400,000 problems" in html and "first 100" in html
    assert len(r.content) < 200_000


def test_a_file_over_the_inline_limit_is_parsed_on_a_worker_not_in_the_request(
        store, ana, housekeeper, settings, django_capture_on_commit_callbacks, monkeypatch):
    settings.IMPORT_INLINE_MAX_BYTES = 10_000
    records = [{"id": f"m{i}", "text": f"Fact number {i} about the office."} for i in range(400)]
    data = "\n".join(json.dumps(r) for r in records).encode()
    assert len(data) > settings.IMPORT_INLINE_MAX_BYTES

    import ledger.imports

    calls = []  # the format detection, counted where the import path calls it (whole-file or streamed)
    for name in ("memories_parse", "detect"):
        real = getattr(ledger.imports, name)
        monkeypatch.setattr(ledger.imports, name, lambda *a, _real=real, **k: calls.append(1) or _real(*a, **k))
    with django_capture_on_commit_callbacks(execute=False) as queued:
        r = _api(ana).post(f"/api/v1/stores/{store.pk}/memories/", {"file": _file("memories.jsonl", data)},
                           format="multipart")
    assert r.status_code == 202
    assert r.json()["status"] == "pending" and r.json()["total"] == 0
    assert calls == [] and not Memory.objects.filter(store=store).exists()  # nothing parsed in the request
    page = _page(ana).get(f"/imports/{r.json()['id']}/").content.decode()
    assert "queued for a worker" in page

    with django_capture_on_commit_callbacks(execute=True):
        for callback in queued:
            callback()  # the worker's turn (Celery runs eagerly in tests)
    job = ImportJob.objects.get(pk=r.json()["id"])
    assert calls == [1]
    assert (job.status, job.total, job.done, job.format) == ("done", 400, 400, "memaudit-jsonl")
    assert Memory.objects.filter(store=store, chain_head__isnull=False).count() == 400


def test_a_bad_file_over_the_inline_limit_fails_on_the_worker_with_the_capped_issues(
        store, ana, settings, django_capture_on_commit_callbacks):
    settings.IMPORT_INLINE_MAX_BYTES = 10_000
    with django_capture_on_commit_callbacks(execute=True):
        r = _api(ana).post(f"/api/v1/stores/{store.pk}/memories/", {"file": _file("memories.jsonl", EMPTY_LINES)},
                           format="multipart")
    assert r.status_code == 202
    job = ImportJob.objects.get(pk=r.json()["id"])
    assert (job.status, len(job.errors), job.issue_count) == ("failed", MAX_KEPT_ISSUES, EMPTY_ISSUES)
    assert not Memory.objects.filter(store=store).exists()


def test_incident_uploads_keep_at_most_100_issues_and_the_total(store, ana):
    r = _api(ana).post("/api/v1/incidents/upload/", {"store": store.pk, "file": _file("incidents.jsonl", EMPTY_LINES)},
                       format="multipart")

    assert r.status_code == 400
    body = r.json()
    assert len(body["issues"]) == MAX_KEPT_ISSUES
    assert body["issue_count"] > EMPTY_ISSUES  # id, query, output and retrieved missing on each line
    assert len(r.content) < 40_000
    page = _page(ana).post("/incidents/", {"store": store.pk, "file": _file("incidents.jsonl", EMPTY_LINES)})
    assert page.content.decode().count('<tr class="issue">') == MAX_KEPT_ISSUES
    assert not Incident.objects.exists()


def test_an_incident_file_over_the_inline_limit_is_imported_on_a_worker(
        ledger, ana, settings, django_capture_on_commit_callbacks):
    settings.IMPORT_INLINE_MAX_BYTES = 2_000
    store = ledger["m0"].store
    rows = [{"id": f"inc-{i}", "query": f"question {i}?", "output": "an answer", "retrieved": ["m0", "m1"]}
            for i in range(60)]
    data = "\n".join(json.dumps(r) for r in rows).encode()
    with django_capture_on_commit_callbacks(execute=False) as queued:
        r = _api(ana).post("/api/v1/incidents/upload/", {"store": store.pk, "file": _file("incidents.jsonl", data)},
                           format="multipart")
    assert r.status_code == 202
    assert r.json()["kind"] == "incidents" and r.json()["status"] == "pending"
    assert not Incident.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        for callback in queued:
            callback()
    job = ImportJob.objects.get(pk=r.json()["id"])
    assert (job.status, job.total, job.done) == ("done", 60, 60)
    assert Incident.objects.filter(store=store).count() == 60
