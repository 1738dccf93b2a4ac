"""Audit fixtures: personas in Acme (Alice the analyst, Bob the reviewer), Charlie in Globex,
a housekeeper key valid now, and a poisoned store imported through the ledger's own path.

Embeddings use the deterministic HashingEmbedder (a test double, not a semantic model) so a
whole audit runs in about a second; the engine tests cover MiniLM.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from orgs.models import Membership, Organization, Role
from tests.audits.factories import PoisonedStore, poisoned_store_import

PASSWORD = "correct-horse-battery-staple"


@pytest.fixture(autouse=True)
def _audit_test_settings(settings):
    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    from audits import services
    from ledger.embedding_store import index_invalidate

    # Per-process caches are keyed by primary keys, which a flushed test database reuses.
    index_invalidate()
    services._CONTEXTS.items.clear()
    yield
    index_invalidate()
    services._CONTEXTS.items.clear()


@pytest.fixture(autouse=True)
def _eager_celery():
    from memaudit_site.celery import app

    previous = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def _member(org, username: str, role: str):
    user = get_user_model().objects.create_user(username=username, email=f"{username}@example.com",
                                                password=PASSWORD)
    Membership.objects.create(organization=org, user=user, role=role)
    return user


@pytest.fixture
def acme(db) -> Organization:
    return Organization.objects.create(name="Acme", slug="acme")


@pytest.fixture
def globex(db) -> Organization:
    return Organization.objects.create(name="Globex", slug="globex")


@pytest.fixture
def alice(acme):
    return _member(acme, "alice", Role.ANALYST)


@pytest.fixture
def bob(acme):
    return _member(acme, "bob", Role.REVIEWER)


@pytest.fixture
def dana(acme):
    return _member(acme, "dana", Role.ADMIN)


@pytest.fixture
def charlie(globex):
    return _member(globex, "charlie", Role.ADMIN)


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


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()
