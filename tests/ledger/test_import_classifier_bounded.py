"""The import's classifier pass is bounded by a window and its neighbourhood, not the store size
(issue 14, "bounded memory"), and still sees a pattern split across two imports or two windows.

The service's sizes are module constants; the tests shrink them so that a few hundred passages
exercise what a 264k-row import does (several windows, a background sample, a lexical index).
"""

from __future__ import annotations

import tempfile

import pytest

from ledger import classifier_service
from ledger.models import EpistemicLabel, Memory
from tests.ledger.recall_support import POISON, filler, import_inline

pytestmark = pytest.mark.usefixtures("recall_settings")


@pytest.fixture
def small_windows(monkeypatch):
    """Neighbourhood corpora of at most ~60 passages plus a 30-passage background, above a
    whole-store limit of 50: a store of a few hundred passages is classified in many windows."""
    monkeypatch.setattr(classifier_service, "WHOLE_STORE_MAX", 50, raising=False)
    monkeypatch.setattr(classifier_service, "WINDOW_BUDGET", 40, raising=False)
    monkeypatch.setattr(classifier_service, "BACKGROUND", 30, raising=False)
    monkeypatch.setattr(classifier_service, "BLOCK", 64, raising=False)
    monkeypatch.setattr(classifier_service, "PAGE", 50, raising=False)
    monkeypatch.setattr(classifier_service, "DENSE_PAGE", 48, raising=False)


def _poison(ids) -> list[dict]:
    return [{"id": f"p{i}", "text": POISON[i]} for i in ids]


def _more_filler(n: int, seed: int, prefix: str) -> list[dict]:
    return [{"id": f"{prefix}{r['id']}", "text": r["text"]} for r in filler(n, seed=seed)]


def test_an_imports_classifier_calls_do_not_grow_with_the_store(store, housekeeper, small_windows, classify_sizes):
    """The whole-store pass handed the classifier every passage of the store (here 630) for a
    30-row import; the bounded pass hands it windows of the import plus their neighbourhood."""
    import_inline(store, filler(600))
    classify_sizes.clear()

    import_inline(store, _more_filler(30, seed=9, prefix="n"))

    limit = 40 + 1 + classifier_service.DEFAULT_PARAMS.max_neighbours + classifier_service.DENSE_NEIGHBOURS + 30
    assert classify_sizes and max(classify_sizes) <= limit < Memory.objects.filter(store=store).count()


def test_a_pattern_split_across_two_imports_is_still_flagged(store, housekeeper, small_windows, classify_sizes):
    import_inline(store, filler(300) + _poison([0, 1]))
    assert not EpistemicLabel.objects.filter(memory__store=store).exists()  # two are no group
    classify_sizes.clear()

    import_inline(store, _more_filler(300, seed=8, prefix="n") + _poison([2, 3, 4]))

    labelled = sorted(EpistemicLabel.objects.filter(memory__store=store).values_list("memory__external_id", flat=True))
    assert labelled == ["p2", "p3", "p4"]  # the earlier import's passages keep their state
    assert max(classify_sizes) < 600


def test_a_pattern_split_across_windows_of_one_import_is_flagged_whole(store, housekeeper, small_windows):
    """The five passages sit in different windows of one import (filler between them): each
    window's neighbourhood brings the others in, and every member is flagged once."""
    records = []
    for i in range(5):
        records += _more_filler(70, seed=20 + i, prefix=f"w{i}") + _poison([i])
    import_inline(store, records)

    labels = EpistemicLabel.objects.filter(memory__store=store)
    assert sorted(lab.memory.external_id for lab in labels) == [f"p{i}" for i in range(5)]


def test_the_neighbourhood_pass_takes_embedding_neighbours_and_passes_the_vectors(
        store, housekeeper, settings, small_windows):
    """With a sentence embedder the window's nearest neighbours by embedding join it (streamed
    over the store's vectors, not loaded whole) and the classifier gets their vectors."""
    from ledger.embedding_store import _EMBEDDERS

    settings.EMBEDDING_BACKEND = "tests.ledger.test_import.TopicEmbedder"
    _EMBEDDERS.pop(settings.EMBEDDING_BACKEND, None)
    import_inline(store, filler(200) + _poison([0, 1, 2]))
    import_inline(store, _more_filler(200, seed=8, prefix="n") + _poison([3, 4]))

    labels = EpistemicLabel.objects.filter(memory__store=store)
    assert sorted(lab.memory.external_id for lab in labels) == ["p3", "p4"]
    assert {lab.evidence["embedding_model"] for lab in labels} == {"topic-test"}


