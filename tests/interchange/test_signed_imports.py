"""Foreign stores imported through the browser and the API become signed history that the
portable verifier accepts: mem0 (updates and deletes as signed entries), LangGraph, Letta."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from ledger.models import ImportJob, Memory, ProvenanceNode

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hashing_embedder")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def _verify(organization) -> list:
    from ledger.core.verify import verify_bundle
    from ledger.export import bundle_build
    from ledger.services import tree_head_issue

    tree_head_issue(organization=organization)
    return verify_bundle(bundle_build(organization))


def test_mem0_history_imports_through_the_api_as_signed_history_that_verifies(
        store, ana, housekeeper, mem0_made, django_capture_on_commit_callbacks):
    api = APIClient()
    api.force_login(ana)
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/v1/stores/{store.pk}/memories/",
                     {"file": _upload("history.db", mem0_made.history_db.read_bytes())}, format="multipart")
    assert r.status_code == 202, r.content
    job = ImportJob.objects.get(pk=r.json()["id"])
    assert (job.status, job.format, job.total, job.history_applied) == ("done", "mem0-history", 5, 3)
    assert job.format_message.startswith("this looks like mem0 history database")

    k, d = mem0_made.kept, mem0_made.deleted
    memories = {m.external_id: m for m in Memory.objects.filter(store=store)}
    assert all(m.is_signed for m in memories.values())
    # Each UPDATE: a signed provenance entry moving the old version to the floor, naming the new one.
    [v1_node] = ProvenanceNode.objects.filter(memory=memories[k])
    assert v1_node.evidence[0].startswith("mem0:update:") and f"superseded-by:{k}#v2" in v1_node.evidence
    assert v1_node.new_weight_q == 100 and memories[k].text == "Alice lives in Paris"
    [v2_node] = ProvenanceNode.objects.filter(memory=memories[f"{k}#v2"])
    assert f"superseded-by:{k}#v3" in v2_node.evidence
    assert not ProvenanceNode.objects.filter(memory=memories[f"{k}#v3"]).exists()
    assert memories[f"{k}#v3"].live_weight_q == 1000
    # The DELETE: a signed retirement; the text stays.
    [retired] = ProvenanceNode.objects.filter(memory=memories[d])
    assert retired.evidence[0].startswith("mem0:delete:") and "retired" in retired.evidence
    memories[d].refresh_from_db()
    assert (memories[d].text, memories[d].live_weight_q) == ("Alice is allergic to peanuts", 100)
    # Applying the history again appends nothing (a redelivered task, a re-sync).
    from ledger.imports import import_history_apply

    assert import_history_apply(job_id=job.pk) == 0
    assert _verify(store.organization) == []


def test_a_mem0_export_and_a_letta_agent_file_import_through_the_browser(store, ana, housekeeper, mem0_made,
                                                                           django_capture_on_commit_callbacks):
    page = Client()
    page.force_login(ana)
    form = page.get(f"/stores/{store.pk}/import/").content.decode()
    for title in ("mem0 export", "mem0 history database", "LangGraph store items", "Letta agent file"):
        assert title in form
    assert "CSV columns" in form
    with django_capture_on_commit_callbacks(execute=True):
        r1 = page.post(f"/stores/{store.pk}/import/", {"file": _upload("mem0.json", mem0_made.export)})
        r2 = page.post(f"/stores/{store.pk}/import/",
                       {"file": _upload("customer_service.af", (FIXTURES / "letta" / "customer_service.af").read_bytes())})
    assert r1.status_code == r2.status_code == 302
    jobs = list(ImportJob.objects.filter(store=store).order_by("pk"))
    assert [(j.format, j.status) for j in jobs] == [("mem0-export", "done"), ("letta-af", "done")]
    detail = page.get(r2["Location"]).content.decode()
    assert "this looks like Letta agent file" in detail.lower() or "This looks like Letta agent file" in detail
    assert Memory.objects.filter(store=store, chain_head__isnull=False).count() == 2 + jobs[1].total
    assert _verify(store.organization) == []


def test_a_langgraph_store_database_imports_through_the_api(store, ana, housekeeper, langgraph_db,
                                                            django_capture_on_commit_callbacks):
    api = APIClient()
    api.force_login(ana)
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/v1/stores/{store.pk}/memories/", {"file": _upload("store.db", langgraph_db.read_bytes())},
                     format="multipart")
    assert r.status_code == 202
    assert ImportJob.objects.get(pk=r.json()["id"]).status == "done"
    assert set(Memory.objects.filter(store=store).values_list("external_id", flat=True)) == {
        "memories.alice:k1", "memories.alice:k2", "memories.bob:k1"}
    formats = api.get("/api/v1/imports/formats/").json()
    assert {"langgraph-sqlite", "openai-chat"} <= {f["name"] for f in formats}


def test_an_unknown_file_is_refused_with_the_formats_tried(store, ana):
    api = APIClient()
    api.force_login(ana)
    r = api.post(f"/api/v1/stores/{store.pk}/memories/", {"file": _upload("notes.txt", b"just some notes\n")},
                 format="multipart")
    assert r.status_code == 400
    assert r.json()["errors"][0]["message"].startswith("no known format matched (tried: ")


def test_a_chat_log_uploads_as_incidents(ledger, ana):
    import json

    api = APIClient()
    api.force_login(ana)
    store = ledger["m0"].store
    chat = {"id": "conv-1", "messages": [
        {"role": "user", "content": "What is memory number 1?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "recall_memory", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(["m0", "m1"])},
        {"role": "assistant", "content": "It is a trick."}]}
    r = api.post("/api/v1/incidents/upload/", {"store": store.pk,
                                               "file": _upload("chat.jsonl", json.dumps(chat).encode())},
                 format="multipart")
    assert r.status_code == 201, r.content
    assert len(r.json()) == 1
    from audits.models import Incident

    got = Incident.objects.get(store=store, external_id="conv-1")
    assert (got.query, got.output, got.retrieved) == ("What is memory number 1?", "It is a trick.", ["m0", "m1"])
    page = Client()
    page.force_login(ana)
    listing = page.get("/incidents/").content.decode()
    assert "OpenAI Chat Completions message log" in listing and "OpenTelemetry GenAI spans" in listing


def test_a_large_mem0_export_is_streamed_on_the_worker_and_a_repeat_is_refused(
        store, ana, housekeeper, mem0_made, settings, django_capture_on_commit_callbacks):
    settings.IMPORT_INLINE_MAX_BYTES = 100  # everything counts as large here
    api = APIClient()
    api.force_login(ana)
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/v1/stores/{store.pk}/memories/", {"file": _upload("mem0.json", mem0_made.export)},
                     format="multipart")
    assert r.status_code == 202 and r.json()["status"] == "pending"
    job = ImportJob.objects.get(pk=r.json()["id"])
    assert (job.status, job.format, job.total, job.done, job.staged_path) == ("done", "mem0-export", 2, 2, "")
    assert set(Memory.objects.filter(store=store).values_list("external_id", flat=True)) == {
        mem0_made.kept, mem0_made.untouched}

    with django_capture_on_commit_callbacks(execute=True):
        again = api.post(f"/api/v1/stores/{store.pk}/memories/", {"file": _upload("mem0.json", mem0_made.export)},
                         format="multipart")
    job = ImportJob.objects.get(pk=again.json()["id"])
    assert job.status == "failed" and job.issue_count == 2
    assert all("already in store" in e["message"] for e in job.errors)
