from __future__ import annotations

import os

import pytest

# mem0 reads this when it is imported: no telemetry (and no network) from the tests.
os.environ["MEM0_TELEMETRY"] = "False"

from orgs.models import Role
from tests.conftest import _member
from tests.interchange.sources import Mem0Store, langgraph_json, langgraph_sqlite, mem0_store


@pytest.fixture
def hashing_embedder(settings):
    """The 384-wide hashing embedder instead of MiniLM (the pipeline without the model)."""
    from ledger.embedding_store import index_invalidate  # local: the app registry is ready only inside a test

    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    index_invalidate()
    yield
    index_invalidate()


@pytest.fixture
def ana(organization):
    return _member(organization, "ana", Role.ANALYST)


@pytest.fixture(scope="session")
def mem0_made(tmp_path_factory) -> Mem0Store:
    """One mem0 store for the session (loading its embedder takes a while on a small CPU)."""
    pytest.importorskip("mem0")
    return mem0_store(tmp_path_factory.mktemp("mem0"))


@pytest.fixture(scope="session")
def langgraph_dump() -> bytes:
    pytest.importorskip("langgraph")
    return langgraph_json()


@pytest.fixture
def langgraph_db(tmp_path):
    pytest.importorskip("langgraph.store.sqlite")
    return langgraph_sqlite(tmp_path / "store.db")
