"""Importing memories: formats, validation that names file/line/field and imports nothing,
chunked progress, the worker pipeline, the ingest classifier's signed labels, the command."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from ledger.imports import memories_import
from ledger.models import (
    EmbeddingCache,
    EpistemicLabel,
    GenesisEntry,
    ImportJob,
    Memory,
)
from tests.ledger.recall_support import FACTS, POISON, filler, import_inline, jsonl

pytestmark = pytest.mark.usefixtures("recall_settings")

RECORDS = [{"id": i, "text": t} for i, t in FACTS[:3]]


def _csv(rows: list[tuple[str, ...]]) -> bytes:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue().encode("utf-8")


FORMATS = {
    "memories.jsonl": jsonl(RECORDS),
    "memories.json": json.dumps(RECORDS, indent=1).encode("utf-8"),
    "memories.csv": _csv([("id", "text", "source")] + [(r["id"], r["text"], "wiki") for r in RECORDS]),
}


@pytest.mark.parametrize("filename", sorted(FORMATS))
def test_it_imports_each_format_and_signs_and_embeds_every_memory(store, housekeeper, filename):
    job = memories_import(store=store, data=FORMATS[filename], filename=filename, inline=True)

    assert (job.status, job.total, job.done, job.errors) == ("done", 3, 3, [])
    memories = Memory.objects.filter(store=store).order_by("external_id")
    assert [m.external_id for m in memories] == ["m1", "m2", "m3"]
    assert all(m.is_signed for m in memories)
    assert GenesisEntry.objects.filter(memory__store=store).count() == 3
    assert EmbeddingCache.objects.count() == 3
    if filename.endswith(".csv"):
        assert memories[0].metadata == {"source": "wiki"}


BAD_INPUTS = [
    # (description, filename, data, expected (file, line, field) of the first issue, message part)
    ("bad JSON on a line", "memories.jsonl", b'{"id": "a", "text": "ok"}\n{"id": "b", "text": \n',
     ("memories.jsonl", 2, None), "bad JSON"),
    ("missing text", "memories.jsonl", b'{"id": "a", "text": "ok"}\n{"id": "b"}\n',
     ("memories.jsonl", 2, "text"), "missing"),
    ("empty text", "memories.jsonl", b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "  "}\n',
     ("memories.jsonl", 2, "text"), "must not be empty"),
    ("duplicate id in the file", "memories.jsonl", b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
     ("memories.jsonl", 2, "id"), "duplicate id 'a'"),
    ("non-UTF-8", "memories.jsonl", b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n',
     ("memories.jsonl", 2, None), "not valid UTF-8"),
    ("metadata not an object", "memories.json", b'[\n{"id": "a", "text": "x"},\n{"id": "b", "text": "y", "metadata": 3}\n]',
     ("memories.json", 3, "metadata"), "must be an object"),
    ("CSV without a text column", "memories.csv", b"id,body\na,hello\n", ("memories.csv", 1, "text"),
     "missing column"),
    ("bad created_at", "memories.jsonl", b'{"id": "a", "text": "x", "created_at": "yesterday"}\n',
     ("memories.jsonl", 1, "created_at"), "RFC 3339"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_each_bad_input_names_file_line_and_field_and_imports_nothing(store, housekeeper, case):
    _, filename, data, where, message = case

    job = memories_import(store=store, data=data, filename=filename, inline=True)

    assert job.status == ImportJob.Status.FAILED
    first = job.errors[0]
    assert (first["file"], first["line"], first["field"]) == where
    assert message in first["message"]
    assert not Memory.objects.filter(store=store).exists()


def test_it_rejects_ids_already_in_the_store_naming_the_line(store, housekeeper):
    import_inline(store, RECORDS[:1])
    data = jsonl([{"id": "fresh", "text": "new text"}, {"id": "m1", "text": "again"}])

    job = memories_import(store=store, data=data, filename="more.jsonl", inline=True)

    assert job.status == "failed"
    assert job.errors == [{"file": "more.jsonl", "line": 2, "field": "id",
                           "message": "duplicate id 'm1': already in store 'main'"}]
    assert not Memory.objects.filter(external_id="fresh").exists()


def test_it_rejects_an_oversize_file_before_parsing(store, housekeeper, settings):
    settings.MAX_UPLOAD_BYTES = 50

    job = memories_import(store=store, data=jsonl(RECORDS), filename="big.jsonl", inline=True)

    assert job.status == "failed"
    assert "over the 50-byte upload limit" in job.errors[0]["message"]
    assert not Memory.objects.exists()


def test_a_large_import_goes_in_chunks_and_reports_progress(store, housekeeper, monkeypatch):
    monkeypatch.setattr("ledger.imports.CHUNK", 40)
    records = [{"id": f"n{i}", "text": f"note number {i} about topic {i % 7}"} for i in range(130)]
    seen = []

    job = memories_import(store=store, data=jsonl(records), filename="n.jsonl", inline=True,
                          progress=lambda done, total: seen.append((done, total)))

    assert seen == [(40, 130), (80, 130), (120, 130), (130, 130)]
    assert (job.status, job.done, job.total) == ("done", 130, 130)
    assert Memory.objects.filter(store=store, chain_head__isnull=False).count() == 130


def test_the_worker_pipeline_signs_embeds_and_finishes_the_job(store, housekeeper, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        job = memories_import(store=store, data=jsonl(RECORDS), filename="w.jsonl")
    assert job.status == "running"  # the web request returns before the workers run

    job.refresh_from_db()
    assert (job.status, job.done, job.total) == ("done", 3, 3)
    assert Memory.objects.filter(store=store, chain_head__isnull=True).count() == 0
    assert EmbeddingCache.objects.count() == 3


def test_the_ingest_classifier_appends_signed_poison_likely_labels(store, housekeeper):
    from ledger.classifier import CLASSIFIER_VERSION, classify

    clean = filler(400)
    poison = [{"id": f"p{i}", "text": t} for i, t in enumerate(POISON)]
    assert {f.memory_id for f in classify([(r["id"], r["text"]) for r in clean + poison])} == {
        r["id"] for r in poison}, "the classifier itself must flag exactly the planted group"

    job = import_inline(store, clean + poison)

    assert job.status == "done"
    labels = EpistemicLabel.objects.filter(memory__store=store)
    assert sorted(lab.memory.external_id for lab in labels) == [f"p{i}" for i in range(5)]
    lab = labels.first()
    assert lab.label == "poison_likely" and lab.actor == f"ingest-classifier@{CLASSIFIER_VERSION}"
    assert "repeat the question pattern" in lab.reason and lab.evidence["group"]
    assert set(Memory.objects.filter(epistemic_state="poison_likely").values_list("external_id", flat=True)) == {
        f"p{i}" for i in range(5)}


class TopicEmbedder:
    """A sentence-model stand-in for the classifier's embedding steps: every text about the Lake
    Varenna Lighthouse lands on one direction, anything else on its own hashed one."""

    model_name = "topic-test"
    dim = 64

    def encode(self, texts):
        import hashlib

        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            if "Varenna" in text:
                out[i, 0] = 1.0
            else:
                out[i, 1 + int(hashlib.sha256(text.encode()).hexdigest(), 16) % (self.dim - 1)] = 1.0
        return out

    def encode_query(self, text):
        return self.encode([text])[0]


def test_the_classifier_service_feeds_the_stores_embeddings_to_the_classifier(store, housekeeper, settings):
    from ledger.embedding_store import _EMBEDDERS

    settings.EMBEDDING_BACKEND = "tests.ledger.test_import.TopicEmbedder"
    _EMBEDDERS.pop(settings.EMBEDDING_BACKEND, None)
    import_inline(store, filler(400) + [{"id": f"p{i}", "text": t} for i, t in enumerate(POISON)])

    labels = EpistemicLabel.objects.filter(memory__store=store)
    assert sorted(lab.memory.external_id for lab in labels) == [f"p{i}" for i in range(5)]
    assert {lab.evidence["embedding_model"] for lab in labels} == {"topic-test"}


def test_a_second_classifier_run_appends_nothing_new(store, housekeeper):
    from ledger.classifier_service import ingest_classify

    import_inline(store, [{"id": f"p{i}", "text": t} for i, t in enumerate(POISON)] + filler(400))
    before = EpistemicLabel.objects.count()

    ingest_classify(store=store, inline=True)

    assert EpistemicLabel.objects.count() == before == 5


def test_the_command_imports_inline_and_reports_errors(store, tmp_path, housekeeper, capsys):
    good = tmp_path / "memories.jsonl"
    good.write_bytes(jsonl(RECORDS))
    call_command("import_memories", "acme/main", str(good), "--inline")
    assert Memory.objects.filter(store=store, chain_head__isnull=False).count() == 3
    assert "3 memories into acme/main, status done" in capsys.readouterr().out

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": "z"}\n')
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_memories", str(store.pk), str(bad), "--inline")
    assert "bad.jsonl:1 [text]: missing" in capsys.readouterr().err


def test_a_database_refusal_fails_the_job_instead_of_leaving_it_running(store, housekeeper, monkeypatch):
    from django.core.exceptions import ValidationError as DjangoValidationError

    from ledger import imports

    def refuse(**kwargs):
        raise DjangoValidationError({"id": ["duplicate id 'x' in the store"]})

    monkeypatch.setattr(imports, "memories_import_records", refuse)
    job = imports.memories_import(store=store, data=b'{"id": "x", "text": "t"}\n', filename="m.jsonl", inline=True)
    assert job.status == ImportJob.Status.FAILED
    assert job.errors == [{"file": "m.jsonl", "line": None, "field": "id", "message": "duplicate id 'x' in the store"}]
    assert not Memory.objects.filter(store=store).exists()
