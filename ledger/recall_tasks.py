"""Recall-side Celery tasks: embeddings and the ingest classifier, on the ``audit`` queue.

They hold no signing key: the classifier's labels are appended by ``label_append_task`` on the
housekeeper queue. Routed by ``CELERY_TASK_ROUTES["ledger.recall_tasks.*"]``.
"""

from __future__ import annotations

from celery import shared_task

from ledger.models import ImportJob, Memory

# How long the classifier waits for the housekeeper to sign an import's genesis entries.
CLASSIFY_RETRY_SECONDS = 5
CLASSIFY_MAX_RETRIES = 720


@shared_task
def embeddings_compute_task(import_job_id: int | None, memory_ids: list[int]) -> None:
    from ledger.imports import import_chunk_embed

    import_chunk_embed(job_id=import_job_id, memory_ids=memory_ids)


@shared_task(bind=True, max_retries=CLASSIFY_MAX_RETRIES)
def ingest_classify_task(self, import_job_id: int, memory_ids: list[int]) -> None:
    """Run the classifier once every memory of the import is signed and embedded."""
    from ledger.classifier_service import ingest_classify
    from ledger.imports import import_job_finish

    job = ImportJob.objects.select_related("store").get(pk=import_job_id)
    unsigned = Memory.objects.filter(pk__in=memory_ids, chain_head__isnull=True).exists()
    if unsigned or job.done < job.total:
        raise self.retry(countdown=CLASSIFY_RETRY_SECONDS)
    ingest_classify(store=job.store, memory_ids=memory_ids)
    import_job_finish(job_id=import_job_id)


@shared_task
def import_parse_task(import_job_id: int) -> None:
    """Parse a staged upload (over IMPORT_INLINE_MAX_BYTES) away from the web request."""
    from ledger.imports import import_staged_run

    import_staged_run(job_id=import_job_id)


@shared_task
def store_sync_task(store_id: int, source: str, path: str) -> int | None:
    """The scheduled form of ``manage.py sync_store`` (a beat entry per synced store)."""
    from ledger.imports import store_sync
    from ledger.models import Store

    job = store_sync(store=Store.objects.get(pk=store_id), source=source, path=path)
    return job.pk if job is not None else None
