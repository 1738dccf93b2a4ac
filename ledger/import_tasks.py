"""Import-side Celery tasks on the ``audit`` queue: parse a staged upload, embed a chunk, run the
ingest classifier, sync a foreign store.

They hold no signing key: genesis entries, history and the classifier's labels are signed by
the housekeeper's tasks (``ledger.tasks``). Each task loads by id and calls a service in
``ledger.imports``; services queue tasks through ``ledger.dispatch`` by name. The names are the
historical ``ledger.recall_tasks.*`` ones (queued messages and beat entries carry them; routed by
``CELERY_TASK_ROUTES["ledger.recall_tasks.*"]``).
"""

from __future__ import annotations

from celery import shared_task

from ledger import imports
from ledger.classifier_service import ingest_classify
from ledger.models import ImportJob, Store

# How long the classifier waits for the housekeeper to sign an import's genesis entries.
CLASSIFY_RETRY_SECONDS = 5
CLASSIFY_MAX_RETRIES = 720


@shared_task(name="ledger.recall_tasks.embeddings_compute_task")
def embeddings_compute_task(import_job_id: int | None, memory_ids: list[int]) -> None:
    imports.import_chunk_embed(job_id=import_job_id, memory_ids=memory_ids)


@shared_task(bind=True, max_retries=CLASSIFY_MAX_RETRIES, name="ledger.recall_tasks.ingest_classify_task")
def ingest_classify_task(self, import_job_id: int, memory_ids: list[int] | None = None,
                         pk_range: list[int] | None = None) -> None:
    """Run the classifier once every memory of the import is signed and embedded. The import's
    memories are ``memory_ids`` or, for a streamed import, the store's memories whose primary
    key is in ``pk_range`` (first, last)."""
    job = ImportJob.objects.select_related("store").get(pk=import_job_id)
    memories = imports.import_memories(job=job, memory_ids=memory_ids, pk_range=pk_range)
    if memories.filter(chain_head__isnull=True).exists() or job.done < job.total:
        raise self.retry(countdown=CLASSIFY_RETRY_SECONDS)
    # A streamed import hands the classifier its range, not a list of every primary key.
    ingest_classify(store=job.store, memory_ids=None if pk_range is not None else list(memory_ids or []),
                    pk_range=pk_range)
    imports.import_job_finish(job_id=import_job_id)


@shared_task(name="ledger.recall_tasks.import_parse_task")
def import_parse_task(import_job_id: int) -> None:
    """Parse a staged upload (over IMPORT_INLINE_MAX_BYTES) away from the web request; a
    redelivered task (its worker died) resumes the job from its last committed chunk."""
    imports.import_staged_run(job_id=import_job_id)


@shared_task(name="ledger.recall_tasks.store_sync_task")
def store_sync_task(store_id: int, source: str, path: str) -> int | None:
    """The scheduled form of ``manage.py sync_store`` (a beat entry per synced store)."""
    job = imports.store_sync(store=Store.objects.get(pk=store_id), source=source, path=path)
    return job.pk if job is not None else None


__all__ = ["embeddings_compute_task", "import_parse_task", "ingest_classify_task", "store_sync_task"]
