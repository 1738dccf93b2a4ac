from __future__ import annotations

import os

import pytest

# mem0 reads this when it is imported: no telemetry (and no network) from the tests.
os.environ["MEM0_TELEMETRY"] = "False"

from tests.interchange.sources import Mem0Store, langgraph_json, langgraph_sqlite, mem0_store


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
