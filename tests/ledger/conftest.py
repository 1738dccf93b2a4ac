"""Fixtures for the recall-side tests (import, recall, API). Opt-in, so the ledger write-path
tests here are untouched: those modules say ``pytestmark = pytest.mark.usefixtures("recall_settings",
"eager_celery")``.

Personas follow healthchecks: in Acme (the shared ``organization``) Alice is an analyst and
Dana the org admin; Charlie is the admin of Globex and must see nothing of Acme's.
"""

from __future__ import annotations

import pytest

from orgs.models import Organization, Role
from tests.ledger.recall_support import FACTS, import_inline, member


@pytest.fixture
def recall_settings(settings):
    """HashingEmbedder (a test double) and fresh per-process recall caches."""
    from ledger.embedding_store import index_invalidate
    from ledger.recall import verification_cache_clear

    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Per-process caches are keyed by primary keys, which a rolled-back test database reuses.
    index_invalidate()
    verification_cache_clear()
    yield
    index_invalidate()
    verification_cache_clear()


@pytest.fixture
def eager_celery():
    from memaudit_site.celery import app

    previous = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


@pytest.fixture
def alice(organization):
    return member(organization, "alice", Role.ANALYST)


@pytest.fixture
def dana(organization):
    return member(organization, "dana", Role.ADMIN)


@pytest.fixture
def globex(db):
    return Organization.objects.create(name="Globex", slug="globex")


@pytest.fixture
def charlie(globex):
    return member(globex, "charlie", Role.ADMIN)


@pytest.fixture
def facts(store, housekeeper):
    """Acme's store "main" with eight signed, embedded facts."""
    job = import_inline(store, [{"id": i, "text": t} for i, t in FACTS])
    assert job.status == "done", job.errors
    return store
