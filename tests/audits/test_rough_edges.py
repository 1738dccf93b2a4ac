"""Rough edges of issue 15: /incidents/new/ on GET, /favicon.ico, GETs that only read, the
upload page's format help, upload errors sorted by line, "Verify now" and "Issue tree head"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from audits import services
from audits.engine.scenario import Issue
from audits.engine.scenario import ValidationError as FileValidationError
from audits.models import ReviewProposal
from audits.tasks import review_queue_sync_task
from interchange.issues import issues_as_dicts
from ledger.models import Memory, TreeHead
from tests.audits.conftest import jsonl

pytestmark = pytest.mark.django_db


def test_get_on_the_new_incident_url_leads_to_the_form(client, alice, poisoned):
    client.force_login(alice)
    r = client.get("/incidents/new/")
    assert r.status_code == 302 and r["Location"] == "/incidents/#single-incident"
    assert 'id="single-incident"' in client.get("/incidents/").content.decode()


def test_the_favicon_is_linked_and_served(client, alice, poisoned):
    r = client.get("/favicon.ico")
    assert r.status_code == 301 and r["Location"].endswith("favicon.ico")
    icon = Path(settings.BASE_DIR, "static", "favicon.ico").read_bytes()
    assert icon[:4] == b"\x00\x00\x01\x00" and b"PNG" in icon[:40]  # an ICO holding a PNG
    client.force_login(alice)
    assert 'rel="icon"' in client.get("/").content.decode()


def _classifier_flag(poisoned) -> Memory:
    from ledger.services import label_append

    m = Memory.objects.filter(store=poisoned.store, epistemic_state="").order_by("pk").first()
    label_append(memory_id=m.pk, label="poison_likely", reason="shared-core group", evidence={},
                 actor="ingest-classifier@1.0")
    return m


def test_the_review_pages_and_api_only_read_and_the_beat_task_brings_flags_in(client, bob, poisoned):
    m = _classifier_flag(poisoned)
    client.force_login(bob)

    assert client.get("/review/").status_code == 200
    assert client.get("/review/pending/").status_code == 200
    assert client.get("/api/v1/reviews/").status_code == 200
    assert not ReviewProposal.objects.filter(memory=m).exists()  # a GET wrote nothing

    assert review_queue_sync_task() >= 1
    assert ReviewProposal.objects.get(memory=m).source == "classifier"
    assert m.external_id in client.get("/review/").content.decode()


def test_the_upload_page_documents_fields_harm_spec_size_limit_and_formats(client, alice, poisoned):
    client.force_login(alice)
    page = client.get("/incidents/").content.decode()
    help_ = page[page.index('id="incident-format-help"'):]
    help_ = help_[:help_.index("</details>")]
    for needle in ('"type": "contains"', '"type": "regex"', '"type": "similarity"', "retrieved",
                   f"up to {settings.MAX_UPLOAD_BYTES // (1024 * 1024)} MB", "Formats recognised", "no CSV"):
        assert needle in help_, needle


def test_upload_errors_are_listed_by_line(client, alice, poisoned, monkeypatch):
    issues = [Issue("incidents.jsonl", 9, "retrieved", "unknown memory"), Issue("incidents.jsonl", None, None, "x"),
              Issue("incidents.jsonl", 2, "id", "already exists"), Issue("incidents.jsonl", 5, "query", "missing")]

    def reject(**kw):
        raise FileValidationError(issues)

    monkeypatch.setattr(services, "incidents_import", reject)
    client.force_login(alice)
    r = client.post("/incidents/", {"store": poisoned.store.pk,
                                    "file": SimpleUploadedFile("incidents.jsonl", b"{}\n")})
    body = r.content.decode()
    assert r.status_code == 400
    lines = [row.split('<td class="num">')[1].split("<")[0] for row in body.split('<tr class="issue">')[1:]]
    assert lines == ["—", "2", "5", "9"]
    assert [r["line"] for r in issues_as_dicts(issues)] == [None, 2, 5, 9]


def test_an_unknown_retrieved_id_is_reported_in_the_same_pass_as_other_errors(client, alice, poisoned):
    good = poisoned.incidents[0]
    data = jsonl([{**good, "id": "inc-a", "retrieved": ["no-such-memory"]}, {**good, "id": "inc-b", "query": ""}])
    client.force_login(alice)
    body = client.post("/incidents/", {"store": poisoned.store.pk,
                                       "file": SimpleUploadedFile("incidents.jsonl", data)}).content.decode()
    assert "no-such-memory" in body and 'id="validation-report"' in body
    assert body.count('<tr class="issue">') == 2


def test_issue_tree_head_answers_in_place_and_the_card_shows_the_new_head(client, alice, poisoned):
    client.force_login(alice)
    r = client.post("/ledger/tree-head/", HTTP_X_REQUESTED_WITH="fetch")
    assert r.status_code == 202 and "Tree head requested" in json.loads(r.content)["message"]
    sth = TreeHead.objects.filter(organization=poisoned.store.organization).order_by("-size").first()
    assert sth is not None  # the (eager) housekeeper task signed it
    card = client.get("/ledger/tree-heads/").content.decode()
    assert f'data-newest="{sth.size}:{sth.time}"' in card and "Signed tree heads" in card
    page = client.get("/ledger/").content.decode()
    assert 'data-async' in page and 'data-refresh-url="/ledger/tree-heads/"' in page
    # Nothing new in the log: said at once, nothing queued.
    again = client.post("/ledger/tree-head/", HTTP_X_REQUESTED_WITH="fetch")
    assert again.status_code == 200 and json.loads(again.content)["current"] is True
    assert TreeHead.objects.filter(organization=poisoned.store.organization).count() == 1


def test_the_dashboard_without_audits_says_how_many_incidents_wait(client, alice, poisoned):
    client.force_login(alice)
    assert "Upload the incidents" in client.get("/").content.decode()
    services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(), filename="i.jsonl", user=alice)
    page = client.get("/").content.decode()
    empty = page[page.index('id="no-audits"'):]
    assert "Upload the incidents" not in empty[:400] and "incidents recorded" in empty[:400]
    assert 'href="/audits/new/"' in empty[:400]
