"""Importing memories into a store (DESIGN sections 3 and 5).

``memories_import`` is the one import path behind the browser upload, the API bulk append,
``manage.py import_memories`` and ``manage.py sync_store``:

0. A file over ``IMPORT_INLINE_MAX_BYTES`` is not parsed in the request: it is staged
   (owner-only) under ``IMPORT_STAGING_DIR`` and the job stays ``pending`` until a worker runs
   ``import_staged_run`` (``ledger.import_tasks.import_parse_task``), which continues below.
   A format that streams is read a record at a time and inserted a chunk per transaction, each
   chunk queued for signing and embedding as soon as it is committed: the worker keeps the ids
   (to refuse duplicates before writing) and one chunk, whatever the file's size, and a
   redelivered task (its worker died) resumes after the last committed chunk.
1. The importer registry (``interchange.importers``) picks the format from the file (MemAudit
   JSONL/JSON/CSV, mem0, LangGraph, Letta...) or refuses it with the formats tried; the
   importer validates the whole file, plus the size limit and ids already in the store. Every
   problem names file, line and field; if there is any, the job is marked failed with the
   first ``MAX_KEPT_ISSUES`` issues and their total, and **nothing** is written.
2. Insert the memories in chunks: inside one transaction for a file parsed whole (a crash
   half-way leaves nothing), a transaction per chunk for a streamed one (see 0).
3. After commit, per chunk: the housekeeper signs the genesis entries, then an ``audit``
   worker embeds the texts and advances the job's ``done`` count (so ``done/total`` is the
   share of memories that are signed and embedded, i.e. recallable).
4. The foreign store's history (mem0's UPDATE/DELETE), in its order: each update a signed
   provenance entry moving the superseded version to the weight floor with evidence naming the
   event and the new version; each delete a signed retirement (same move, the text kept).
5. Last, the ingest classifier runs over the store and signed ``poison_likely`` labels are
   appended for what it flags; the job is then ``done``.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import reset_queries, transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Least
from django.utils import timezone

from interchange.importers import MEMORIES, Head, detect, memories_parse
from interchange.importers.langgraph import store_parse, store_rows
from interchange.importers.mem0 import history_parse, history_rows
from interchange.importers.registry import HEAD_BYTES, SQLITE_MAGIC
from interchange.issues import Collector, Issue, ValidationError, issues_as_dicts
from interchange.readers import chunks, line_of_id
from interchange.records import HistoryEvent, MemoryRecord, Parsed
from ledger import dispatch
from ledger.classifier_service import ingest_classify, ingest_prepare, ingest_prepare_wanted, ingest_prepared_drop
from ledger.embedding_store import embeddings_compute
from ledger.models import ImportJob, Memory, ProvenanceNode, Store
from ledger.services import memories_create, memory_genesis_sign, transitions_append

logger = logging.getLogger(__name__)

CHUNK = 2000  # memories per insert batch and per signing/embedding task
RETIRE_VALENCE_Q = -1000  # with RETIRE_ETA_Q, any weight lands on the floor (0.1): kept, never preferred
RETIRE_ETA_Q = 10_000


def inline_limit() -> int:
    return int(getattr(settings, "IMPORT_INLINE_MAX_BYTES", 2 * 1024 * 1024))


def memories_validate(*, store: Store, data: bytes, filename: str, fmt: str | None = None
                      ) -> tuple[str, str, Parsed]:
    """Parse and check an upload against the store: (format name, "this looks like ..." message,
    records and history); raise ``ValidationError`` with the issues (at most 100, all counted)."""
    limit = settings.MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise ValidationError([Issue(filename, None, None,
                                     f"file is {len(data):,} bytes, over the {limit:,}-byte upload limit")])
    importer, message, parsed = memories_parse(data, filename, fmt=fmt)
    ids = [r.id for r in parsed.records]
    existing: set[str] = set()
    for i in range(0, len(ids), 500):
        existing.update(Memory.objects.filter(store=store, external_id__in=ids[i:i + 500])
                        .values_list("external_id", flat=True))
    named = {e.memory for e in parsed.events} - set(ids)
    known = set(Memory.objects.filter(store=store, external_id__in=list(named)[:10_000])
                .values_list("external_id", flat=True)) if named else set()
    if named - known:
        missing = sorted(named - known)
        issues = [Issue(filename, line_of_id(data, m), "supersedes",
                        f"memory {m!r} is neither in this file nor in store {store.slug!r}") for m in missing[:100]]
        raise ValidationError(issues, total=len(missing))
    if existing:
        dups = [r for r in parsed.records if r.id in existing]
        issues = [Issue(filename, line_of_id(data, r.id), "id",
                        f"duplicate id {r.id!r}: already in store {store.slug!r}") for r in dups[:100]]
        raise ValidationError(issues, total=len(dups))
    return importer.name, message, parsed


def _stage(job: ImportJob, chunks: Iterable[bytes]) -> None:
    """Write an upload to the staging folder, readable by its owner only."""
    folder = Path(settings.IMPORT_STAGING_DIR)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"job-{job.pk}.upload"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    size = 0
    with os.fdopen(fd, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
            size += len(chunk)
    job.staged_path = str(path)
    job.size_bytes = size
    job.status = ImportJob.Status.PENDING
    job.save(update_fields=["staged_path", "size_bytes", "status"])


def import_job_stage(*, store: Store, chunks: Iterable[bytes], filename: str, kind: str = "memories", user=None,
                     fmt: str = "", enqueue: Callable[[int], object] | None = None) -> ImportJob:
    """Stage an upload for a worker and queue its parsing (after commit); the job is ``pending``.

    ``enqueue(job_id)`` queues the parse; memories by default. The audit app owns incidents and
    passes its own task (the ledger imports nothing from the audit app: docs/architecture.md).
    """
    if enqueue is None:
        if kind != "memories":
            raise ValueError(f"staging a {kind!r} upload needs the task that parses it")
        enqueue = dispatch.import_parse
    job = ImportJob.objects.create(organization_id=store.organization_id, store=store, filename=filename[:255],
                                   status=ImportJob.Status.PENDING, created_by=user, kind=kind, format=fmt[:64])
    _stage(job, chunks)
    transaction.on_commit(lambda: enqueue(job.pk))
    return job


def memories_import_upload(*, store: Store, upload, user=None, fmt: str | None = None) -> ImportJob:
    """An uploaded file (Django ``UploadedFile``): parsed here when small, else staged for a worker
    without reading it into memory."""
    if upload.size > inline_limit():
        return import_job_stage(store=store, chunks=upload.chunks(), filename=upload.name, user=user, fmt=fmt or "")
    return memories_import(store=store, data=upload.read(), filename=upload.name, user=user, fmt=fmt)


def memories_import(*, store: Store, data: bytes, filename: str, user=None, inline: bool = False,
                    progress=None, classify: bool = True, fmt: str | None = None) -> ImportJob:
    """Validate and import a memories file; return its ``ImportJob``.

    A rejected file gives a job with status ``failed``, ``errors`` = the first 100 of
    [{file, line, field, message}] and ``issue_count`` = all of them, and nothing else written.
    An accepted one is ``running`` until the pipeline (signing, history, embeddings,
    classifier) has finished — at once when ``inline`` (tests, benchmarks, ``import_memories
    --inline``; the caller holds the housekeeper role), else on the Celery workers. A file
    over ``IMPORT_INLINE_MAX_BYTES`` (not ``inline``) is staged and parsed by a worker: the job
    comes back ``pending``. ``progress(done, total)`` is called after each inline chunk.
    """
    if not inline and len(data) > inline_limit():
        return import_job_stage(store=store, chunks=[data], filename=filename, user=user, fmt=fmt or "")
    job = ImportJob.objects.create(organization_id=store.organization_id, store=store, filename=filename[:255],
                                   status=ImportJob.Status.RUNNING, created_by=user, size_bytes=len(data))
    return _import_into(job, data, inline=inline, progress=progress, classify=classify, fmt=fmt)


def _import_into(job: ImportJob, data: bytes, *, inline: bool, progress=None, classify: bool = True,
                 fmt: str | None = None) -> ImportJob:
    store, filename = job.store, job.filename
    try:
        name, message, parsed = memories_validate(store=store, data=data, filename=filename, fmt=fmt or None)
    except ValidationError as exc:
        return _job_failed(job, issues_as_dicts(exc.issues), exc.total)
    job.format, job.format_message = name, message[:255]
    job.history = [e.as_dict() for e in parsed.events]
    job.save(update_fields=["format", "format_message", "history"])
    try:
        return memories_import_records(store=store, records=parsed.records, job=job, inline=inline,
                                       progress=progress, classify=classify)
    except DjangoValidationError as exc:
        # A constraint the parser does not know (the insert is atomic, so nothing was written):
        # the job says so instead of staying "running".
        return _job_failed(job, *_refusal(filename, exc))


def import_staged_read(*, job: ImportJob) -> bytes:
    """The staged upload's bytes; the file is removed (it is read once)."""
    path = Path(job.staged_path)
    data = path.read_bytes()
    path.unlink(missing_ok=True)
    ImportJob.objects.filter(pk=job.pk).update(staged_path="")
    return data


