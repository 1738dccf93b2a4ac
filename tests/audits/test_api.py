"""The audit API: same services and permissions as the pages; another org's objects are 404."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from audits.models import AuditRun, Incident, ReviewProposal

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(user) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c


def _upload(c, store, data: bytes, name="incidents.jsonl"):
    return c.post("/api/v1/incidents/upload/", {"store": store.pk, "file": SimpleUploadedFile(name, data)},
                  format="multipart")


def _audit(c, poisoned):
    r = _upload(c, poisoned.store, poisoned.incidents_jsonl())
    assert r.status_code == 201, r.data
    r = c.post("/api/v1/audits/create/", {"store": poisoned.store.pk, "incident_ids": [i["id"] for i in r.data],
                                          "settings": {"alpha": 0.6}}, format="json")
    assert r.status_code == 201, r.data
    return r.data["id"]


def test_alice_uploads_audits_and_reads_the_results(poisoned, alice):
    c = client_for(alice)
    run_id = _audit(c, poisoned)
    r = c.get(f"/api/v1/audits/{run_id}/progress/")
    assert r.data["status"] == "done" and r.data["percent"] == 100
    assert r.data["replays_done"] == r.data["replays_total"] > 0
    r = c.get(f"/api/v1/audits/{run_id}/suspects/?limit=50")
    assert r.status_code == 200
    batch = {s["external_id"] for s in r.data["suspects"] if s["in_batch"]}
    assert batch == poisoned.poisoned
    assert r.data["residual"]["harmful"] == 0 and "mcg" in r.data["baselines"]
    assert r.data["graph"]["nodes"] and "per_event" in r.data["suspects"][0]
    assert [a["id"] for a in c.get("/api/v1/audits/").data] == [run_id]
    assert c.get(f"/api/v1/audits/{run_id}/").data["status"] == "done"
    assert len(c.get(f"/api/v1/incidents/?store={poisoned.store.pk}").data) == len(poisoned.incidents)


def test_a_bad_upload_answers_400_with_file_line_field(poisoned, alice):
    r = _upload(client_for(alice), poisoned.store,
                b'{"id": "a", "query": "q", "output": "o", "retrieved": ["ghost"]}\nnot json\n')
    assert r.status_code == 400
    issues = {(i["line"], i["field"]) for i in r.data["issues"]}
    assert (2, None) in issues
    assert Incident.objects.count() == 0


def test_single_incident_and_settings_errors(poisoned, alice):
    c = client_for(alice)
    r = c.post("/api/v1/incidents/create/", {"store": poisoned.store.pk, "query": "q?", "output": "Evilton",
                                             "retrieved": ["c0_0"], "harm": {"type": "contains", "target": "x"}},
               format="json")
    assert r.status_code == 201 and r.data["retrieved"] == ["c0_0"]
    r = c.post("/api/v1/audits/create/", {"store": poisoned.store.pk, "incident_ids": [r.data["id"]],
                                          "settings": {"alpha": 7}}, format="json")
    assert r.status_code == 400 and "alpha" in r.data


def test_review_through_the_api(poisoned, alice, bob):
    run_id = _audit(client_for(alice), poisoned)
    r = client_for(alice).post(f"/api/v1/audits/{run_id}/propose/", {}, format="json")
    assert r.status_code == 201 and len(r.data) == len(poisoned.poisoned)
    ids = [p["id"] for p in r.data]
    c = client_for(bob)
    assert len(c.get("/api/v1/reviews/").data) == len(ids)
    r = c.post(f"/api/v1/reviews/{ids[0]}/approve/", {"reason": ""}, format="json")
    assert r.status_code == 400
    r = c.post(f"/api/v1/reviews/{ids[0]}/approve/", {"reason": "planted"}, format="json")
    assert r.status_code == 200 and r.data["status"] == "approved" and r.data["decided_by"] == "bob"
    r = c.post("/api/v1/reviews/refute/", {"ids": ids[1:], "reason": "clean"}, format="json")
    assert sorted(r.data["decided"]) == sorted(ids[1:])
    assert ReviewProposal.objects.filter(status="refuted").count() == len(ids) - 1


def test_roles_are_enforced(poisoned, alice, bob):
    run_id = _audit(client_for(alice), poisoned)
    assert _upload(client_for(bob), poisoned.store, poisoned.incidents_jsonl()).status_code == 403
    ids = [p["id"] for p in client_for(alice).post(f"/api/v1/audits/{run_id}/propose/", {}, format="json").data]
    r = client_for(alice).post(f"/api/v1/reviews/{ids[0]}/approve/", {"reason": "mine"}, format="json")
    assert r.status_code == 403


def test_charlie_gets_404_for_everything_of_acme(poisoned, alice, charlie):
    run_id = _audit(client_for(alice), poisoned)
    pid = client_for(alice).post(f"/api/v1/audits/{run_id}/propose/", {}, format="json").data[0]["id"]
    inc = Incident.objects.first()
    c = client_for(charlie)
    for url in (f"/api/v1/audits/{run_id}/", f"/api/v1/audits/{run_id}/progress/",
                f"/api/v1/audits/{run_id}/suspects/", f"/api/v1/incidents/{inc.pk}/"):
        assert c.get(url).status_code == 404, url
    assert c.post(f"/api/v1/reviews/{pid}/approve/", {"reason": "x"}, format="json").status_code == 404
    assert c.post(f"/api/v1/audits/{run_id}/propose/", {}, format="json").status_code == 404
    assert _upload(c, poisoned.store, poisoned.incidents_jsonl()).status_code == 404
    assert c.post("/api/v1/audits/create/", {"store": poisoned.store.pk, "incident_ids": [inc.pk]},
                  format="json").status_code == 404
    assert c.get("/api/v1/audits/").data == [] and c.get("/api/v1/reviews/").data == []
    r = c.post("/api/v1/reviews/approve/", {"ids": [pid], "reason": "x"}, format="json")
    assert r.data["decided"] == [] and AuditRun.objects.count() == 1


def test_the_schema_lists_the_audit_endpoints(alice):
    r = client_for(alice).get("/api/schema/?format=json")
    paths = json.loads(r.content)["paths"] if r["Content-Type"].startswith("application/json") else r.data["paths"]
    for p in ("/api/v1/audits/create/", "/api/v1/audits/{audit_run_id}/suspects/",
              "/api/v1/reviews/{proposal_id}/approve/", "/api/v1/incidents/upload/"):
        assert p in paths
