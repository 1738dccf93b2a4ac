"""Issue 14 in a real browser: a mem0 store written by the real ``mem0ai`` (its history database,
with two updates and a delete), a LangGraph SqliteStore and a published Letta agent file are
uploaded through the store's import page, imported by a real Celery worker, listed on the store
page, and the mem0 memory's page shows the signed update in its provenance chain."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import chrome, test_e2e
from tests.browser.test_e2e import PASSWORD, Browser

os.environ.setdefault("MEM0_TELEMETRY", "False")  # no telemetry (and no network) from mem0

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chrome.available(), reason="needs Debian's chromium and chromedriver"),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
worker = test_e2e.worker  # the same real worker on all three queues


@pytest.fixture
def analyst_store(transactional_db, settings):
    from django.contrib.auth import get_user_model

    from ledger.services import housekeeper_init, store_create
    from ledger.signing import housekeeper_role
    from orgs.models import Membership, Organization, Role

    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    org = Organization.objects.create(name="Acme Support", slug="acme")
    user = get_user_model().objects.create_user(username="alice", password=PASSWORD)
    Membership.objects.create(organization=org, user=user, role=Role.ANALYST)
    with housekeeper_role():
        housekeeper_init(organization=org)
    return store_create(organization=org, name="Imported agents")


@pytest.fixture
def foreign_files(tmp_path):
    pytest.importorskip("mem0")
    pytest.importorskip("langgraph.store.sqlite")
    from tests.interchange.sources import langgraph_sqlite, mem0_store

    made = mem0_store(tmp_path / "mem0")
    files = {"mem0-history": tmp_path / "history.db", "langgraph-sqlite": tmp_path / "store.db",
             "letta-af": tmp_path / "customer_service.af"}
    files["mem0-history"].write_bytes(made.history_db.read_bytes())
    langgraph_sqlite(files["langgraph-sqlite"])
    files["letta-af"].write_bytes((FIXTURES / "letta" / "customer_service.af").read_bytes())
    return made, files


def test_mem0_langgraph_and_letta_upload_through_the_import_page(live_server, worker, analyst_store,
                                                                 foreign_files, tmp_path):
    from ledger.models import ImportJob, Memory

    store = analyst_store
    made, files = foreign_files
    b = Browser(live_server.url)
    try:
        b.login("alice")
        for fmt, path in files.items():
            b.get(f"/stores/{store.pk}/import/")
            assert b.all(f"#format-{fmt}"), f"the import page lists {fmt}"
            b.upload("#import-form", path)
            b.wait(lambda d: "/imports/" in d.current_url, what=f"the import job page for {path.name}")
            b.wait(lambda d: b.css("#import-status").text == "done", timeout=180, what=f"{path.name} imported")
            assert b.css("#import-format").text.lower().startswith("this looks like")
        jobs = list(ImportJob.objects.filter(store=store).order_by("pk").values_list("format", "status"))
        assert jobs == [("mem0-history", "done"), ("langgraph-sqlite", "done"), ("letta-af", "done")]

        b.get(f"/stores/{store.pk}/")
        listed = b.css("#memory-table").text
        for text in ("Alice lives in Lyon, near the station", "Alice prefers tea"):
            assert text in listed

        first = Memory.objects.get(store=store, external_id=made.kept)
        b.get(f"/memories/{first.pk}/")
        chain = b.css("#provenance-timeline").text
        assert "mem0:update" in chain and f"superseded-by:{made.kept}#v2" in chain, chain
        assert "Verified" in b.css("#verify-badge").text
        assert not Memory.objects.filter(store=store, chain_head__isnull=True).exists()
    finally:
        b.driver.quit()