def _claim(job_id: int) -> ImportJob | None:
    """Claim a staged job for this worker (a conditional update, so a redelivered task does not
    import twice); None when another worker has it."""
    if not ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.PENDING).update(
            status=ImportJob.Status.RUNNING):
        return None
    return ImportJob.objects.select_related("store", "created_by").get(pk=job_id)


def _unreadable(job: ImportJob, exc: OSError) -> None:
    logger.error("import job %s: staged file unreadable: %s", job.pk, exc)
    _job_failed(job, [{"file": job.filename, "line": None, "field": None,
                       "message": "the staged upload could not be read; upload it again"}], 1)


def import_staged_claim(*, job_id: int) -> tuple[ImportJob, bytes] | None:
    """Claim a staged job and read its upload (removed once read); None when another worker
    has it or the file is gone (the job then says so)."""
    job = _claim(job_id)
    if job is None:
        return None
    try:
        return job, import_staged_read(job=job)
    except OSError as exc:
        _unreadable(job, exc)
        return None


def import_staged_run(*, job_id: int) -> ImportJob:
    """A worker's turn: parse a staged memories file and go on as an inline-parsed one would.

    The worker holds an exclusive lock on the staged file while it works (the kernel drops it if
    the worker dies), so a task delivered twice runs once, and a redelivered task whose worker
    died resumes the job: a format that streams (MemAudit JSONL/JSON, mem0 export) is read from
    the file twice, a record at a time (validate, then insert a chunk per transaction), and a
    resumed job skips the validation it passed and the chunks already committed. Others are read
    whole (the file is removed before anything is written, so a crash leaves the job to rerun)."""
    job = ImportJob.objects.get(pk=job_id)
    if job.status not in (ImportJob.Status.PENDING, ImportJob.Status.RUNNING) or not job.staged_path:
        return job
    path = Path(job.staged_path)
    try:
        f = path.open("rb")
    except OSError as exc:
        claimed = _claim(job_id)
        if claimed is not None:
            _unreadable(claimed, exc)
        return ImportJob.objects.get(pk=job_id)
    with f:
        if not _lock(f):
            return job  # another worker has it
        job = ImportJob.objects.get(pk=job_id)
        if not job.staged_path or (job.status == ImportJob.Status.PENDING and _claim(job_id) is None):
            return job
        if job.status not in (ImportJob.Status.PENDING, ImportJob.Status.RUNNING):
            return job
        job = ImportJob.objects.select_related("store", "created_by").get(pk=job_id)
        importer = _streaming_importer(job, f.read(HEAD_BYTES))
        if importer is not None:
            return _import_streamed(job, path, importer[0], importer[1])
        try:
            data = import_staged_read(job=job)
        except OSError as exc:
            _unreadable(job, exc)
            return job
        return _import_into(job, data, inline=False, fmt=job.format or None)


