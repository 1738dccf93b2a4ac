"""``manage.py sync_store``: new and changed records from a team's mem0 or LangGraph store
become signed entries; a second run over an unchanged store appends nothing."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from ledger.models import ImportJob, Memory, ProvenanceNode

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hashing_embedder")]


def _sync(store, *args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("sync_store", f"{store.organization.slug}/{store.slug}", *args, "--inline", stdout=out)
    return out.getvalue()


def test_syncing_a_mem0_store_twice_then_after_a_change(store, housekeeper, mem0_made, tmp_path):
    import shutil

    from mem0.memory.storage import SQLiteManager

    path = tmp_path / "history.db"  # a copy: the session's mem0 store stays as the other tests expect
    shutil.copy(mem0_made.history_db, path)
    assert "5 new memories, 3 history event(s)" in _sync(store, "--mem0-history", str(path))
    assert "up to date" in _sync(store, "--mem0-history", str(path))
    signed = ProvenanceNode.objects.filter(memory__store=store).count()
    assert signed == 3

    # mem0's own storage writes the next UPDATE, as Memory.update() does.
    history = SQLiteManager(str(path))
    history.add_history(mem0_made.untouched, "Alice prefers window seats", "Alice prefers aisle seats now", "UPDATE",
                        created_at="2026-01-01T10:00:00+00:00", updated_at="2026-01-02T10:00:00+00:00")
    history.close()
    out = _sync(store, "--mem0-history", str(path))
    assert "1 new memory" in out
    v2 = Memory.objects.get(store=store, external_id=f"{mem0_made.untouched}#v2")
    assert v2.text == "Alice prefers aisle seats now" and v2.is_signed
    [node] = ProvenanceNode.objects.filter(memory__external_id=mem0_made.untouched, memory__store=store)
    assert f"superseded-by:{mem0_made.untouched}#v2" in node.evidence
    assert "up to date" in _sync(store, "--mem0-history", str(path))
    assert ProvenanceNode.objects.filter(memory__store=store).count() == signed + 1


def test_syncing_a_langgraph_store_picks_up_a_changed_item_as_its_next_version(store, housekeeper, langgraph_db):
    from langgraph.store.sqlite import SqliteStore

    assert "3 new memories" in _sync(store, "--langgraph-sqlite", str(langgraph_db))
    assert "up to date" in _sync(store, "--langgraph-sqlite", str(langgraph_db))
    with SqliteStore.from_conn_string(str(langgraph_db)) as lg:
        lg.put(("memories", "alice"), "k1", {"text": "Alice prefers coffee"})
        lg.put(("memories", "carol"), "k9", {"text": "Carol is new"})
    _sync(store, "--langgraph-sqlite", str(langgraph_db))

    assert Memory.objects.get(store=store, external_id="memories.alice:k1#v2").text == "Alice prefers coffee"
    assert Memory.objects.filter(store=store, external_id="memories.carol:k9").exists()
    [node] = ProvenanceNode.objects.filter(memory__store=store, memory__external_id="memories.alice:k1")
    assert node.evidence[0].startswith("langgraph:update:") and node.new_weight_q == 100
    assert "up to date" in _sync(store, "--langgraph-sqlite", str(langgraph_db))
    assert ImportJob.objects.filter(store=store, status="done").count() == 2
