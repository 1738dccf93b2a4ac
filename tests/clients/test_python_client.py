"""The drop-in client (clients/python) against the real API, in process (httpx's WSGI
transport, no network): writes become signed entries, every recall carries a receipt that
verifies, and a memory quarantined by review stops coming back to a LangGraph agent's store."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections

from audits import services
from ledger.agent_tokens import agent_token_create
from ledger.models import Memory, ProvenanceNode

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
pytest.importorskip("langgraph.store.base")

from memaudit_client import Mem0Facade, MemAuditClient  # noqa: E402
from memaudit_client.langgraph import MemAuditStore  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client_for():
    """A MemAuditClient whose requests run in this process against the test database."""
    # As Django's test client does: a request must not close the test's connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    transport = httpx.WSGITransport(app=get_wsgi_application())
    made = []

    def make(store) -> MemAuditClient:
        _, raw = agent_token_create(store=store, name="agent")
        c = MemAuditClient("http://testserver", store.pk, raw, transport=transport)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_a_langgraph_store_on_memaudit_stops_recalling_a_memory_quarantined_by_review(
        poisoned, finished_run, alice, bob, acme, client_for):
    store = MemAuditStore(client_for(poisoned.store))
    suspect = finished_run.suspects.filter(in_batch=True, memory__external_id__in=poisoned.poisoned).select_related(
        "memory").order_by("rank").first()
    query = next(i["query"] for i in poisoned.incidents if suspect.memory.external_id in i["retrieved"])

    before = store.search((), query=query, limit=5)
    assert suspect.memory.external_id in [it.key for it in before]
    kept = store.last_recall
    store.client.verify(kept)  # the signed receipt checks out

    [proposal] = services.proposals_create_from_run(audit_run=finished_run, user=alice,
                                                    memory_ids=[suspect.memory_id])
    services.proposal_approve(organization=acme, proposal_id=proposal.pk, user=bob, reason="MINJA poison")
    assert Memory.objects.get(pk=suspect.memory_id).epistemic_state == "poison_likely"

    after = store.search((), query=query, limit=5)
    assert suspect.memory.external_id not in [it.key for it in after]
    assert store.get((), suspect.memory.external_id) is None
    assert suspect.memory.external_id not in [m["external_id"] for m in store.client.memories(limit=1000)]
    assert len(store.client.receipts) == 2


def test_writes_through_the_store_are_signed_and_a_second_put_is_a_signed_provenance_entry(
        poisoned, client_for):
    store = MemAuditStore(client_for(poisoned.store))
    store.put(("notes", "bob"), "tea", {"text": "Bob drinks green tea every morning."})
    store.put(("notes", "bob"), "tea", {"text": "Bob switched to black tea."})

    v1 = Memory.objects.get(store=poisoned.store, external_id="notes.bob:tea")
    v2 = Memory.objects.get(store=poisoned.store, external_id="notes.bob:tea#v2")
    assert v1.is_signed and v2.is_signed
    [node] = ProvenanceNode.objects.filter(memory=v1)
    assert "superseded-by:notes.bob:tea#v2" in node.evidence and node.new_weight_q == 100
    assert store.get(("notes", "bob"), "tea").value == {"text": "Bob switched to black tea."}
    hits = store.search(("notes",), query="What tea does Bob drink?", limit=3)
    assert hits and hits[0].key == "tea"


def test_the_plain_client_and_the_mem0_facade(poisoned, client_for):
    client = client_for(poisoned.store)
    memory = Mem0Facade(client)
    added = memory.add("Carol's badge number is 4417.", user_id="carol")
    [mid] = [r["id"] for r in added["results"]]
    assert Memory.objects.get(store=poisoned.store, external_id=mid).is_signed

    found = memory.search("What is Carol's badge number?", filters={"user_id": "carol"}, limit=3)
    assert [r["id"] for r in found["results"]] == [mid]
    assert [r["id"] for r in memory.get_all(filters={"user_id": "carol"})["results"]] == [mid]
    assert [h["event"] for h in memory.history(mid)] == ["ADD"]

    got = client.recall("Carol badge", k=2)
    client.verify(got)
    assert client.outcome(got, memory=got.results[0]["memory"], reward=1.0)["reward"] == 1.0


def test_a_token_of_another_store_is_refused(poisoned, globex_store, client_for):
    from memaudit_client import MemAuditError

    theirs = client_for(globex_store.store)
    theirs.store_id = poisoned.store.pk
    with pytest.raises(MemAuditError) as info:
        theirs.recall("anything")
    assert info.value.status == 404
    with pytest.raises(MemAuditError):
        theirs.add("planted", id="planted")
    assert not Memory.objects.filter(external_id="planted").exists()


def test_a_langgraph_agent_compiled_with_the_store_stops_getting_a_memory_quarantined_by_review(
        poisoned, finished_run, alice, bob, acme, client_for):
    """The README demo as an agent: a LangGraph graph compiled with ``store=MemAuditStore(...)``
    (the one-line change from ``InMemoryStore()``) whose node recalls through the store LangGraph
    injects; after review quarantines a memory, the next run of the same graph no longer gets it."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    class State(TypedDict):
        question: str
        recalled: list[str]

    def recall(state: State, *, store: BaseStore) -> dict:
        return {"recalled": [it.key for it in store.search((), query=state["question"], limit=5)]}

    builder = StateGraph(State)
    builder.add_node("recall", recall)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", END)
    memaudit = MemAuditStore(client_for(poisoned.store))
    agent = builder.compile(store=memaudit)
    suspect = finished_run.suspects.filter(in_batch=True, memory__external_id__in=poisoned.poisoned).select_related(
        "memory").order_by("rank").first()
    question = next(i["query"] for i in poisoned.incidents if suspect.memory.external_id in i["retrieved"])

    assert suspect.memory.external_id in agent.invoke({"question": question, "recalled": []})["recalled"]
    [proposal] = services.proposals_create_from_run(audit_run=finished_run, user=alice,
                                                    memory_ids=[suspect.memory_id])
    services.proposal_approve(organization=acme, proposal_id=proposal.pk, user=bob, reason="MINJA poison")

    assert suspect.memory.external_id not in agent.invoke({"question": question, "recalled": []})["recalled"]
    for receipt in memaudit.client.receipts:
        memaudit.client.verify(receipt)  # both runs' recalls carry signed receipts
