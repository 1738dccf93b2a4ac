"""Work done ahead of recall on a worker (``ledger.tasks.recall_prepare_task``): the store's
memories verified in their exact live state, so a recall verifies only what moved since, and
says how each result was verified; a record this deployment did not write, or one made under
other key epochs, is not trusted."""

from __future__ import annotations

import pytest

import ledger.verification
from ledger.embedding_store import index_invalidate
from ledger.models import Memory
from ledger.recall import recall, verification_cache_clear
from ledger.tasks import recall_prepare_task
from ledger.verification import preverified_load, preverified_path

pytestmark = pytest.mark.usefixtures("recall_settings")

EIFFEL = "When was the Eiffel Tower in Paris completed?"


def _ids(result) -> list[str]:
    return [r["external_id"] for r in result["results"]]


@pytest.fixture
def prepared(facts, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    done = recall_prepare_task(facts.pk)
    assert done["verified"] == 8 and done["failed"] == 0 and done["kept"] == 0
    index_invalidate()
    verification_cache_clear()  # a fresh web process: nothing verified in it yet
    return done


@pytest.fixture
def batches(monkeypatch):
    """Every bundle recall verifies in the request, by external ids."""
    seen: list[list[str]] = []
    real = ledger.verification.memories_verify
    monkeypatch.setattr(ledger.verification, "memories_verify",
                        lambda memories, **kw: seen.append(sorted(m.external_id for m in memories))
                        or real(memories, **kw))
    return seen


def test_a_prepared_store_is_recalled_without_verifying_in_the_request_until_a_memory_moves(
        facts, prepared, batches):
    from ledger.services import transition_append

    first = recall(store=facts, query=EIFFEL, k=3)

    assert batches == []
    assert _ids(first)[0] == "m1" and len(first["results"]) == 3
    assert first["verification"]["ahead"] == 3 and first["verification"]["now"] == 0
    assert first["verification"]["verified_through"] == prepared["log_position"]

    # m1 moves (a signed weight transition): its new state is not in the record, so it is verified here.
    transition_append(memory_id=Memory.objects.get(store=facts, external_id="m1").pk, valence_q=1000,
                      evidence=["test"], eta_q=1000)
    second = recall(store=facts, query=EIFFEL, k=3)

    assert batches == [["m1"]]
    assert second["verification"]["ahead"] == 2 and second["verification"]["now"] == 1
    assert _ids(second)[0] == "m1"
    third = recall(store=facts, query=EIFFEL, k=3)  # the same query at the same log position: served again
    assert batches == [["m1"]] and _ids(third) == _ids(second)
    assert {k: third["verification"][k] for k in ("ahead", "earlier", "now")} == {"ahead": 2, "earlier": 1, "now": 0}

    # The worker's next run keeps the seven it had and verifies m1 again: nothing left for recall.
    again = recall_prepare_task(facts.pk)
    assert again["kept"] == 7 and again["verified"] == 1 and again["log_position"] > prepared["log_position"]


def test_a_record_this_deployment_did_not_write_or_made_under_other_epochs_is_ignored(
        facts, prepared, batches, settings):
    from ledger.services import housekeeper_rotate

    assert preverified_load(facts) is not None
    settings.SECRET_KEY = "another deployment's secret"
    assert preverified_load(facts) is None
    result = recall(store=facts, query=EIFFEL, k=3)
    assert result["verification"]["ahead"] == 0 and result["verification"]["now"] == 3 and len(batches) == 1

    settings.SECRET_KEY = "x" * 50
    recall_prepare_task(facts.pk)
    assert preverified_load(facts) is not None
    housekeeper_rotate(organization=facts.organization)  # a new epoch: verify again under the new key ring
    assert preverified_load(facts) is None

    raw = bytearray(preverified_path(facts.pk).read_bytes())
    raw[-1] ^= 1  # one flipped bit of the record
    recall_prepare_task(facts.pk)
    preverified_path(facts.pk).write_bytes(bytes(raw))
    assert preverified_load(facts) is None


def test_a_memory_tampered_before_the_worker_ran_stays_out_of_the_record_and_recall_excludes_it(
        facts, settings, tmp_path, batches, caplog):
    from django.db import connection

    from tests.ledger.test_verification import SIG, disable_triggers

    settings.VAR_DIR = tmp_path
    disable_triggers("ledger_genesisentry")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_genesisentry SET signature = %s WHERE memory_id = %s",
                  [SIG, Memory.objects.get(store=facts, external_id="m1").pk])
    done = recall_prepare_task(facts.pk)
    assert done["failed"] == 1 and done["verified"] == 7
    index_invalidate()
    verification_cache_clear()
    batches.clear()

    result = recall(store=facts, query=EIFFEL, k=3)

    assert batches == [["m1"]]  # only the memory the record does not cover
    assert "m1" not in _ids(result) and [e["memory"] for e in result["excluded"]] == ["main/m1"]
    assert result["verification"]["ahead"] == 3 and "recall alert: memory main/m1" in caplog.text


