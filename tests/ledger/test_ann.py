"""The ANN graph for large stores (ledger.ann) and recall over it: candidates re-scored exactly,
quarantine applied without losing k results, the graph persisted and grown incrementally; and
the per-store cache of recall results."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("hnswlib")

from ledger import recall as recall_module  # noqa: E402
from ledger.ann import AnnIndex  # noqa: E402
from ledger.embedding_store import ann_forget, ann_path, index_invalidate, store_index  # noqa: E402
from ledger.models import Memory  # noqa: E402
from ledger.recall import recall  # noqa: E402
from tests.ledger.recall_support import filler, import_inline  # noqa: E402

pytestmark = pytest.mark.usefixtures("recall_settings")

EIFFEL = "When was the Eiffel Tower in Paris completed?"


def _clustered(n: int, dim: int = 32, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    x = centres[rng.integers(0, 20, n)] + 0.4 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_the_graph_finds_the_exact_neighbours_grows_and_reopens_only_for_its_rows(tmp_path):
    x = _clustered(3000)
    pks = np.arange(10, 3010, dtype=np.int64)
    ann = AnnIndex(32, capacity=100)  # resized as it grows
    assert ann.add(pks[:2000], x[:2000]) == 2000
    assert ann.add(pks, x) == 1000 and len(ann) == 3000  # only the new keys
    queries = _clustered(50, seed=9)
    hits = 0
    for q in queries:
        exact = set(pks[np.argsort(-(x @ q))[:10]].tolist())
        hits += len(exact & set(ann.search(q, 10).tolist()))
    assert hits / 500 >= 0.95

    path = str(tmp_path / "g.hnsw")
    ann.save(path)
    again = AnnIndex.open(path, dim=32, pks=pks, matrix=x)
    assert again is not None and len(again) == 3000
    assert np.array_equal(again.search(queries[0], 5), ann.search(queries[0], 5))
    # Another database's rows under the same keys, or keys this store lacks: not reused.
    assert AnnIndex.open(path, dim=32, pks=pks, matrix=_clustered(3000, seed=4)) is None
    assert AnnIndex.open(path, dim=32, pks=pks[:100], matrix=x[:100]) is None
    assert AnnIndex.open(str(tmp_path / "absent.hnsw"), dim=32, pks=pks, matrix=x) is None


@pytest.fixture
def big(store, housekeeper, settings, tmp_path, monkeypatch):
    """A store recalled through the ANN graph (threshold 1), with a small first pool, so the
    pool has to widen as soon as a candidate is excluded."""
    settings.VAR_DIR = tmp_path
    settings.RECALL_ANN_MIN = 1
    monkeypatch.setattr(recall_module, "ANN_POOL_MIN", 2)
    monkeypatch.setattr(recall_module, "ANN_POOL_PER_K", 1)
    ann_forget()
    job = import_inline(store, [{"id": "e1", "text": "The Eiffel Tower is in Paris and was completed in 1889."},
                                {"id": "e2", "text": "The Eiffel Tower in Paris was completed in 1889 for a fair."},
                                *filler(60)])
    assert job.status == "done", job.errors
    yield store
    ann_forget()


def _ids(result) -> list[str]:
    return [r["external_id"] for r in result["results"]]


def test_recall_over_the_graph_equals_brute_force_and_persists_the_graph(big, settings):
    via_ann = recall(store=big, query=EIFFEL, k=5)
    index = store_index(big)
    assert index.ann is not None and len(index.ann) == len(index) == 62
    assert os.path.exists(ann_path(big, index.model))

    settings.RECALL_ANN_MIN = 10**9  # brute force
    index_invalidate()
    brute = recall(store=big, query=EIFFEL, k=5)
    assert store_index(big).ann is None
    assert _ids(via_ann) == _ids(brute) and _ids(via_ann)[:2] in (["e1", "e2"], ["e2", "e1"])
    assert [r["score"] for r in via_ann["results"]] == pytest.approx([r["score"] for r in brute["results"]])

    # A new process reopens the saved graph instead of building it again.
    settings.RECALL_ANN_MIN = 1
    ann_forget()
    index_invalidate()
    added = []
    real_add = AnnIndex.add
    AnnIndex.add = lambda self, pks, vectors, **kw: (added.append(real_add(self, pks, vectors, **kw)), added[-1])[1]
    try:
        assert _ids(recall(store=big, query=EIFFEL, k=5)) == _ids(brute)
    finally:
        AnnIndex.add = real_add
    assert sum(added) == 0 and len(store_index(big).ann) == 62


def test_the_request_path_never_builds_a_large_graph_the_worker_does(store, housekeeper, settings, tmp_path,
                                                                      monkeypatch):
    from ledger import dispatch, embedding_store
    from ledger.tasks import recall_prepare_task

    settings.VAR_DIR = tmp_path
    settings.RECALL_ANN_MIN = 1
    monkeypatch.setattr(embedding_store, "ANN_INLINE_ADD", 5)
    monkeypatch.setattr(recall_module, "ANN_POOL_MIN", 2)
    monkeypatch.setattr(recall_module, "ANN_POOL_PER_K", 1)
    asked = []
    monkeypatch.setattr(dispatch, "recall_prepare", asked.append)  # no worker: record the request
    ann_forget()
    import_inline(store, filler(60))
    built = []
    real_add = AnnIndex.add
    monkeypatch.setattr(AnnIndex, "add", lambda self, pks, vectors, **kw: built.append(len(pks)) or
                        real_add(self, pks, vectors, **kw))

    first = recall(store=store, query="castle built by volunteers", k=3)
    assert built == [] and store_index(store).ann is None  # brute force, exact, while no graph exists
    assert asked == [store.pk] and not os.path.exists(ann_path(store, store_index(store).model))

    assert recall_prepare_task(store.pk)["ann_rows"] == 60  # the worker builds and saves it
    index_invalidate()
    assert _ids(recall(store=store, query="castle built by volunteers", k=3)) == _ids(first)
    assert store_index(store).ann is not None and len(store_index(store).ann) == 60

    # Ten more memories (more than a request may add): left out of the graph, yet scored exactly.
    built.clear()
    import_inline(store, [{"id": "e1", "text": "The Eiffel Tower is in Paris and was completed in 1889."},
                          *[{"id": f"x{i}", "text": f"Extra note {i} about harbor {i}."} for i in range(9)]],
                  filename="more.jsonl")
    index = store_index(store)
    assert built == [] and len(index.unindexed) == 10 and len(index.ann) == 60
    via_graph = recall(store=store, query=EIFFEL, k=3)
    assert _ids(via_graph)[0] == "e1"
    settings.RECALL_ANN_MIN = 10**9
    index_invalidate()
    brute = recall(store=store, query=EIFFEL, k=3)
    # Same scores; ids equal up to ties (two filler memories score exactly the same for this query).
    assert [r["score"] for r in brute["results"]] == pytest.approx([r["score"] for r in via_graph["results"]])
    assert _ids(brute)[:2] == _ids(via_graph)[:2]


def test_quarantined_candidates_are_skipped_and_the_pool_widens_to_k_results(big):
    from ledger.services import label_append

    for external_id in ("e1", "e2"):
        label_append(memory_id=Memory.objects.get(store=big, external_id=external_id).pk, label="poison_likely",
                     reason="test", evidence={}, actor="user:bob")
    result = recall(store=big, query=EIFFEL, k=5)
    assert len(result["results"]) == 5 and not {"e1", "e2"} & set(_ids(result))
    result = recall(store=big, query=EIFFEL, k=60)  # every allowed memory, through widening
    assert len(result["results"]) == 60


def test_a_repeated_query_reuses_the_stores_result_until_the_log_moves(facts, housekeeper):
    from ledger.embedding_store import embedder_for_store
    from ledger.services import label_append

    # The first recall makes the receipt key, and the housekeeper logs its endorsement: the log
    # moves once, before the recalls this test counts.
    recall(store=facts, query="largest ocean", k=1)
    embedder = embedder_for_store(facts)
    calls = []
    real = embedder.encode_query
    embedder.encode_query = lambda text: (calls.append(text), real(text))[1]
    try:
        first = recall(store=facts, query=EIFFEL, k=3)
        second = recall(store=facts, query=EIFFEL, k=3)
        assert calls == [EIFFEL]
        assert second["results"] == first["results"] and second["receipt_id"] != first["receipt_id"]
        recall(store=facts, query=EIFFEL, k=2)  # another k: searched
        assert len(calls) == 2
        label_append(memory_id=Memory.objects.get(store=facts, external_id="m1").pk, label="poison_likely",
                     reason="test", evidence={}, actor="user:bob")
        third = recall(store=facts, query=EIFFEL, k=3)
        assert len(calls) == 3 and "m1" not in _ids(third)
    finally:
        del embedder.encode_query


def test_memories_weighted_above_one_outrank_from_outside_the_pool_as_in_brute_force(big, settings):
    from ledger.services import transition_append

    # Raise a few weights to the maximum: cosine x 3.0 can beat nearer memories the graph proposes.
    for external_id in ("c3", "c7", "c11", "c19", "c23"):
        memory = Memory.objects.get(store=big, external_id=external_id)
        for _ in range(3):
            transition_append(memory_id=memory.pk, valence_q=1000, evidence=["test"], eta_q=10_000)
    queries = [EIFFEL, "castle built by volunteers", "river festival after the war", "museum of Hestia"]
    via_ann = [recall(store=big, query=q, k=3) for q in queries]
    assert store_index(big).ann is not None and len(store_index(big).boosted_rows()) == 5
    settings.RECALL_ANN_MIN = 10**9
    index_invalidate()
    brute = [recall(store=big, query=q, k=3) for q in queries]
    assert [_ids(r) for r in via_ann] == [_ids(r) for r in brute]
    assert any({"c3", "c7", "c11", "c19", "c23"} & set(_ids(r)) for r in brute)


def test_a_larger_graph_saved_by_a_worker_process_is_reopened_in_the_background(store, housekeeper, settings,
                                                                                tmp_path, monkeypatch):
    import threading

    from ledger import dispatch, embedding_store
    from ledger.tasks import recall_prepare_task

    settings.VAR_DIR = tmp_path
    settings.RECALL_ANN_MIN = 1
    monkeypatch.setattr(embedding_store, "ANN_INLINE_ADD", 5)
    monkeypatch.setattr(embedding_store, "PREVERIFIED_RECHECK_S", 0.0)
    monkeypatch.setattr(dispatch, "recall_prepare", lambda store_id: None)
    ann_forget()
    import_inline(store, filler(60))
    recall_prepare_task(store.pk)
    index_invalidate()
    recall(store=store, query="castle built by volunteers", k=3)
    assert len(store_index(store).ann) == 60
    import_inline(store, [{"id": f"x{i}", "text": f"Extra note {i} about harbor {i}."} for i in range(10)],
                  filename="more.jsonl")
    assert len(store_index(store).unindexed) == 10

    # Another process (the worker) saves the complete graph; this one still holds the 60-row graph.
    index = store_index(store)
    other = AnnIndex(index.matrix.shape[1], capacity=len(index))
    other.add(index.pks, index.matrix)
    path = ann_path(store, index.model)
    other.save(path)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))

    recall(store=store, query="harbor note", k=3)  # starts the reopen; this recall uses the old graph
    for t in [t for t in threading.enumerate() if t.name == "ann-reopen"]:
        t.join(timeout=30)
    result = recall(store=store, query="harbor note", k=3)
    index = store_index(store)
    assert len(index.ann) == 70 and len(index.unindexed) == 0 and index.ann is not other
    assert len(result["results"]) == 3
