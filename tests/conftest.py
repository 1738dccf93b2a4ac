"""Shared fixtures.

Ledger: organization "acme", its store "main", an initialized housekeeper — stable names other
test modules rely on: ``organization``, ``store``, ``housekeeper``, ``memories``. Every test
gets its own housekeeper and receipt key directories under ``tmp_path``.

Personas follow healthchecks: Alice (analyst) and Bob (reviewer) work in Alice's organization
with Dana (org admin); Charlie is in another organization and must see nothing of theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models.signals import post_migrate

from ledger.core.canonical import now_utc
from ledger.core.keys import Epoch
from ledger.keystore import KeyDirectory
from orgs.models import Membership, Organization, Role

PASSWORD = "correct-horse-battery-staple"

# What a test must use to touch the database, and with it the broker's tasks.
_BACKEND_FIXTURES = {"db", "transactional_db", "live_server", "django_db_setup"}


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marker
def pytest_collection_modifyitems(items):
    """Mark `backend` every test that touches the database (its fixtures, `django_db`, `postgres`):
    the PostgreSQL + Redis pass of .ci/run runs `-m backend`; a test that touches neither (the
    engine's and the benches' tests, most of the suite's time) gives the same result on any
    backend and runs once, in `make test`."""
    for item in items:
        if (_BACKEND_FIXTURES & set(getattr(item, "fixturenames", ()))
                or item.get_closest_marker("django_db") or item.get_closest_marker("postgres")):
            item.add_marker(pytest.mark.backend)


@pytest.fixture(autouse=True)
def _ledger_key_dirs(settings, tmp_path):
    from ledger import signing

    settings.HOUSEKEEPER_KEY_DIR = tmp_path / "housekeeper-keys"
    settings.RECEIPT_KEY_DIR = tmp_path / "receipt-keys"
    # Online keys live in the process; their endorsements are append-only rows in production, but
    # a test's database is rolled back or flushed, so each test starts as a new process would.
    signing._online.clear()


def _clear_erase_permit(**kwargs) -> None:
    if connection.vendor == "sqlite":
        with connection.cursor() as c:
            c.execute("DELETE FROM ledger_erase_permit")


# The test runner flushes a transactional test's tables with DELETE on SQLite, which the ledger
# triggers refuse; it is allowed while ledger_erase_permit holds a row (ledger migration 0002).
# The permit is written just before the flush and removed by the post_migrate the flush sends.
post_migrate.connect(_clear_erase_permit, dispatch_uid="tests_clear_ledger_erase_permit")


@pytest.fixture(autouse=True)
def _ledger_erase_permit(request):
    transactional = "transactional_db" in request.fixturenames or "live_server" in request.fixturenames or any(
        m.kwargs.get("transaction") for m in request.node.iter_markers("django_db"))
    if not transactional:
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    if connection.vendor == "sqlite":
        with connection.cursor() as c:
            c.execute("INSERT OR IGNORE INTO ledger_erase_permit (id) VALUES (1)")


@pytest.fixture
def organization(db):
    from orgs.models import Organization

    return Organization.objects.create(name="Acme", slug="acme")


@pytest.fixture
def store(organization):
    from ledger.services import store_create

    return store_create(organization=organization, name="Main", slug="main")


@dataclass
class Housekeeper:
    organization: object
    keys: KeyDirectory
    epoch: Epoch
    now: datetime


@pytest.fixture
def housekeeper(organization, settings, monkeypatch) -> Housekeeper:
    """Holds the housekeeper role (MEMAUDIT_ROLE) for the test and initializes acme's epoch 1,
    valid from a minute ago for a year, so services called without ``now`` sign fine."""
    from ledger.services import housekeeper_init

    monkeypatch.setenv("MEMAUDIT_ROLE", "housekeeper")
    start = now_utc().replace(microsecond=0) - timedelta(minutes=1)
    epoch = housekeeper_init(organization=organization, now=start)
    return Housekeeper(organization, KeyDirectory(settings.HOUSEKEEPER_KEY_DIR), epoch, start)


@pytest.fixture
def ledger(memories, organization, store, housekeeper):
    """A small history to tamper with: acme/main m0 (2 transitions, 2 labels), m1 (1 transition),
    m2 (genesis only), m3 unsigned; an epoch rotation; two tree heads; an empty organization
    globex (a target for cross-tenant moves)."""
    from ledger import services
    from ledger.models import Store
    from ledger.verification import memory_verify_cache_clear

    m0, m1, m2 = memories
    services.transition_append(memory_id=m0.pk, valence_q=1000, evidence=["outcome:1"])
    services.label_append(memory_id=m0.pk, label="poison_suspect", reason="query pattern", evidence={"s": 1},
                          actor="user:alice")
    services.transition_append(memory_id=m1.pk, valence_q=-600, evidence=["outcome:2"])
    services.tree_head_issue(organization=organization)
    services.housekeeper_rotate(organization=organization, now=now_utc())
    services.transition_append(memory_id=m0.pk, valence_q=-200, evidence=["outcome:3"])
    services.label_append(memory_id=m0.pk, label="poison_refuted", reason="checked", evidence={}, actor="user:bob")
    services.tree_head_issue(organization=organization)
    [m3] = services.memories_create(store=store, records=[{"id": "m3", "text": "never signed"}])
    Store.objects.create(organization=organization, name="Other", slug="other")
    Organization.objects.create(name="Globex", slug="globex")
    memory_verify_cache_clear()
    return {"m0": m0, "m1": m1, "m2": m2, "m3": m3}


@pytest.fixture
def memories(store, housekeeper):
    """Three memories m0..m2 in acme/main with signed genesis entries."""
    from ledger.services import memories_create, memory_genesis_sign

    created = memories_create(store=store, records=[
        {"id": f"m{i}", "text": f"Memory number {i}.", "metadata": {"n": i}} for i in range(3)])
    memory_genesis_sign(memory_ids=[m.pk for m in created])
    for m in created:
        m.refresh_from_db()
    return created

@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _celery_eager(settings):
    """Tasks run inline in tests unless a test starts a real worker (browser, fault tiers)."""
    from memaudit_site.celery import app

    previous = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def _member(org: Organization, username: str, role: str):
    user = get_user_model().objects.create_user(username=username, email=f"{username}@example.com", password=PASSWORD)
    Membership.objects.create(organization=org, user=user, role=role)
    return user


@pytest.fixture
def org_a(db) -> Organization:
    return Organization.objects.create(name="Alice Corp", slug="alice-corp")


@pytest.fixture
def org_b(db) -> Organization:
    return Organization.objects.create(name="Charlie Ltd", slug="charlie-ltd")


@pytest.fixture
def alice(org_a):
    return _member(org_a, "alice", Role.ANALYST)


@pytest.fixture
def bob(org_a):
    return _member(org_a, "bob", Role.REVIEWER)


@pytest.fixture
def dana(org_a):
    return _member(org_a, "dana", Role.ADMIN)


@pytest.fixture
def charlie(org_b):
    return _member(org_b, "charlie", Role.ADMIN)
