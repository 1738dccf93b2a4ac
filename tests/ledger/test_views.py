"""The ledger pages through Django's test client: stores, import (report and progress), the
memory browser and detail, the ledger page (verify, tree heads, export) and the keys page;
the right role gets 200, the wrong one 403, another organization 404."""

# The personas and the poisoned store are tests/audits' fixtures, imported by name; test
# parameters then "redefine" them, which is how pytest fixtures work.
# ruff: noqa: F811

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ledger.core.verify import Finding, verify_bundle
from ledger.models import ImportJob, Memory, Store, TreeHead
from tests.audits.conftest import (  # noqa: F401  (fixtures: the personas' orgs, keys, a poisoned store)
    _audit_test_settings,
    acme,
    globex,
    globex_store,
    housekeeping,
    jsonl,
    org_a,
    org_b,
    poisoned,
)

pytestmark = pytest.mark.django_db


def _upload(data: bytes, name: str = "memories.jsonl"):
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


# ----------------------------------------------------------------------------- stores


def test_a_member_sees_the_stores(client, bob, poisoned):
    client.force_login(bob)
    r = client.get("/stores/")
    assert r.status_code == 200 and b"Main" in r.content
    assert b'id="store-create"' not in r.content  # reviewers do not create stores


def test_an_analyst_creates_a_store_and_lands_on_its_import_page(client, alice):
    client.force_login(alice)
    r = client.post("/stores/", {"name": "Support bot", "slug": "", "exclude_suspect": "on"})
    store = Store.objects.get(name="Support bot")
    assert r.status_code == 302 and r["Location"] == f"/stores/{store.pk}/import/"
    assert store.slug == "support-bot" and store.exclude_suspect


def test_a_duplicate_store_slug_is_a_field_error(client, alice, poisoned):
    client.force_login(alice)
    r = client.post("/stores/", {"name": "Main again", "slug": "main"})
    assert r.status_code == 400
    assert Store.objects.filter(slug="main").count() == 1


def test_a_reviewer_cannot_create_a_store(client, bob):
    client.force_login(bob)
    assert client.post("/stores/", {"name": "Nope"}).status_code == 403
    assert not Store.objects.filter(name="Nope").exists()


def test_another_organizations_store_memory_and_import_are_not_found(client, charlie, poisoned):
    client.force_login(charlie)
    store = poisoned.store
    memory = Memory.objects.filter(store=store).first()
    job = ImportJob.objects.filter(store=store).first()
    assert client.get(f"/stores/{store.pk}/").status_code == 404
    assert client.get(f"/stores/{store.pk}/import/").status_code == 404
    assert client.get(f"/memories/{memory.pk}/").status_code == 404
    assert client.get(f"/imports/{job.pk}/").status_code == 404
    assert client.get(f"/imports/{job.pk}/progress/").status_code == 404


# ----------------------------------------------------------------------------- browser


def test_the_memory_browser_searches_and_filters(client, alice, poisoned):
    client.force_login(alice)
    total = Memory.objects.filter(store=poisoned.store).count()
    r = client.get(f"/stores/{poisoned.store.pk}/")
    assert r.status_code == 200 and f"{total} memories".encode() in r.content
    r = client.get(f"/stores/{poisoned.store.pk}/", {"q": "Evilton"})
    assert f"{len(poisoned.poisoned)} memories".encode() in r.content
    r = client.get(f"/stores/{poisoned.store.pk}/", {"state": "poison_likely", "weight_min": "0.5"})
    assert r.status_code == 200
    r = client.get(f"/stores/{poisoned.store.pk}/", {"weight_min": "2", "weight_max": "1"})
    assert b"must be at least the minimum weight" in r.content


def test_the_memory_browser_paginates(client, alice, poisoned):
    client.force_login(alice)
    r = client.get(f"/stores/{poisoned.store.pk}/", {"page": 2})
    assert r.status_code == 200 and b"page 2 of" in r.content and b"Previous" in r.content


def test_the_memory_page_shows_text_chains_timeline_and_a_live_verified_badge(client, alice, poisoned):
    client.force_login(alice)
    m = Memory.objects.filter(store=poisoned.store).first()
    r = client.get(f"/memories/{m.pk}/")
    body = r.content.decode()
    assert r.status_code == 200
    # One signed weight (genesis): a step list, not a one-dot chart (issue 15).
    assert "✓ Verified" in body and 'id="weight-steps"' in body and 'id="provenance-timeline"' in body
    assert "#0 genesis" in body and 'id="label-timeline"' in body
    assert "plotly.min.js" in body


def test_a_memory_that_fails_verification_shows_broken_with_the_reason(client, alice, poisoned, monkeypatch):
    from ledger import verification

    monkeypatch.setattr(verification, "memory_verify", lambda memory, cached=True: [
        Finding(f"memory={memory.ledger_id}", "label seq=0", "signature does not verify", "SignatureInvalidError")])
    client.force_login(alice)
    m = Memory.objects.filter(store=poisoned.store).first()
    body = client.get(f"/memories/{m.pk}/").content.decode()
    assert "✗ Broken" in body and "signature does not verify" in body and "SignatureInvalidError" in body


