"""Fixtures for the recall-side tests (import, recall, API). Opt-in, so the ledger write-path
tests here are untouched: those modules say ``pytestmark = pytest.mark.usefixtures("recall_settings")``.

The shared personas (tests/conftest.py) live in Acme (the shared ``organization``) and Globex.
"""

from __future__ import annotations

import pytest

from ledger import classifier_service
from orgs.models import Organization
from tests.ledger.recall_support import FACTS, import_inline


@pytest.fixture
def recall_settings(settings):
    """HashingEmbedder (a test double) and fresh per-process recall caches."""
    from ledger.embedding_store import index_invalidate
    from ledger.recall import verification_cache_clear

    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    # Per-process caches are keyed by primary keys, which a rolled-back test database reuses.
    index_invalidate()
    verification_cache_clear()
    yield
    index_invalidate()
    verification_cache_clear()


@pytest.fixture
def org_a(organization):
    return organization


@pytest.fixture
def globex(db):
    return Organization.objects.create(name="Globex", slug="globex")


@pytest.fixture
def org_b(globex):
    return globex


@pytest.fixture
def facts(store, housekeeper):
    """Acme's store "main" with eight signed, embedded facts."""
    job = import_inline(store, [{"id": i, "text": t} for i, t in FACTS])
    assert job.status == "done", job.errors
    return store


@pytest.fixture
def classify_sizes(monkeypatch):
    """The number of passages each classifier call is handed."""
    sizes: list[int] = []
    real = classifier_service.classify

    def spy(passages, **kwargs):
        passages = list(passages)
        sizes.append(len(passages))
        return real(passages, **kwargs)

    monkeypatch.setattr(classifier_service, "classify", spy)
    return sizes
