"""The recall index brought forward after ledger writes (``ledger.embedding_store._index_patch``):
only the memories named by the log entries since the index was built are re-read, and the result
is the index a full rebuild gives, for transitions, labels, new memories (also ones whose primary
key sorts before the index's last row) and a store over the ANN threshold."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
from django.db import connections

from ledger import embedding_store
from ledger.embedding_store import store_index
from ledger.models import Memory
from ledger.recall import excluded_states, recall
from ledger.services import label_append, memories_create, memory_genesis_sign, transition_append
from tests.ledger.recall_support import FACTS, filler, import_inline

pytestmark = pytest.mark.usefixtures("recall_settings")

FIELDS = ("pks", "matrix", "weights", "weight_q", "label_seq", "external_ids", "ledger_ids", "states",
          "chain_heads", "content_sha256", "log_position", "log_head", "missing")


@pytest.fixture
def filled(store, housekeeper):
    job = import_inline(store, [{"id": i, "text": t} for i, t in FACTS] + filler(30))
    assert job.status == "done", job.errors
    return store


@pytest.fixture
def builds(monkeypatch):
    """Counts full index builds."""
    calls = []
    real = embedding_store._build_index

    def counted(*args, **kwargs):
        calls.append(args[0].pk)
        return real(*args, **kwargs)

    monkeypatch.setattr(embedding_store, "_build_index", counted)
    return calls


def _same_as_rebuild(store, index) -> None:
    rebuilt = embedding_store._build_index(store, embedding_store.embedder_for_store(store), index.log_position)
    for name in FIELDS:
        a, b = getattr(index, name), getattr(rebuilt, name)
        assert (np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b), name
    for projection in (excluded_states(store), frozenset()):
        assert np.array_equal(index.state_mask(projection), rebuilt.state_mask(projection))
    assert np.array_equal(index.boosted_rows(), rebuilt.boosted_rows())


def _memory(store, external_id: str):
    return Memory.objects.get(store=store, external_id=external_id)


def test_writes_bring_the_index_forward_without_a_rebuild(filled, builds):
    before = store_index(filled)
    before.state_mask(excluded_states(filled))  # a cached projection mask must follow the labels
    old_matrix = before.matrix.copy()
    assert builds == [filled.pk]

    transition_append(memory_id=_memory(filled, "m2").pk, valence_q=900, evidence=["outcome:1"])
    label_append(memory_id=_memory(filled, "m3").pk, label="poison_likely", reason="test", evidence={},
                 actor="user:bob")
    [late] = memories_create(store=filled, records=[{"id": "late", "text": "The Seine flows through Paris."}])
    memory_genesis_sign(memory_ids=[late.pk])

    after = store_index(filled)
    assert builds == [filled.pk]  # brought forward, not rebuilt
    assert after is not before and len(after) == len(before) + 1
    assert np.array_equal(before.matrix, old_matrix)  # a recall still on the old index sees its rows unchanged
    _same_as_rebuild(filled, after)
    row = int(np.searchsorted(after.pks, _memory(filled, "m3").pk))
    assert after.states[row] == "poison_likely" and not after.state_mask(excluded_states(filled))[row]
    assert "late" in [r["external_id"] for r in recall(store=filled, query="Which river flows through Paris?", k=3)
                      ["results"]]


def test_a_memory_signed_after_a_later_one_is_inserted_in_key_order(filled, builds):
    store_index(filled)
    first, second = memories_create(store=filled, records=[{"id": "a", "text": "Lyon is on the Rhone."},
                                                           {"id": "b", "text": "Marseille is on the sea."}])
    memory_genesis_sign(memory_ids=[second.pk])
    middle = store_index(filled)
    memory_genesis_sign(memory_ids=[first.pk])  # its key sorts before the index's last row
    after = store_index(filled)
    assert builds == [filled.pk]
    assert list(after.pks) == sorted(after.pks) and len(after) == len(middle) + 1
    _same_as_rebuild(filled, after)


def test_an_index_whose_leaf_changed_is_rebuilt_not_patched(filled, builds):
    index = store_index(filled)
    # Another database under the same store id and log positions (a rolled-back test database,
    # a restored backup): the leaf at the index's position is not the one it was built on.
    with embedding_store._INDEX_LOCK:
        embedding_store._INDEXES[filled.pk] = dataclasses.replace(index, log_head=b"\x00" * 32)
    transition_append(memory_id=_memory(filled, "m2").pk, valence_q=300, evidence=["outcome:2"])
    store_index(filled)
    assert builds == [filled.pk, filled.pk]


def test_a_store_over_the_ann_threshold_keeps_its_graph_and_adds_the_new_rows(filled, builds, settings, tmp_path):
    pytest.importorskip("hnswlib")
    settings.VAR_DIR = tmp_path
    settings.RECALL_ANN_MIN = 1
    embedding_store.ann_forget()
    try:
        embedding_store.store_prepare(filled)  # the worker's graph
        before = store_index(filled)
        assert before.ann is not None and not len(before.unindexed)
        built = len(builds)  # the worker's and this first request's
        [late] = memories_create(store=filled, records=[{"id": "late", "text": "The Loire is the longest river."}])
        memory_genesis_sign(memory_ids=[late.pk])
        after = store_index(filled)
        assert after.ann is before.ann and late.pk in after.ann.search(after.matrix[-1], 1)
        assert not len(after.unindexed) and len(builds) == built
        _same_as_rebuild(filled, after)
    finally:
        embedding_store.ann_forget()


def test_the_workers_next_run_brings_its_index_forward_and_saves_the_graph_and_record_with_the_new_rows(
        filled, builds, settings, tmp_path):
    pytest.importorskip("hnswlib")
    pytest.importorskip("faiss")
    from ledger import ann as ann_module
    from ledger import verification

    settings.VAR_DIR = tmp_path
    settings.RECALL_ANN_MIN = 1
    embedding_store.ann_forget()
    embedding_store.index_invalidate()
    given = []
    real_preverify = verification.store_preverify

    try:
        first = embedding_store.store_prepare(filled)
        assert first["index"] == "built" and first["failed"] == 0 and builds == [filled.pk]
        assert embedding_store.store_prepare(filled)["index"] == "kept"  # nothing moved: nothing re-read

        [late] = memories_create(store=filled, records=[{"id": "late", "text": "The Loire is the longest river."}])
        memory_genesis_sign(memory_ids=[late.pk])
        transition_append(memory_id=_memory(filled, "m2").pk, valence_q=300, evidence=["outcome:3"])
        with pytest.MonkeyPatch.context() as mp:  # the verified-ahead pass takes the index's rows, not the store's
            mp.setattr(verification, "store_preverify",
                       lambda store, **kw: given.append(kw["rows"]) or real_preverify(store, **kw))
            second = embedding_store.store_prepare(filled)
        assert second["index"] == "patched" and builds == [filled.pk]
        assert given[0] is not None and len(given[0]) == len(filled.memories.all())
        assert second["verified"] == 2 and second["kept"] == first["verified"] - 1 and second["failed"] == 0
        assert second["ann_rows"] == first["ann_rows"] + 1

        # What the worker saved is what a serving process opens: the graph with the new key (one it
        # added inline, so no add of the run's own would have saved it) and the record with both states.
        worker = embedding_store._WORKER_INDEXES[filled.pk]
        _same_as_rebuild(filled, worker)
        path = embedding_store.ann_path(filled, worker.model)
        reopened = ann_module.AnnIndex.open(path, dim=worker.matrix.shape[1], pks=worker.pks, matrix=worker.matrix)
        assert reopened is not None and len(reopened) == len(worker) and not len(reopened.missing(worker.pks))
        record = verification.preverified_load(filled)
        assert record.mask(pks=worker.pks, heads=worker.chain_heads, contents=worker.content_sha256,
                           label_seq=worker.label_seq, weight_q=worker.weight_q, states=worker.states).all()

        # Another database under the same ids (the leaf at the worker's position changed): rebuilt.
        with embedding_store._INDEX_LOCK:
            embedding_store._WORKER_INDEXES[filled.pk] = dataclasses.replace(worker, log_head=b"\x00" * 32)
        built = len(builds)  # the worker's first and _same_as_rebuild's
        assert embedding_store.store_prepare(filled)["index"] == "built" and len(builds) == built + 1
    finally:
        embedding_store.ann_forget()
        embedding_store.index_invalidate()


@pytest.mark.django_db(transaction=True)  # the threads have their own connections: they see committed rows
def test_threads_that_find_the_index_behind_wait_for_one_of_them_to_bring_it_forward(filled, monkeypatch):
    store_index(filled)
    transition_append(memory_id=_memory(filled, "m2").pk, valence_q=500, evidence=["outcome:3"])
    patches = []
    real = embedding_store._index_patch
    gate = threading.Event()

    def slow(*args, **kwargs):
        patches.append(1)
        gate.wait(5)  # hold the first patch until every thread has asked
        return real(*args, **kwargs)

    monkeypatch.setattr(embedding_store, "_index_patch", slow)
    got = []
    position = embedding_store.log_position(filled.organization_id)

    def ask() -> None:
        try:
            got.append(store_index(filled, position=position))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert len(patches) == 1 and len(got) == 6 and all(g is got[0] for g in got)