def _lock(f) -> bool:
    """An exclusive, non-blocking lock on an open file; False when another process holds it."""
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _streaming_importer(job: ImportJob, head: bytes):
    if head.startswith(SQLITE_MAGIC):
        return None
    try:
        importer, message = detect(Head(head, job.filename, head.decode("utf-8", "replace")), MEMORIES,
                                   fmt=job.format or None)
    except ValidationError:
        return None  # the whole-file path reports it
    return (importer, message) if importer.streams else None


def _existing_ids(store: Store, ids: list[str]) -> list[str]:
    return list(Memory.objects.filter(store=store, external_id__in=ids).values_list("external_id", flat=True))


def _unstage(job: ImportJob, path: Path) -> None:
    path.unlink(missing_ok=True)
    ImportJob.objects.filter(pk=job.pk).update(staged_path="")


def _validate_streamed(job: ImportJob, path: Path, importer, message: str) -> Collector:
    """Pass 1: every record decoded and checked, only ids kept; the issues found. When there
    are none, the job records the format and the history (which marks it validated)."""
    store, filename = job.store, job.filename
    col = Collector()
    events: list = []
    ids: set[str] = set()
    pending: list[str] = []
    clashes: list[str] = []
    if path.stat().st_size > settings.MAX_UPLOAD_BYTES:
        col.add(filename, None, None, f"file is {path.stat().st_size:,} bytes, over the "
                                      f"{settings.MAX_UPLOAD_BYTES:,}-byte upload limit")
        return col
    with path.open("rb") as f:
        for rec in importer.stream(f, filename, col, events):
            ids.add(rec.id)
            pending.append(rec.id)
            if len(pending) == 500:
                clashes += _existing_ids(store, pending)
                pending = []
    clashes += _existing_ids(store, pending)
    for c in clashes:
        col.add(filename, None, "id", f"duplicate id {c!r}: already in store {store.slug!r}")
    named = {e.memory for e in events} - ids
    for m in sorted(named - set(_existing_ids(store, list(named)))):
        col.add(filename, None, "supersedes", f"memory {m!r} is neither in this file nor in store {store.slug!r}")
    if not ids and not col.total:
        col.add(filename, None, None, f"no memories found ({message})")
    if not col.total:
        job.format, job.format_message, job.total = importer.name, message[:255], len(ids)
        job.history = [e.as_dict() for e in events]
        job.save(update_fields=["format", "format_message", "total", "history"])
    return col


