"""Importing memories into a store (DESIGN sections 3 and 5).

``memories_import`` is the one import path behind the browser upload, the API bulk append
and ``manage.py import_memories``:

1. Validate the whole file first with the scenario parser (``parse_memories``: UTF-8, JSON or
   CSV syntax, shapes, non-empty ``id``/``text``, unique ids in the file), plus the size limit
   and ids already in the store. Every problem names file, line and field; if there is any,
   the job is marked failed with the issues and **nothing** is written.
2. Insert the memories in chunks inside one transaction (a crash half-way leaves nothing).
3. After commit, per chunk: the housekeeper signs the genesis entries, then an ``audit``
   worker embeds the texts and advances the job's ``done`` count (so ``done/total`` is the
   share of memories that are signed and embedded, i.e. recallable).
4. Last, the ingest classifier runs over the store and signed ``poison_likely`` labels are
   appended for what it flags; the job is then ``done``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.utils import timezone

from audits.engine.scenario import Issue, MemoryRecord, ValidationError, first_line_containing, parse_memories
from ledger.models import ImportJob, Memory, Store

logger = logging.getLogger(__name__)

CHUNK = 2000  # memories per insert batch and per signing/embedding task


def memories_validate(*, store: Store, data: bytes, filename: str) -> list[MemoryRecord]:
    """Parse and check an upload against the store; raise ``ValidationError`` with every issue."""
    limit = settings.MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise ValidationError([Issue(filename, None, None,
                                     f"file is {len(data):,} bytes, over the {limit:,}-byte upload limit")])
    records = parse_memories(data, filename)
    ids = [r.id for r in records]
    existing: set[str] = set()
    for i in range(0, len(ids), 500):
        existing.update(Memory.objects.filter(store=store, external_id__in=ids[i:i + 500])
                        .values_list("external_id", flat=True))
    if existing:
        issues = [Issue(filename, first_line_containing(data, r.id.encode("utf-8")), "id", f"duplicate id {r.id!r}: already in store {store.slug!r}")
                  for r in records if r.id in existing]
        raise ValidationError(issues)
    return records


def _chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def memories_import(*, store: Store, data: bytes, filename: str, user=None, inline: bool = False,
                    progress=None, classify: bool = True) -> ImportJob:
    """Validate and import a memories file; return its ``ImportJob``.

    A rejected file gives a job with status ``failed`` and ``errors`` = [{file, line, field,
    message}], and nothing else written. An accepted one is ``running`` until the pipeline
    (signing, embeddings, classifier) has finished — at once when ``inline`` (tests,
    benchmarks, ``import_memories --inline``; the caller holds the housekeeper role), else on
    the Celery workers. ``progress(done, total)`` is called after each inline chunk.
    """
    job = ImportJob.objects.create(organization_id=store.organization_id, store=store, filename=filename[:255],
                                   status=ImportJob.Status.RUNNING, created_by=user)
    try:
        records = memories_validate(store=store, data=data, filename=filename)
    except ValidationError as exc:
        return _job_failed(job, [{"file": i.file, "line": i.line, "field": i.field, "message": i.message}
                                 for i in exc.issues])
    try:
        return memories_import_records(store=store, records=records, job=job, inline=inline, progress=progress,
                                       classify=classify)
    except DjangoValidationError as exc:
        # A constraint the parser does not know (the insert is atomic, so nothing was written):
        # the job says so instead of staying "running".
        by_field = exc.message_dict.items() if hasattr(exc, "error_dict") else [(None, exc.messages)]
        return _job_failed(job, [{"file": filename, "line": None, "field": field, "message": message}
                                 for field, messages in by_field for message in messages])


def _job_failed(job: ImportJob, errors: list[dict]) -> ImportJob:
    job.status = ImportJob.Status.FAILED
    job.errors = errors
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "errors", "finished_at"])
    return job


def memories_import_records(*, store: Store, records: Sequence[MemoryRecord], job: ImportJob,
                            inline: bool = False, progress=None, classify: bool = True) -> ImportJob:
    """Insert already-validated records (one transaction) and start the pipeline."""
    from ledger.services import memories_create

    job.total = len(records)
    job.save(update_fields=["total"])
    memory_ids: list[int] = []
    with transaction.atomic():
        for chunk in _chunks(records, CHUNK):
            created = memories_create(store=store, records=[
                {"id": r.id, "text": r.text, "metadata": r.metadata, "created_at": r.created_at} for r in chunk])
            memory_ids.extend(m.pk for m in created)
    if inline:
        import_pipeline_run(job_id=job.pk, memory_ids=memory_ids, progress=progress, classify=classify)
        job.refresh_from_db()
    else:
        transaction.on_commit(lambda: import_pipeline_enqueue(job_id=job.pk, memory_ids=memory_ids))
    return job


def import_pipeline_enqueue(*, job_id: int, memory_ids: list[int]) -> None:
    """Queue: per chunk, genesis signing (housekeeper) then embeddings (audit); then the classifier."""
    from celery import chain

    from ledger.recall_tasks import embeddings_compute_task, ingest_classify_task
    from ledger.tasks import memory_genesis_sign_task

    for chunk in _chunks(memory_ids, CHUNK):
        chain(memory_genesis_sign_task.si(list(chunk)), embeddings_compute_task.si(job_id, list(chunk))).apply_async()
    ingest_classify_task.apply_async(args=[job_id, memory_ids])


def import_pipeline_run(*, job_id: int, memory_ids: list[int], progress=None, classify: bool = True) -> None:
    """The same pipeline in this process (the caller holds the housekeeper key). ``classify=False``
    skips the ingest classifier (the benchmark's no-label arm measures the store without it)."""
    from ledger.classifier_service import ingest_classify
    from ledger.services import memory_genesis_sign

    job = ImportJob.objects.select_related("store").get(pk=job_id)
    for chunk in _chunks(memory_ids, CHUNK):
        memory_genesis_sign(memory_ids=list(chunk))
        import_chunk_embed(job_id=job_id, memory_ids=list(chunk))
        if progress is not None:
            job.refresh_from_db(fields=["done", "total"])
            progress(job.done, job.total)
    if classify:
        ingest_classify(store=job.store, memory_ids=memory_ids, inline=True)
    import_job_finish(job_id=job_id)


def import_chunk_embed(*, job_id: int | None, memory_ids: list[int]) -> None:
    from django.db.models import F

    from ledger.embedding_store import embeddings_compute

    memories = Memory.objects.filter(pk__in=memory_ids).select_related("store")
    embeddings_compute(memories=memories)
    if job_id is not None:
        ImportJob.objects.filter(pk=job_id).update(done=F("done") + len(memory_ids))


def import_job_finish(*, job_id: int) -> None:
    ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.RUNNING).update(
        status=ImportJob.Status.DONE, finished_at=timezone.now())
