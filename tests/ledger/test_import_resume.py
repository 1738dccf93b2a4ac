"""A staged import on a worker: a chunk per transaction, resumed after a worker dies, run once
when delivered twice, the query log not kept per chunk."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from ledger import imports
from ledger.imports import import_job_stage, import_staged_run
from ledger.models import GenesisEntry, ImportJob, Memory
from tests.ledger.recall_support import jsonl

pytestmark = pytest.mark.usefixtures("recall_settings")

RECORDS = [{"id": f"r{i}", "text": f"resumable note {i} about topic {i % 3}"} for i in range(7)]


class WorkerDied(Exception):
    pass


@pytest.fixture
def staged(store, settings, tmp_path, monkeypatch):
    settings.IMPORT_STAGING_DIR = str(tmp_path / "staging")
    monkeypatch.setattr(imports, "CHUNK", 3)
    return import_job_stage(store=store, chunks=[jsonl(RECORDS)], filename="notes.jsonl")


def test_a_worker_that_dies_mid_import_is_resumed_from_its_last_committed_chunk(
        store, housekeeper, staged, monkeypatch, django_capture_on_commit_callbacks):
    real_create = imports.memories_create
    inserted: list[list[str]] = []

    def create(*, store, records):
        if len(inserted) == 1 and not resumed:
            raise WorkerDied  # the worker dies while inserting the second chunk
        inserted.append([r["id"] for r in records])
        return real_create(store=store, records=records)

    monkeypatch.setattr(imports, "memories_create", create)
    resumed = False
    with pytest.raises(WorkerDied):
        import_staged_run(job_id=staged.pk)
    staged.refresh_from_db()
    assert staged.status == "running" and Path(staged.staged_path).exists()
    assert set(Memory.objects.filter(store=store).values_list("external_id", flat=True)) == {"r0", "r1", "r2"}

    resumed = True  # the broker redelivers the task to another worker
    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=staged.pk)

    job = ImportJob.objects.get(pk=staged.pk)
    assert inserted == [["r0", "r1", "r2"], ["r3", "r4", "r5"], ["r6"]]  # the first chunk not inserted again
    assert (job.status, job.total, job.done, job.staged_path) == ("done", 7, 7, "")
    assert not Path(staged.staged_path).exists()
    assert Memory.objects.filter(store=store, chain_head__isnull=True).count() == 0
    assert GenesisEntry.objects.filter(memory__store=store).count() == 7  # one genesis each, none twice


def test_a_resumed_job_is_not_validated_again(store, housekeeper, staged, monkeypatch,
                                              django_capture_on_commit_callbacks):
    monkeypatch.setattr(imports, "_insert_streamed", _die)
    with pytest.raises(WorkerDied):
        import_staged_run(job_id=staged.pk)
    monkeypatch.undo()
    monkeypatch.setattr(imports, "CHUNK", 3)
    monkeypatch.setattr(imports, "_validate_streamed", _die)  # validation passed before the crash
    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=staged.pk)
    job = ImportJob.objects.get(pk=staged.pk)
    assert (job.status, job.done, job.total) == ("done", 7, 7)


def _die(*args, **kwargs):
    raise WorkerDied


def test_a_task_delivered_while_another_worker_holds_the_job_does_nothing(store, housekeeper, staged):
    with open(staged.staged_path, "rb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # the first worker is at it
        job = import_staged_run(job_id=staged.pk)
    assert job.status == "pending"
    assert not Memory.objects.filter(store=store).exists()


def test_a_finished_job_delivered_again_writes_nothing(store, housekeeper, staged, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=staged.pk)
    again = import_staged_run(job_id=staged.pk)
    assert (again.status, again.done) == ("done", 7)
    assert Memory.objects.filter(store=store).count() == 7


def test_the_query_log_is_emptied_after_each_chunk(store, housekeeper, staged, settings, monkeypatch,
                                                   django_capture_on_commit_callbacks):
    from django.db import connection

    settings.DEBUG = True
    sizes = []
    real_reset = imports.reset_queries

    def reset():
        sizes.append(len(connection.queries_log))
        real_reset()
        assert not connection.queries_log

    monkeypatch.setattr(imports, "reset_queries", reset)
    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=staged.pk)
    assert ImportJob.objects.get(pk=staged.pk).status == ImportJob.Status.DONE
    assert len(sizes) >= 3 and all(sizes)  # once per chunk, each time with that chunk's queries


def test_a_finished_import_asks_a_worker_once_to_prepare_the_store_for_recall(
        store, housekeeper, staged, monkeypatch, django_capture_on_commit_callbacks):
    """The ANN graph and the chains verified ahead are a worker's job (``recall_prepare``): a
    finished import asks for it once (not once per chunk), so the first recall after a large
    import does not score by brute force and verify inline; a redelivered finished job does not
    ask again."""
    from ledger import dispatch

    asked: list[int] = []
    monkeypatch.setattr(dispatch, "recall_prepare", asked.append)
    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=staged.pk)
    assert ImportJob.objects.get(pk=staged.pk).status == "done"
    assert asked == [store.pk]  # three chunks, one request

    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=staged.pk)
    assert asked == [store.pk]


def test_an_import_finishes_although_the_broker_refuses_the_recall_request(
        store, housekeeper, staged, monkeypatch, django_capture_on_commit_callbacks):
    from ledger import dispatch

    def refuse(store_id):
        raise ConnectionError("broker down")

    monkeypatch.setattr(dispatch, "recall_prepare", refuse)
    with django_capture_on_commit_callbacks(execute=True):
        import_staged_run(job_id=staged.pk)
    assert ImportJob.objects.get(pk=staged.pk).status == "done"