def _import_streamed(job: ImportJob, path: Path, importer, message: str) -> ImportJob:
    filename = job.filename
    try:
        if not job.format_message:  # not validated yet (a resumed job has been)
            col = _validate_streamed(job, path, importer, message)
            if col.total:
                _unstage(job, path)
                return _job_failed(job, issues_as_dicts(col.issues), col.total)
        with path.open("rb") as f:  # pass 2: the same records, a chunk per transaction
            # Pass 1 refused duplicates: this pass keeps no id per record (unique=False).
            pk_range = _insert_streamed(job, importer.stream(f, filename, Collector(), [], unique=False))
    except OSError as exc:
        _unreadable(job, exc)
        return job
    except DjangoValidationError as exc:
        _unstage(job, path)
        return _job_failed(job, *_refusal(filename, exc))
    _unstage(job, path)
    if pk_range is not None:
        history = bool(job.history)
        transaction.on_commit(lambda: dispatch.import_finish(job.pk, pk_range=pk_range, history=history))
    job.refresh_from_db()
    return job


def _insert_streamed(job: ImportJob, records: Iterable[MemoryRecord]) -> tuple[int, int] | None:
    """Insert the records a chunk per transaction, each chunk queued for signing and embedding
    once committed; skip the records a previous run of this job committed (pass 1 found none of
    the file's ids in the store, so an id there now is this job's). Return the range of the
    memories' primary keys. Nothing per record outlives its chunk. A refusal by the database
    (a constraint the validation cannot see, e.g. the same id stored meanwhile by another job)
    fails the job; the chunks committed before it stay, signed, as any memory would."""
    store = job.store
    lo = hi = None
    for chunk in _batched(records, CHUNK):
        committed = set(_existing_ids(store, [r.id for r in chunk]))
        fresh = [r for r in chunk if r.id not in committed]
        with transaction.atomic():
            pks = [m.pk for m in memories_create(store=store, records=_rows(fresh))] if fresh else []
        if committed:  # by a run that died: queue again what the housekeeper has not signed
            earlier = Memory.objects.filter(store=store, external_id__in=list(committed))
            lo, hi = _widen(lo, hi, list(earlier.values_list("pk", flat=True)))
            pks += list(earlier.filter(chain_head__isnull=True).values_list("pk", flat=True))
        lo, hi = _widen(lo, hi, pks)
        if pks:
            transaction.on_commit(lambda pks=pks: dispatch.import_chunk(job.pk, pks))
        reset_queries()  # with DEBUG on, the query log would keep every chunk's SQL
    return None if lo is None else (lo, hi)


