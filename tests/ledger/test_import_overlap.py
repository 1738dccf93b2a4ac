"""Issue 17, import throughput: the stages beside the encoder.

An import's chunk is embedded shortest text first (less padding per batch), and while the encoder
embeds it a helper thread computes the classifier's per-text step 1 for it (``ingest_prepare``),
kept by content hash in a file that the bounded pass reads instead of computing it again. That
file is a cache: the pass flags the same with it, without it, with half of it or with a broken
one, removes it when it is done, and an import that dies and is resumed still finishes with the
same flags.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger import classifier_service, imports
from ledger.embedding_store import cached_vectors, embedder_for_store
from ledger.imports import import_job_stage, import_staged_run
from ledger.models import GenesisEntry, ImportJob, Memory
from tests.ledger import test_import_classifier_same_labels as same_labels
from tests.ledger.recall_support import POISON, filler, jsonl

pytestmark = pytest.mark.usefixtures("recall_settings")

# ~700 memories imported inline in windows of 60 + 40 (that module's fixture, not copied)
generated_store = same_labels.generated_store


class WorkerDied(Exception):
    pass


def _prepared_file(store) -> Path:
    return classifier_service._prepared_path(store.pk)


def _prepared_rows(store) -> dict[bytes, tuple]:
    con = sqlite3.connect(_prepared_file(store))
    try:
        return {bytes(sha): tuple(rest) for sha, *rest in con.execute("SELECT * FROM facts")}
    finally:
        con.close()


def _flags(store) -> list[tuple]:
    pks = list(Memory.objects.filter(store=store).values_list("pk", flat=True))
    return [(pk, f.memory_id, f.reason, f.evidence)
            for pk, f in classifier_service.ingest_flags(store=store, pk_range=(min(pks), max(pks)))]


@pytest.fixture
def staging(settings, tmp_path):
    settings.IMPORT_STAGING_DIR = str(tmp_path / "staging")
    return Path(settings.IMPORT_STAGING_DIR)


@pytest.fixture
def prepared_store(staging, monkeypatch, request):
    """The generated store with the facts its import prepared (an import without the classifier
    removes them, as nothing will read them; kept here for the pass below)."""
    monkeypatch.setattr(imports, "ingest_prepared_drop", lambda *, store_id: None)
    return request.getfixturevalue("generated_store")


def test_an_import_prepares_every_texts_step_1_as_the_pass_computes_it(prepared_store):
    generated_store = prepared_store
    texts = dict(Memory.objects.filter(store=generated_store).values_list("content_sha256", "text"))
    rows = _prepared_rows(generated_store)
    assert set(rows) == {bytes(h) for h in texts}  # one row per distinct text, the duplicates once
    assert all(rows[bytes(h)] == classifier_service.text_facts(t) for h, t in texts.items())


def test_the_pass_flags_the_same_with_the_prepared_facts_without_them_and_with_half_of_them(
        prepared_store, monkeypatch):
    generated_store = prepared_store
    path = _prepared_file(generated_store)
    kept = path.read_bytes()
    used: list[int] = []
    real_add = classifier_service._LexicalIndex.add

    def add(self, rows, scores=None, vectors=None, prepared=None):
        rows = list(rows)
        used.append(sum(bytes(r[3]) in (prepared or {}) for r in rows))  # rows whose facts were read
        return real_add(self, rows, scores, vectors, prepared)

    monkeypatch.setattr(classifier_service._LexicalIndex, "add", add)
    with_them = _flags(generated_store)
    assert sum(used) == Memory.objects.filter(store=generated_store).count()  # every row came from the file
    assert not path.exists()  # the pass removed it

    used.clear()
    without = _flags(generated_store)
    assert sum(used) == 0

    path.write_bytes(kept)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM facts WHERE sha IN (SELECT sha FROM facts ORDER BY sha LIMIT (SELECT COUNT(*) / 2 FROM facts))")
    con.commit()
    con.close()
    used.clear()
    half = _flags(generated_store)
    assert 0 < sum(used) < Memory.objects.filter(store=generated_store).count()

    path.write_bytes(b"not a database at all" * 100)
    broken = _flags(generated_store)

    rules = {f[3]["rule"] if "rule" in f[3] else "group" for f in without}
    assert rules == {"instruction", "instruction-embedding", "group"}  # every kind of flag is compared
    assert with_them == without == half == broken


def test_a_chunk_is_embedded_shortest_text_first_and_the_import_keeps_the_files_order(
        store, housekeeper, staging, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(imports, "CHUNK", 7)
    handed: list[list[int]] = []
    real = imports.embeddings_compute

    def spy(*, memories, **kwargs):
        memories = list(memories)
        handed.append([len(m.text) for m in memories])
        return real(memories=memories, **kwargs)

    monkeypatch.setattr(imports, "embeddings_compute", spy)
    records = filler(30, seed=5)
    job = import_job_stage(store=store, chunks=[jsonl(records)], filename="notes.jsonl")
    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=job.pk)

    job.refresh_from_db()
    assert (job.status, job.done) == ("done", 30)
    assert [len(h) for h in handed] == [7, 7, 7, 7, 2]
    assert all(lengths == sorted(lengths) for lengths in handed)
    assert any(lengths != [len(r["text"]) for r in records[i * 7:i * 7 + 7]] for i, lengths in enumerate(handed))
    rows = list(Memory.objects.filter(store=store).order_by("pk").values_list("external_id", "content_sha256"))
    assert [e for e, _ in rows] == [r["id"] for r in records]  # rows in the file's order
    vectors = cached_vectors(model=embedder_for_store(store).model_name, hashes=(h for _, h in rows))
    assert len(vectors) == len({bytes(h) for _, h in rows})  # every memory embedded


def test_an_import_without_the_classifier_leaves_no_prepared_facts(staging, generated_store):
    assert not list(staging.glob("classifier-store-*"))


def test_a_small_store_prepares_nothing(store, housekeeper, staging, monkeypatch, django_capture_on_commit_callbacks):
    calls: list[int] = []
    monkeypatch.setattr(imports, "ingest_prepare", lambda *, store_id, texts: calls.append(len(texts)))
    job = import_job_stage(store=store, chunks=[jsonl(filler(12))], filename="notes.jsonl")
    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "done"
    assert calls == [] and not list(staging.glob("classifier-store-*"))


@pytest.fixture
def windowed(settings, staging, monkeypatch):
    """The sentence-model stand-in, the toy learned detector and small windows (the bounded pass
    from 20 memories on); chunks of 25."""
    from ledger.classifier import learned
    from ledger.embedding_store import _EMBEDDERS
    settings.EMBEDDING_BACKEND = "tests.ledger.test_import_classifier_same_labels.WordsEmbedder"
    _EMBEDDERS.pop(settings.EMBEDDING_BACKEND, None)
    monkeypatch.setattr(learned, "load_model", lambda *a, **k: same_labels._toy_detector())
    for name, value in (("WHOLE_STORE_MAX", 20), ("WINDOW_BUDGET", 40), ("BACKGROUND", 20), ("BLOCK", 32),
                        ("PAGE", 30), ("DENSE_PAGE", 24)):
        monkeypatch.setattr(classifier_service, name, value)
    monkeypatch.setattr(imports, "CHUNK", 25)


def _records() -> list[dict]:
    return (filler(80, seed=7) + [{"id": f"p{i}", "text": t} for i, t in enumerate(POISON)]
            + [{"id": f"i{i}", "text": t} for i, t in enumerate(same_labels.INJECTIONS)])


def _findings(store) -> list[tuple]:
    from ledger.models import ClassifierFinding

    return sorted(ClassifierFinding.objects.filter(memory__store=store).values_list(
        "memory__external_id", "reason", "evidence"))


def _import(store, records) -> ImportJob:
    job = import_job_stage(store=store, chunks=[jsonl(records)], filename="notes.jsonl",
                           enqueue=lambda job_id: None)  # the worker's task is called here
    import_staged_run(job_id=job.pk)
    return job


def _twin(organization):
    from ledger.services import store_create

    return store_create(organization=organization, name="Twin", slug="twin")


def test_a_failing_helper_leaves_the_import_and_its_flags_as_they_are(
        store, organization, housekeeper, windowed, monkeypatch, django_capture_on_commit_callbacks):
    twin = _twin(organization)
    with django_capture_on_commit_callbacks(execute=True):
        undisturbed = _import(twin, _records())
    undisturbed.refresh_from_db()

    def no_disk(self, path, *, create):
        raise OSError("No space left on device")

    monkeypatch.setattr(classifier_service._Prepared, "__init__", no_disk)
    with django_capture_on_commit_callbacks(execute=True):
        job = _import(store, _records())
    job.refresh_from_db()

    assert (job.status, job.done) == (undisturbed.status, undisturbed.done) == ("done", len(_records()))
    assert _findings(store) == _findings(twin) and _findings(store)


def test_an_import_that_dies_while_a_chunk_is_embedded_resumes_with_the_flags_of_an_undisturbed_one(
        store, organization, housekeeper, windowed, monkeypatch, django_capture_on_commit_callbacks):
    twin = _twin(organization)
    with django_capture_on_commit_callbacks(execute=True):
        _import(twin, _records())

    real_compute = imports.embeddings_compute
    dying = {"now": False}

    def compute(*, memories, **kwargs):
        memories = list(memories)
        if dying["now"]:  # part of the chunk embedded (and its facts prepared), then the worker dies
            real_compute(memories=memories[:10], **kwargs)
            raise WorkerDied
        return real_compute(memories=memories, **kwargs)

    monkeypatch.setattr(imports, "embeddings_compute", compute)
    with django_capture_on_commit_callbacks() as callbacks:
        job = _import(store, _records())
    queued = callbacks[1:]  # after the staging's (a no-op here): sign + embed per chunk, then the classifier
    assert len(queued) == -(-len(_records()) // 25) + 1 >= 4
    queued[0]()
    dying["now"] = True
    with pytest.raises(WorkerDied):
        queued[1]()
    job.refresh_from_db()
    assert (job.status, job.done) == ("running", 25)  # the chunk that died is not counted
    assert _prepared_file(store).exists()  # what the helper prepared before the worker died is kept

    dying["now"] = False
    for task in queued[1:]:  # the embedding task redelivered, then the rest
        task()
    job.refresh_from_db()
    assert (job.status, job.done, job.total) == ("done", len(_records()), len(_records()))
    assert GenesisEntry.objects.filter(memory__store=store).count() == len(_records())  # none signed twice
    assert _findings(store) == _findings(twin) and _findings(store)
    assert not _prepared_file(store).exists()
