"""Audit fixtures: personas in Acme (Alice the analyst, Bob the reviewer), Charlie in Globex,
a housekeeper key valid now, and a poisoned store imported through the ledger's own path.

Embeddings use the deterministic HashingEmbedder (a test double, not a semantic model) so a
whole audit runs in about a second; the engine tests cover MiniLM.
"""

from __future__ import annotations

import json

import pytest

from audits import services
from audits.models import AuditRun
from orgs.models import Organization
from tests.audits.corrections_factory import OutdatedStore, outdated_store_import
from tests.audits.factories import PoisonedStore, poisoned_store_import


@pytest.fixture(autouse=True)
def _audit_test_settings(settings):
    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    from audits import services
    from ledger.embedding_store import index_invalidate

    # Per-process caches are keyed by primary keys, which a flushed test database reuses.
    index_invalidate()
    services._CONTEXTS.items.clear()
    yield
    index_invalidate()
    services._CONTEXTS.items.clear()


@pytest.fixture
def acme(db) -> Organization:
    return Organization.objects.create(name="Acme", slug="acme")


@pytest.fixture
def globex(db) -> Organization:
    return Organization.objects.create(name="Globex", slug="globex")


# The shared personas (tests/conftest.py) live in org_a / org_b: here those are Acme and Globex.
@pytest.fixture
def org_a(acme) -> Organization:
    return acme


@pytest.fixture
def org_b(globex) -> Organization:
    return globex


@pytest.fixture
def housekeeping(monkeypatch, acme, globex):
    """This process holds the housekeeper role, with a key epoch valid now for both tenants."""
    from ledger.services import housekeeper_init

    monkeypatch.setenv("MEMAUDIT_ROLE", "housekeeper")
    housekeeper_init(organization=acme)
    housekeeper_init(organization=globex)


@pytest.fixture
def poisoned(acme, housekeeping) -> PoisonedStore:
    return poisoned_store_import(organization=acme, slug="main")


@pytest.fixture
def globex_store(globex, housekeeping) -> PoisonedStore:
    return poisoned_store_import(organization=globex, slug="theirs", seed=3)


@pytest.fixture
def outdated(acme, housekeeping) -> OutdatedStore:
    return outdated_store_import(organization=acme)


def audit_finished(scenario, user) -> AuditRun:
    """Import ``scenario``'s incidents and audit them (eager worker): the finished run."""
    ids = [i.pk for i in services.incidents_import(store=scenario.store, data=scenario.incidents_jsonl(),
                                                   filename="incidents.jsonl", user=user)]
    run = services.audit_run_create(store=scenario.store, incident_ids=ids, settings={}, user=user)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    return run


@pytest.fixture
def finished_run(poisoned, alice) -> AuditRun:
    return audit_finished(poisoned, alice)


@pytest.fixture
def corrected_run(outdated, alice) -> AuditRun:
    return audit_finished(outdated, alice)


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.fixture
def incidents(poisoned, alice):
    """The poisoned store's incidents, uploaded by Alice."""
    return services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                     filename="incidents.jsonl", user=alice)


@pytest.fixture
def run(poisoned, alice, incidents, django_capture_on_commit_callbacks) -> AuditRun:
    """A finished audit of every incident (Celery eager; on_commit callbacks run)."""
    with django_capture_on_commit_callbacks(execute=True):
        r = services.audit_run_create(store=poisoned.store, incident_ids=[i.pk for i in incidents], user=alice)
    r.refresh_from_db()
    assert r.status == AuditRun.Status.DONE, r.error
    return r
