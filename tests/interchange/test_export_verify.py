"""Issue 14, "their histories verify with the portable verifier": a mem0 store written by the
real ``mem0ai`` (with an update and a delete), a LangGraph SqliteStore and a published Letta agent
file are imported through the API, the organization's bundle is exported with ``manage.py
ledger_export`` and checked by ``python -m ledger.core.verify`` in a separate process, as an
outside auditor would (.ci/run does the same with the ``memaudit-verify`` wheel)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from ledger.models import ImportJob, Memory
from tests.interchange.test_signed_imports import FIXTURES, _upload

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hashing_embedder")]
ROOT = Path(__file__).resolve().parents[2]


def _verify(bundle: Path, anchor: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger.core.verify", "bundle", str(bundle), "--anchor", anchor],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_three_foreign_stores_import_and_their_exported_histories_verify(
        store, ana, housekeeper, mem0_made, langgraph_db, tmp_path, django_capture_on_commit_callbacks):
    api = APIClient()
    api.force_login(ana)
    uploads = [("history.db", mem0_made.history_db.read_bytes()), ("store.db", langgraph_db.read_bytes()),
               ("customer_service.af", (FIXTURES / "letta" / "customer_service.af").read_bytes())]
    for name, data in uploads:
        with django_capture_on_commit_callbacks(execute=True):
            r = api.post(f"/api/v1/stores/{store.pk}/memories/", {"file": _upload(name, data)}, format="multipart")
        assert r.status_code == 202, r.content
    jobs = ImportJob.objects.filter(store=store).order_by("pk")
    assert [(j.format, j.status) for j in jobs] == [("mem0-history", "done"), ("langgraph-sqlite", "done"),
                                                    ("letta-af", "done")]
    assert jobs[0].history_applied == 3  # mem0's two updates and one delete, signed
    assert not Memory.objects.filter(store=store, chain_head__isnull=True).exists()

    bundle = tmp_path / "bundle.json"
    call_command("ledger_export", org=store.organization.slug, out=str(bundle), tree_head=True)
    doc = json.loads(bundle.read_text())
    assert len(doc["memories"]) == Memory.objects.filter(store=store).count()
    assert any(m["provenance"] for m in doc["memories"])  # the history is in the bundle
    anchor = doc["epochs"][0]["public_key"]
    check = _verify(bundle, anchor)
    assert check.returncode == 0, check.stdout + check.stderr

    # The same check refuses the bundle once one memory's history is rewritten.
    victim = next(m for m in doc["memories"] if m["provenance"])
    victim["provenance"][0]["body"]["evidence"] = ["rewritten"]
    bundle.write_text(json.dumps(doc))
    assert _verify(bundle, anchor).returncode == 1