# ----------------------------------------------------------------------------- import


def test_an_import_runs_and_its_page_shows_the_progress(client, alice, housekeeping, acme,
                                                        django_capture_on_commit_callbacks):
    from ledger.services import store_create

    store = store_create(organization=acme, name="Fresh")
    client.force_login(alice)
    data = jsonl([{"id": f"f{i}", "text": f"Fact number {i} about the weather."} for i in range(5)])
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/stores/{store.pk}/import/", {"file": _upload(data)})
    job = ImportJob.objects.get(store=store)
    assert r.status_code == 302 and r["Location"] == f"/imports/{job.pk}/"
    partial = client.get(f"/imports/{job.pk}/progress/").content.decode()
    assert 'data-done="true"' in partial and "<strong>5</strong> of <strong>5</strong>" in partial
    assert Memory.objects.filter(store=store, chain_head__isnull=False).count() == 5


def test_a_bad_memories_file_is_reported_by_line_and_field_and_nothing_is_written(client, alice, poisoned):
    client.force_login(alice)
    before = Memory.objects.count()
    data = b'{"id": "n1", "text": "ok"}\n{"id": "n2"}\n{"id": "n1", "text": "dup"}\n'
    r = client.post(f"/stores/{poisoned.store.pk}/import/", {"file": _upload(data)})
    assert r.status_code == 400
    body = r.content.decode()
    assert 'id="validation-report"' in body
    assert '<td class="num">2</td><td class="mono">text</td>' in body
    assert Memory.objects.count() == before


def test_a_reviewer_cannot_import(client, bob, poisoned):
    client.force_login(bob)
    r = client.post(f"/stores/{poisoned.store.pk}/import/", {"file": _upload(b'{"id": "z", "text": "z"}\n')})
    assert r.status_code == 403


# ----------------------------------------------------------------------------- ledger and keys


def test_the_ledger_page_verifies_the_whole_organization(client, bob, poisoned):
    client.force_login(bob)
    assert client.get("/ledger/").status_code == 200
    r = client.post("/ledger/verify/")
    assert r.status_code == 302 and r["Location"] == "/ledger/"  # post/redirect/get (issue 15)
    r = client.get("/ledger/")
    assert r.status_code == 200 and b'id="verify-result"' in r.content and "✓ Verified".encode() in r.content
    assert b'id="verify-result"' not in client.get("/ledger/").content  # a reload does not re-run it


def test_an_org_admin_issues_a_tree_head(client, dana, poisoned):
    client.force_login(dana)
    r = client.post("/ledger/tree-head/", follow=True)
    assert r.status_code == 200
    sth = TreeHead.objects.get(organization=poisoned.store.organization)
    assert f'<td class="num">{sth.size}</td>'.encode() in r.content


def test_an_analyst_can_request_a_tree_head(client, alice, poisoned):
    """Issue 13: analysts saw every receipt cite the empty tree and could not ask for a tree head."""
    client.force_login(alice)
    assert client.post("/ledger/tree-head/").status_code == 302
    assert TreeHead.objects.exists()


def test_the_exported_bundle_verifies(client, alice, dana, poisoned, globex_store):
    client.force_login(dana)
    client.post("/ledger/tree-head/")
    client.force_login(alice)
    r = client.get("/ledger/export/")
    assert r.status_code == 200 and r["Content-Type"] == "application/json"
    assert "attachment" in r["Content-Disposition"]
    bundle = json.loads(r.content)
    assert bundle["tenant"] == "acme"
    assert verify_bundle(bundle) == []
    assert b"theirs/" not in r.content  # nothing of Globex's rides along


def test_an_org_admin_sees_the_key_epochs(client, dana, poisoned):
    client.force_login(dana)
    r = client.get("/keys/")
    body = r.content.decode()
    assert r.status_code == 200 and 'id="epoch-table"' in body
    assert "Private keys never enter the database" in body and "trust anchor" in body and ">active<" in body


@pytest.mark.parametrize("persona", ["alice", "bob"])
def test_only_org_admins_see_the_keys(client, persona, request, poisoned):
    client.force_login(request.getfixturevalue(persona))
    assert client.get("/keys/").status_code == 403
    assert client.post("/keys/rotate/").status_code == 403


def test_rotate_asks_the_housekeeper(client, dana, poisoned):
    from ledger.models import KeyEpoch

    client.force_login(dana)
    before = KeyEpoch.objects.filter(organization__memberships__user=dana).count()
    r = client.post("/keys/rotate/", follow=True)
    assert r.status_code == 200
    assert b"Rotation requested" in r.content
    # Eager Celery in tests: the housekeeper task ran and recorded the endorsed epoch.
    epochs = KeyEpoch.objects.filter(organization__memberships__user=dana).order_by("number")
    assert epochs.count() == before + 1 and epochs.last().endorsement is not None