def _widen(lo: int | None, hi: int | None, pks: list[int]) -> tuple[int | None, int | None]:
    if not pks:
        return lo, hi
    return (min(pks) if lo is None else min(lo, *pks)), (max(pks) if hi is None else max(hi, *pks))


def _rows(records: Iterable[MemoryRecord]) -> list[dict]:
    return [{"id": r.id, "text": r.text, "metadata": r.metadata, "created_at": r.created_at} for r in records]


def _refusal(filename: str, exc: DjangoValidationError) -> tuple[list[dict], int]:
    """A constraint the parser does not know, as the job's errors and their count."""
    by_field = exc.message_dict.items() if hasattr(exc, "error_dict") else [(None, exc.messages)]
    errors = [{"file": filename, "line": None, "field": field, "message": message}
              for field, messages in by_field for message in messages]
    return errors[:100], len(errors)


def import_job_result(*, job_id: int, total: int, errors: list[dict] | None = None, issue_count: int = 0) -> None:
    """Record a worker-side import of another kind (incidents): done with ``total`` rows, or failed."""
    job = ImportJob.objects.get(pk=job_id)
    if errors:
        _job_failed(job, errors[:100], max(issue_count, len(errors)))
        return
    ImportJob.objects.filter(pk=job_id).update(status=ImportJob.Status.DONE, total=total, done=total,
                                               finished_at=timezone.now())


def _job_failed(job: ImportJob, errors: list[dict], issue_count: int | None = None) -> ImportJob:
    job.status = ImportJob.Status.FAILED
    job.errors = errors[:100]
    job.issue_count = max(issue_count or 0, len(job.errors))
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "errors", "issue_count", "finished_at"])
    return job


def _batched(items: Iterable, size: int) -> Iterator[list]:
    batch: list = []
    for x in items:
        batch.append(x)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def memories_import_records(*, store: Store, records: Sequence[MemoryRecord], job: ImportJob,
                            inline: bool = False, progress=None, classify: bool = True) -> ImportJob:
    """Insert already-validated records (one transaction) and start the pipeline."""
    job.total = len(records)
    job.save(update_fields=["total"])
    memory_ids: list[int] = []
    with transaction.atomic():
        for chunk in chunks(records, CHUNK):
            memory_ids.extend(m.pk for m in memories_create(store=store, records=_rows(chunk)))
    if inline:
        import_pipeline_run(job_id=job.pk, memory_ids=memory_ids, progress=progress, classify=classify)
        job.refresh_from_db()
    else:
        transaction.on_commit(lambda: import_pipeline_enqueue(job_id=job.pk, memory_ids=memory_ids))
    return job