def test_the_store_vectors_are_read_from_the_database_once_not_once_per_block(
        store, housekeeper, settings, small_windows, monkeypatch):
    """The embedding-neighbour search streamed the store's vectors from the database for every
    BLOCK of the import: quadratic in the store for a store-sized import (53k rows: 1,384 s).
    They are written to a file once and every block reads the file."""
    from ledger.embedding_store import _EMBEDDERS

    settings.EMBEDDING_BACKEND = "tests.ledger.test_import.TopicEmbedder"
    _EMBEDDERS.pop(settings.EMBEDDING_BACKEND, None)
    import_inline(store, filler(200) + _poison([0, 1, 2]))
    streams: list[tuple] = []
    blocks: list[int] = []
    pages, neighbours = classifier_service._store_pages, classifier_service.dense_neighbours

    def pages_spy(store_, fields, **kwargs):
        streams.append(fields)
        return pages(store_, fields, **kwargs)

    def neighbours_spy(*, pks, **kwargs):
        blocks.append(len(pks))
        return neighbours(pks=pks, **kwargs)

    monkeypatch.setattr(classifier_service, "_store_pages", pages_spy)
    monkeypatch.setattr(classifier_service, "dense_neighbours", neighbours_spy)
    import_inline(store, _more_filler(300, seed=8, prefix="n") + _poison([3, 4]))

    assert len(blocks) >= 4  # the import's blocks of BLOCK
    assert sum(1 for fields in streams if "content_sha256" in fields) == 1
    labels = EpistemicLabel.objects.filter(memory__store=store)
    assert sorted(lab.memory.external_id for lab in labels) == ["p3", "p4"]  # as before the change


def test_embedding_neighbours_are_the_nearest_ones_of_the_store(store, housekeeper, settings, small_windows):
    """The streamed nearest-neighbour search agrees with brute force over the whole matrix."""
    import numpy as np

    from ledger.embedding_store import cached_vectors, embedder_for_store

    import_inline(store, filler(220))
    rows = list(Memory.objects.filter(store=store).order_by("pk").values_list("pk", "content_sha256"))
    emb = embedder_for_store(store)
    vecs = cached_vectors(model=emb.model_name, hashes=(h for _, h in rows))
    matrix = np.stack([vecs[bytes(h)] for _, h in rows])
    pks = [pk for pk, _ in rows]
    block = pks[:70]

    with tempfile.TemporaryDirectory() as tmp:
        store_vectors = classifier_service._VectorFile(tmp)
        for page in classifier_service._store_pages(store, ("pk", "content_sha256"), size=64):
            store_vectors.add_page(page, emb)
        store_vectors.finish()
        got = classifier_service.dense_neighbours(pks=block, model=emb.model_name, store_vectors=store_vectors,
                                                  k=5, floor=-1.0)
        assert [len(pks) for pks, _ in store_vectors.pages(size=100)] == [100, 100, 20]

    # brute force in float64: the streamed float32 products may differ in the last bits, so
    # near-ties (within 1e-5) may come out in either order, but no farther memory may enter
    sims = matrix[:70].astype(np.float64) @ matrix.T.astype(np.float64)
    column = {p: j for j, p in enumerate(pks)}
    for i, pk in enumerate(block):
        sims[i, i] = -np.inf
        best = sorted(range(len(pks)), key=lambda j: (-sims[i, j], pks[j]))[:5]
        assert len(got[pk]) == 5
        assert np.allclose([s for _, s in got[pk]], sims[i, best], atol=1e-5)  # the 5 best, best first
        assert all(abs(sims[i, column[n]] - s) <= 1e-5 for n, s in got[pk])  # each one's own cosine


def test_a_pages_best_columns_break_ties_by_primary_key_as_a_full_sort_would():
    import numpy as np

    rng = np.random.default_rng(3)
    sims = rng.choice(np.array([0.1, 0.5, 0.7, 0.9], dtype=np.float32), size=(40, 30))  # ties everywhere
    page_pks = rng.permutation(np.arange(100, 130)).astype(np.int64)

    top, pks = classifier_service._page_top(sims.copy(), page_pks, 5)

    for r in range(len(sims)):
        exact = np.lexsort((page_pks, -sims[r]))[:5]
        order = np.lexsort((pks[r], -top[r]))
        assert pks[r][order].tolist() == page_pks[exact].tolist()
