"""Recall says what it withheld: the quarantined memories that would have been returned are
listed in ``excluded`` by id and label (never by text), and the signed receipt still verifies."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from ledger.core.receipts import verify_receipt
from ledger.models import Memory, ReceiptKey
from ledger.recall import recall

pytestmark = pytest.mark.usefixtures("recall_settings")

EIFFEL = "When was the Eiffel Tower in Paris completed?"


def _quarantine(external_id: str) -> Memory:
    from ledger.services import label_append

    memory = Memory.objects.get(external_id=external_id)
    label_append(memory_id=memory.pk, label="poison_likely", reason="test", evidence={},
                 actor="ingest-classifier@1.0")
    return memory


def test_a_quarantined_memory_that_would_rank_is_listed_by_id_and_label(facts, housekeeper):
    m1 = _quarantine("m1")

    result = recall(store=facts, query=EIFFEL, k=3)

    assert "m1" not in [r["external_id"] for r in result["results"]]
    withheld = [e for e in result["excluded"] if e.get("label")]
    assert withheld == [{"memory": "main/m1", "id": m1.pk, "external_id": "m1", "label": "poison_likely",
                         "reason": "quarantined (poison_likely): out of recall"}]
    assert m1.text not in repr(result["excluded"])  # ids and labels, never the text


def test_the_query_that_is_exactly_the_quarantined_memorys_text_lists_it(facts, housekeeper):
    m1 = _quarantine("m1")

    result = recall(store=facts, query=m1.text, k=1)

    assert [e["external_id"] for e in result["excluded"]] == ["m1"]
    verify_receipt(result["receipt"], bytes(ReceiptKey.objects.get(organization=facts.organization).public_key))


def test_a_quarantined_memory_that_would_not_rank_is_not_listed(facts, housekeeper):
    _quarantine("m1")

    result = recall(store=facts, query="Who painted the Mona Lisa in the Louvre?", k=1)

    assert [e for e in result["excluded"] if e.get("label")] == []


def test_the_recall_api_lists_the_withheld_memory_and_the_receipt_verifies(facts, housekeeper, alice):
    m1 = _quarantine("m1")
    c = APIClient()
    c.force_login(alice)

    body = c.post(f"/api/v1/stores/{facts.pk}/recall/", {"query": m1.text, "k": 2}, format="json").json()

    assert [(e["external_id"], e["label"]) for e in body["excluded"]] == [("m1", "poison_likely")]
    assert m1.text not in repr(body["excluded"])
    key = c.get(f"/api/v1/receipts/{body['receipt_id']}/").json()["receipt_public_key"]
    verify_receipt(body["receipt"], bytes.fromhex(key))
