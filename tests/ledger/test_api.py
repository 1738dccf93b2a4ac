"""Ledger API: stores, memories (list with filters, bulk append), memory detail with chains,
agent tokens, recall with receipts, outcomes; tenant scoping with personas (Charlie of
Globex sees nothing of Acme's) and per-store token scoping."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from ledger.agent_tokens import token_hash
from ledger.core.receipts import verify_receipt
from ledger.models import AgentToken, Memory, Outcome
from tests.ledger.recall_support import import_inline

pytestmark = pytest.mark.usefixtures("recall_settings")

EIFFEL = {"query": "When was the Eiffel Tower in Paris completed?", "k": 2}


def client_for(user=None, token: str | None = None) -> APIClient:
    c = APIClient()
    if user is not None:
        c.force_login(user)
    if token is not None:
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return c


@pytest.fixture
def token(facts, dana) -> str:
    r = client_for(dana).post(f"/api/v1/stores/{facts.pk}/tokens/", {"name": "support-bot"}, format="json")
    assert r.status_code == 201, r.content
    return r.json()["token"]


# --------------------------------------------------------------------------- stores


def test_members_list_their_stores_and_analysts_and_admins_create_them(store, alice, bob, dana):
    r = client_for(alice).get("/api/v1/stores/")
    assert r.status_code == 200 and [s["slug"] for s in r.json()] == ["main"]

    r = client_for(bob).post("/api/v1/stores/", {"name": "Agent A"}, format="json")
    assert r.status_code == 403

    r = client_for(alice).post("/api/v1/stores/", {"name": "Agent A"}, format="json")
    assert r.status_code == 201 and r.json()["slug"] == "agent-a"

    r = client_for(dana).post("/api/v1/stores/", {"name": "Agent B", "exclude_suspect": False}, format="json")
    assert r.status_code == 201 and r.json()["slug"] == "agent-b" and r.json()["exclude_suspect"] is False


def test_other_organizations_get_404_everywhere(facts, charlie):
    memory = Memory.objects.get(external_id="m1")
    c = client_for(charlie)

    assert c.get("/api/v1/stores/").json() == []
    for url in (f"/api/v1/stores/{facts.pk}/", f"/api/v1/stores/{facts.pk}/memories/", f"/api/v1/memories/{memory.pk}/"):
        assert c.get(url).status_code == 404, url
    assert c.post(f"/api/v1/stores/{facts.pk}/recall", EIFFEL, format="json").status_code == 404
    assert c.post(f"/api/v1/stores/{facts.pk}/memories/", [{"id": "x", "text": "y"}], format="json").status_code == 404
    assert c.post(f"/api/v1/stores/{facts.pk}/tokens/", {"name": "t"}, format="json").status_code == 404


def test_anonymous_requests_are_refused(facts):
    assert APIClient().get("/api/v1/stores/").status_code in (401, 403)
    assert APIClient().post(f"/api/v1/stores/{facts.pk}/recall", EIFFEL, format="json").status_code in (401, 403)


def test_store_detail_counts_signed_and_quarantined(facts, alice):
    r = client_for(alice).get(f"/api/v1/stores/{facts.pk}/")
    assert r.status_code == 200
    assert (r.json()["memory_count"], r.json()["signed"], r.json()["quarantined"]) == (8, 8, 0)


# --------------------------------------------------------------------------- memories


def test_memories_list_filters_by_state_weight_and_text(facts, alice, housekeeper):
    from ledger.services import label_append

    m2 = Memory.objects.get(external_id="m2")
    label_append(memory_id=m2.pk, label="poison_likely", reason="t", evidence={}, actor="user:bob")
    c = client_for(alice)
    url = f"/api/v1/stores/{facts.pk}/memories/"

    r = c.get(url)
    assert r.json()["count"] == 8 and r.json()["results"][0]["signed"] is True
    assert [m["external_id"] for m in c.get(url, {"state": "poison_likely"}).json()["results"]] == ["m2"]
    assert c.get(url, {"state": "none"}).json()["count"] == 7
    assert c.get(url, {"q": "eiffel"}).json()["results"][0]["external_id"] == "m1"
    assert c.get(url, {"weight_min": 1.5}).json()["count"] == 0
    assert c.get(url, {"weight_min": 0.5, "weight_max": 1.0}).json()["count"] == 8
    assert c.get(url, {"state": "nonsense"}).status_code == 400


def test_bulk_append_as_a_json_list_imports_and_signs(store, alice, housekeeper, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        r = client_for(alice).post(f"/api/v1/stores/{store.pk}/memories/",
                                   [{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta", "metadata": {"k": 1}}],
                                   format="json")
    assert r.status_code == 202 and r.json()["total"] == 2
    job = client_for(alice).get(f"/api/v1/imports/{r.json()['id']}/").json()
    assert (job["status"], job["done"]) == ("done", 2)
    assert Memory.objects.filter(store=store, chain_head__isnull=False).count() == 2


def test_bulk_append_rejects_a_bad_batch_whole_naming_line_and_field(store, alice):
    r = client_for(alice).post(f"/api/v1/stores/{store.pk}/memories/",
                               [{"id": "a", "text": "alpha"}, {"id": "b", "text": ""}], format="json")

    assert r.status_code == 400
    assert r.json()["errors"] == [{"file": "request.jsonl", "line": 2, "field": "text", "message": "must not be empty"}]
    assert "nothing was imported" in r.json()["detail"]
    assert not Memory.objects.exists()


def test_bulk_append_accepts_a_file_upload(store, alice, housekeeper, django_capture_on_commit_callbacks):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("memories.csv", b"id,text\nc1,first\nc2,second\n", content_type="text/csv")
    with django_capture_on_commit_callbacks(execute=True):
        r = client_for(alice).post(f"/api/v1/stores/{store.pk}/memories/", {"file": upload}, format="multipart")
    assert r.status_code == 202, r.content
    assert set(Memory.objects.values_list("external_id", flat=True)) == {"c1", "c2"}


def test_bulk_append_reports_duplicates_of_stored_ids(facts, alice):
    r = client_for(alice).post(f"/api/v1/stores/{facts.pk}/memories/", [{"id": "m1", "text": "again"}], format="json")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "id"
    assert "already in store" in r.json()["errors"][0]["message"]


def test_memory_detail_shows_both_chains_and_a_passing_verification(facts, alice, housekeeper):
    from ledger.services import label_append

    m1 = Memory.objects.get(external_id="m1")
    label_append(memory_id=m1.pk, label="poison_suspect", reason="looks planted", evidence={}, actor="user:alice")

    r = client_for(alice).get(f"/api/v1/memories/{m1.pk}/")

    body = r.json()
    assert r.status_code == 200 and body["ledger_id"] == "main/m1" and body["state"] == "poison_suspect"
    assert body["chains"]["genesis"]["weight_q"] == 1000
    assert [lab["label"] for lab in body["chains"]["labels"]] == ["poison_suspect"]
    assert body["verification"] == {"ok": True, "signed": True, "findings": []}


# --------------------------------------------------------------------------- tokens and recall


def test_a_token_is_shown_once_and_only_its_hash_is_kept(token, facts):
    row = AgentToken.objects.get()
    assert token.startswith("mat_") and row.token_hash == token_hash(token) and token not in row.token_hash
    assert row.store_id == facts.pk


def test_only_org_admins_mint_tokens(facts, alice):
    assert client_for(alice).post(f"/api/v1/stores/{facts.pk}/tokens/", {"name": "x"}, format="json").status_code == 403


def test_an_agent_recalls_with_its_token_and_gets_a_verifiable_receipt(token, facts):
    r = client_for(token=token).post(f"/api/v1/stores/{facts.pk}/recall", EIFFEL, format="json")

    assert r.status_code == 200, r.content
    body = r.json()
    assert body["results"][0]["external_id"] == "m1" and len(body["results"]) == 2
    key = client_for(token=token).get(f"/api/v1/receipts/{body['receipt_id']}/").json()["receipt_public_key"]
    verify_receipt(body["receipt"], bytes.fromhex(key))


def test_a_member_may_recall_with_a_session_and_the_slashed_url_works(facts, alice):
    r = client_for(alice).post(f"/api/v1/stores/{facts.pk}/recall/", EIFFEL, format="json")
    assert r.status_code == 200 and r.json()["results"][0]["external_id"] == "m1"


def test_a_token_of_store_a_cannot_recall_store_b_or_read_its_receipts(token, facts, alice, housekeeper):
    from ledger.services import store_create

    other = store_create(organization=facts.organization, name="B", slug="b")
    import_inline(other, [{"id": "b1", "text": "Eiffel Tower secrets"}])
    receipt_b = client_for(alice).post(f"/api/v1/stores/{other.pk}/recall", EIFFEL, format="json").json()["receipt_id"]
    agent = client_for(token=token)

    assert agent.post(f"/api/v1/stores/{other.pk}/recall", EIFFEL, format="json").status_code == 404
    assert agent.get(f"/api/v1/receipts/{receipt_b}/").status_code == 404
    assert agent.post(f"/api/v1/receipts/{receipt_b}/outcomes", {"memory": "b1", "reward": 1},
                      format="json").status_code == 404
    assert agent.get("/api/v1/stores/").status_code == 403  # a token is no org member


def test_a_revoked_or_unknown_token_is_refused(token, facts):
    from ledger.agent_tokens import agent_token_revoke

    assert client_for(token="mat_nope").post(f"/api/v1/stores/{facts.pk}/recall", EIFFEL,
                                             format="json").status_code == 401
    agent_token_revoke(token=AgentToken.objects.get())
    assert client_for(token=token).post(f"/api/v1/stores/{facts.pk}/recall", EIFFEL, format="json").status_code == 401


def test_recall_validates_its_input(token, facts):
    agent = client_for(token=token)
    assert agent.post(f"/api/v1/stores/{facts.pk}/recall", {"query": "", "k": 2}, format="json").status_code == 400
    assert agent.post(f"/api/v1/stores/{facts.pk}/recall", {"query": "x", "k": 0}, format="json").status_code == 400


def test_quarantined_memories_never_come_back_through_the_api(token, facts, housekeeper):
    from ledger.services import label_append

    m1 = Memory.objects.get(external_id="m1")
    label_append(memory_id=m1.pk, label="poison_likely", reason="t", evidence={}, actor="ingest-classifier@1.0")

    r = client_for(token=token).post(f"/api/v1/stores/{facts.pk}/recall", {**EIFFEL, "k": 8}, format="json")
    assert "m1" not in [x["external_id"] for x in r.json()["results"]] and len(r.json()["results"]) == 7


# --------------------------------------------------------------------------- outcomes


def test_outcomes_are_appended_and_move_the_weight(token, facts, housekeeper, django_capture_on_commit_callbacks):
    agent = client_for(token=token)
    receipt = agent.post(f"/api/v1/stores/{facts.pk}/recall", EIFFEL, format="json").json()["receipt_id"]

    with django_capture_on_commit_callbacks(execute=True):
        r = agent.post(f"/api/v1/receipts/{receipt}/outcomes", {"memory": "main/m1", "reward": 1}, format="json")
    assert r.status_code == 201 and r.json()["memory"] == "main/m1" and r.json()["reward"] == 1.0
    assert Memory.objects.get(external_id="m1").live_weight_q > 1000
    assert Outcome.objects.get().transition_id is not None

    detail = agent.get(f"/api/v1/receipts/{receipt}/").json()
    assert detail["outcomes"][0]["applied"] is True
    again = agent.post(f"/api/v1/receipts/{receipt}/outcomes", {"memory": "main/m1", "reward": 1}, format="json")
    assert again.status_code == 400
    bad = agent.post(f"/api/v1/receipts/{receipt}/outcomes/", {"memory": "m1", "reward": 2}, format="json")
    assert bad.status_code == 400 and "reward" in bad.json()


def test_the_openapi_schema_describes_the_ledger_endpoints(alice):
    r = client_for(alice).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    schema = r.json()
    for path in ("/api/v1/stores/", "/api/v1/stores/{store_id}/", "/api/v1/stores/{store_id}/memories/",
                 "/api/v1/stores/{store_id}/tokens/", "/api/v1/stores/{store_id}/recall", "/api/v1/memories/{memory_id}/",
                 "/api/v1/receipts/{receipt_id}/", "/api/v1/receipts/{receipt_id}/outcomes", "/api/v1/imports/{job_id}/"):
        assert path in schema["paths"], path
    assert schema["components"]["securitySchemes"]["agentToken"]["scheme"] == "bearer"
    recall = schema["paths"]["/api/v1/stores/{store_id}/recall"]["post"]
    assert recall["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("RecallInput")