def test_a_raw_edit_of_a_memorys_text_and_hash_after_the_worker_ran_is_verified_in_the_request(
        facts, prepared, batches, caplog):
    import hashlib

    from django.db import connection

    from tests.ledger.test_verification import disable_triggers

    # The edit moves no chain head, label or weight: only the content hash tells the record
    # (and the request's own cache) that the row is not the one that was verified.
    m1 = Memory.objects.get(store=facts, external_id="m1")
    forged = "The Eiffel Tower was completed in 1999."
    disable_triggers("ledger_memory")
    with connection.cursor() as c:
        c.execute("UPDATE ledger_memory SET text = %s, content_sha256 = %s WHERE id = %s",
                  [forged, hashlib.sha256(forged.encode()).digest(), m1.pk])
    index_invalidate()

    result = recall(store=facts, query=EIFFEL, k=3)

    assert batches == [["m1"]]
    assert "m1" not in _ids(result) and [e["memory"] for e in result["excluded"]] == ["main/m1"]
    assert all(r["text"] != forged for r in result["results"])


def test_the_recall_api_answers_the_documented_fields_and_stores_the_receipt_it_returns(facts, client):
    import json

    from ledger.agent_tokens import agent_token_create
    from ledger.api import RecallApi
    from ledger.models import Receipt

    _, token = agent_token_create(store=facts, name="agent")
    response = client.post(f"/api/v1/stores/{facts.pk}/recall", data=json.dumps({"query": EIFFEL, "k": 3}),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    body = response.json()
    assert body == json.loads(json.dumps(RecallApi.OutputSerializer(body).data))  # nothing beyond the schema
    assert set(body) == set(RecallApi.OutputSerializer().fields)
    stored = Receipt.objects.get(pk=body["receipt_id"])
    assert stored.body == body["receipt"] and stored.store_id == facts.pk and stored.created_at is not None
    assert stored.organization_id == facts.organization_id


def test_a_record_written_after_the_index_was_built_is_picked_up_without_a_log_move(facts, settings, tmp_path,
                                                                                  batches, monkeypatch):
    from ledger import embedding_store

    settings.VAR_DIR = tmp_path
    recall(store=facts, query="largest ocean", k=1)  # makes the receipt key: the log moves once, here
    verification_cache_clear()
    batches.clear()
    monkeypatch.setattr(embedding_store, "PREVERIFIED_RECHECK_S", 0.0)
    first = recall(store=facts, query=EIFFEL, k=3)
    assert first["verification"]["now"] == 3 and first["verification"]["ahead"] == 0

    recall_prepare_task(facts.pk)  # the worker's record arrives; the log does not move
    verification_cache_clear()
    batches.clear()
    second = recall(store=facts, query="Which ocean is the largest?", k=3)
    assert batches == [] and second["verification"]["ahead"] == 3
    assert second["verification"]["log_position"] == first["verification"]["log_position"]


@pytest.mark.django_db(transaction=True)  # the background thread has its own database connection
def test_a_large_store_matches_a_newer_record_on_a_background_thread(facts, settings, tmp_path, batches,
                                                                     monkeypatch):
    import threading

    from ledger import embedding_store

    settings.VAR_DIR = tmp_path
    recall(store=facts, query="largest ocean", k=1)  # makes the receipt key: the log moves once, here
    monkeypatch.setattr(embedding_store, "PREVERIFIED_RECHECK_S", 0.0)
    monkeypatch.setattr(embedding_store, "PREVERIFIED_INLINE_MAX", 0)  # every store counts as large
    matched = threading.Event()
    threads = []
    real = embedding_store._preverified_attach_later

    def spy(*args):
        threads.append(threading.current_thread().name)
        real(*args)
        matched.set()

    monkeypatch.setattr(embedding_store, "_preverified_attach_later", spy)
    recall_prepare_task(facts.pk)  # the worker's record arrives; the log does not move
    verification_cache_clear()
    recall(store=facts, query=EIFFEL, k=3)  # finds the newer record: matched off the request's thread
    assert matched.wait(10) and threads == ["preverified-attach"]
    verification_cache_clear()
    batches.clear()
    after = recall(store=facts, query="Which ocean is the largest?", k=3)
    assert batches == [] and after["verification"]["ahead"] == 3