def import_pipeline_enqueue(*, job_id: int, memory_ids: list[int]) -> None:
    """Queue: per chunk, genesis signing (housekeeper) then embeddings (audit); the history
    (housekeeper, once every genesis is signed); then the classifier."""
    for chunk in chunks(memory_ids, CHUNK):
        dispatch.import_chunk(job_id, list(chunk))
    history = ImportJob.objects.filter(pk=job_id).exclude(history=[]).exists()
    dispatch.import_finish(job_id, memory_ids=memory_ids, history=history)


def import_pipeline_run(*, job_id: int, memory_ids: list[int], progress=None, classify: bool = True) -> None:
    """The same pipeline in this process (the caller holds the housekeeper key). ``classify=False``
    skips the ingest classifier (the benchmark's no-label arm measures the store without it)."""
    job = ImportJob.objects.select_related("store").get(pk=job_id)
    for chunk in chunks(memory_ids, CHUNK):
        memory_genesis_sign(memory_ids=list(chunk))
        import_chunk_embed(job_id=job_id, memory_ids=list(chunk))
        reset_queries()
        if progress is not None:
            job.refresh_from_db(fields=["done", "total"])
            progress(job.done, job.total)
    import_history_apply(job_id=job_id)
    if classify:
        ingest_classify(store=job.store, memory_ids=memory_ids, inline=True)
    else:
        ingest_prepared_drop(store_id=job.store_id)  # prepared beside the encoder for a pass not run
    import_job_finish(job_id=job_id)


def import_memories(*, job: ImportJob, memory_ids: Sequence[int] | None = None,
                    pk_range: Sequence[int] | None = None) -> QuerySet[Memory]:
    """An import's memories: by primary key, or (a streamed import) the job's store's memories
    whose primary key is in ``pk_range`` = (first, last)."""
    if pk_range is not None:
        return Memory.objects.filter(store_id=job.store_id, pk__gte=pk_range[0], pk__lte=pk_range[1])
    return Memory.objects.filter(pk__in=list(memory_ids or []))


def history_event_tag(event: dict) -> str:
    """The evidence string naming a foreign history event (how a re-run recognises it)."""
    return f"{event.get('source') or 'mem0'}:{event['kind']}:{event['source_id']}"


def history_apply(*, store: Store, events: Sequence[dict]) -> int:
    """Sign a foreign store's history on the memories' chains, in order; return how many were
    appended. Idempotent: an event whose tag is already in the memory's evidence is skipped.
    The caller holds the housekeeper role; every memory named must have a signed genesis."""
    names = {e["memory"] for e in events} | {e["new_memory"] for e in events if e.get("new_memory")}
    by_ext = {m.external_id: m for m in Memory.objects.filter(store=store, external_id__in=names)}
    done_tags: set[str] = set()
    for ev in ProvenanceNode.objects.filter(memory__in=list(by_ext.values())).values_list("evidence", flat=True):
        done_tags.update(str(x) for x in ev or [])
    items = []
    for e in events:
        tag = history_event_tag(e)
        target = by_ext.get(e["memory"])
        if tag in done_tags or target is None:
            continue
        evidence = [tag]
        if e["kind"] == "update":
            new = by_ext.get(e.get("new_memory") or "")
            evidence.append(f"superseded-by:{e['new_memory']}")
            if new is not None:
                evidence.append(f"sha256:{bytes(new.content_sha256).hex()}")
        else:
            evidence.append("retired")
        if e.get("at"):
            evidence.append(f"at:{e['at']}")
        items.append({"memory_id": target.pk, "valence_q": RETIRE_VALENCE_Q, "eta_q": RETIRE_ETA_Q,
                      "evidence": evidence})
        done_tags.add(tag)
    if items:
        transitions_append(items=items)
    return len(items)


