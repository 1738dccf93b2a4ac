"""Shared fixtures. Personas follow healthchecks: Alice (analyst) and Bob (reviewer) work in
Alice's organization with Dana (org admin); Charlie is in another organization and must see
nothing of theirs."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from orgs.models import Membership, Organization, Role

PASSWORD = "correct-horse-battery-staple"


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