def import_history_apply(*, job_id: int) -> int:
    """Apply the history an import recorded (see ``history_apply``); count it on the job."""
    job = ImportJob.objects.select_related("store").get(pk=job_id)
    if not job.history:
        return 0
    n = history_apply(store=job.store, events=job.history)
    ImportJob.objects.filter(pk=job_id).update(history_applied=n)
    return n


def import_history_ready(*, job_id: int) -> bool:
    """Whether every memory the history names has a signed genesis."""
    job = ImportJob.objects.get(pk=job_id)
    names = {e["memory"] for e in job.history} | {e["new_memory"] for e in job.history if e.get("new_memory")}
    return not Memory.objects.filter(store_id=job.store_id, external_id__in=names, chain_head__isnull=True).exists()


def import_chunk_embed(*, job_id: int | None, memory_ids: list[int]) -> None:
    """Embed a chunk and count it on the job. A chunk queued twice (a resumed job queues again
    what was not signed) is embedded once (the cache) and ``done`` never passes ``total``.

    The chunk is handed over shortest text first: the embedder encodes a few hundred texts a
    call and pads each batch to its longest, so a chunk in file order padded every call to the
    length spread of the whole file (23 % more tokens than texts at 13k mem0 rows, against 17 %
    for the same chunk sorted; ``bench/import_bench.py``'s encoder alone sorts its one call)."""
    memories = sorted(Memory.objects.filter(pk__in=memory_ids).select_related("store"), key=lambda m: len(m.text))
    helper = _prepare_beside(memories, job_id=job_id)
    try:
        embeddings_compute(memories=memories)
    finally:
        if helper is not None:
            helper.join()
    if job_id is not None:
        ImportJob.objects.filter(pk=job_id).update(done=Least(F("done") + len(memory_ids), F("total")))


def _prepare_beside(memories: Sequence[Memory], *, job_id: int | None) -> threading.Thread | None:
    """Start the classifier's per-text step 1 for a chunk (``ingest_prepare``) on a thread while
    this one embeds it, when the import will take the bounded pass: the encoder runs on one core
    and releases the GIL, so that work is done on the other core instead of after the last chunk.
    None when there is nothing to prepare."""
    if not memories:
        return None
    store_id = memories[0].store_id
    total = 0 if job_id is None else ImportJob.objects.values_list("total", flat=True).get(pk=job_id)
    if not ingest_prepare_wanted(store_id=store_id, total=total):
        return None
    texts = [(bytes(m.content_sha256), m.text) for m in memories]
    helper = threading.Thread(target=ingest_prepare, kwargs={"store_id": store_id, "texts": texts},
                              name=f"import-prepare-{store_id}", daemon=True)
    helper.start()
    return helper


def import_job_finish(*, job_id: int) -> None:
    """Mark the job done, then ask a worker to prepare the store for recall (its ANN graph and
    the chains verified ahead: ``dispatch.recall_prepare``), once per import, not per chunk, so
    the first recall after a large import neither scores by brute force nor verifies inline."""
    finished = ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.RUNNING).update(
        status=ImportJob.Status.DONE, finished_at=timezone.now())
    if finished:
        store_id = ImportJob.objects.values_list("store_id", flat=True).get(pk=job_id)
        transaction.on_commit(lambda: _recall_prepare(store_id))


def _recall_prepare(store_id: int) -> None:
    try:
        dispatch.recall_prepare(store_id)
    except Exception:  # noqa: BLE001 - a broker outage leaves recall to ask for it (embedding_store)
        logger.exception("could not queue recall_prepare for store %s after an import", store_id)


def content_sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


# --------------------------------------------------------------------------- continuous sync


SYNC_KINDS = ("mem0-history", "langgraph-sqlite")


def _sync_plan(*, store: Store, parsed: Parsed, source: str) -> Parsed:
    """What is new in ``parsed`` for this store: records whose id is absent (a present id with
    the same content hash is already synced; with another hash, a LangGraph item changed and
    becomes the next version superseding the newest one), and the events (history_apply skips
    the ones already signed)."""
    ids = [r.id for r in parsed.records]
    have: dict[str, bytes] = {}
    for i in range(0, len(ids), 500):
        have.update((e, bytes(h)) for e, h in Memory.objects.filter(store=store, external_id__in=ids[i:i + 500])
                    .values_list("external_id", "content_sha256"))
    records, events = [], list(parsed.events)
    for r in parsed.records:
        if r.id not in have:
            records.append(r)
            continue
        if have[r.id] == content_sha256(r.text) or source != "langgraph-sqlite":
            continue
        versions = [e for e in Memory.objects.filter(store=store, external_id__startswith=f"{r.id}#v")
                    .values_list("external_id", flat=True) if e[len(r.id) + 2:].isdigit()]
        latest = max(versions, key=lambda e: int(e.rsplit("#v", 1)[1]), default=r.id)
        latest_hash = have.get(latest) or bytes(Memory.objects.get(store=store, external_id=latest).content_sha256)
        if latest_hash == content_sha256(r.text):
            continue
        n = int(latest.rsplit("#v", 1)[1]) + 1 if latest != r.id else 2
        new_id = f"{r.id}#v{n}"
        records.append(MemoryRecord(new_id, r.text, {**r.metadata, "version": n, "supersedes": latest},
                                    r.metadata.get("updated_at") or r.created_at))
        events.append(HistoryEvent("update", latest, f"{r.id}@{hashlib.sha256(r.text.encode()).hexdigest()[:16]}",
                                   r.metadata.get("updated_at"), new_id, "langgraph"))
    return Parsed(records, events)


def store_sync(*, store: Store, source: str, path: str | Path, inline: bool = False) -> ImportJob | None:
    """Pull new and changed records from a mem0 history database or a LangGraph SqliteStore
    file (read-only) into ``store`` as signed entries; None when there is nothing new.

    Idempotent by source id and content hash: a second run over the same file appends nothing.
    mem0's history is re-read in its order each time (its UPDATE/DELETE become signed entries
    once); a LangGraph item whose value changed becomes its next version ``<id>#v<n>``."""
    if source not in SYNC_KINDS:
        raise ValidationError([Issue(str(path), None, "source", f"one of {', '.join(SYNC_KINDS)}, not {source!r}")])
    name = Path(path).name
    col = Collector()
    if source == "mem0-history":
        parsed = history_parse(history_rows(path), name, col)
    else:
        parsed = store_parse(store_rows(path), name, col)
    col.raise_if_any()
    plan = _sync_plan(store=store, parsed=parsed, source=source)
    if not plan.records and not any(_event_pending(store, e.as_dict()) for e in plan.events):
        return None
    job = ImportJob.objects.create(organization_id=store.organization_id, store=store, filename=f"sync:{name}"[:255],
                                   status=ImportJob.Status.RUNNING, format=source,
                                   format_message=f"continuous sync from {source}",
                                   history=[e.as_dict() for e in plan.events])
    if not plan.records:  # only history to sign
        job.total = 0
        job.save(update_fields=["total"])
        if inline:
            import_history_apply(job_id=job.pk)
            import_job_finish(job_id=job.pk)
        else:
            transaction.on_commit(lambda: dispatch.history_apply(job.pk))
        job.refresh_from_db()
        return job
    return memories_import_records(store=store, records=plan.records, job=job, inline=inline)


def _event_pending(store: Store, event: dict) -> bool:
    tag = history_event_tag(event)
    m = Memory.objects.filter(store=store, external_id=event["memory"]).first()
    if m is None:
        return True
    return not any(tag in (ev or []) for ev in ProvenanceNode.objects.filter(memory=m).values_list("evidence", flat=True))

