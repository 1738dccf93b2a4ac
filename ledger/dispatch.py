"""Where the ledger's services queue work for the Celery workers (issue 12).

Tasks import the services; services never import tasks. A service that hands work on calls one
of these functions, which address the tasks by their registered NAME through ``orgs.dispatch``
(the mechanism every app's hand-offs share), so no import loop can form. The names are stable:
queued messages and beat entries carry them (``ledger/import_tasks.py`` keeps its tasks'
historical ``ledger.recall_tasks.*`` names, which ``CELERY_TASK_ROUTES`` sends to the ``audit``
queue).

Every function is called after the data it names is committed (``transaction.on_commit`` or
outside a transaction), so a worker never looks for rows it cannot see.
"""

from __future__ import annotations

from celery import chain

from orgs.dispatch import send, signature

# Audit queue (no signing key): parse a staged upload, embed, classify, sync a foreign store.
IMPORT_PARSE = "ledger.recall_tasks.import_parse_task"
EMBEDDINGS_COMPUTE = "ledger.recall_tasks.embeddings_compute_task"
INGEST_CLASSIFY = "ledger.recall_tasks.ingest_classify_task"
STORE_SYNC = "ledger.recall_tasks.store_sync_task"
# Ahead of recall (ledger/tasks.py, audit queue): grow the ANN graph, verify what moved.
RECALL_PREPARE = "ledger.recall_tasks.recall_prepare_task"
# Housekeeper queue (holds the signing key).
GENESIS_SIGN = "ledger.tasks.memory_genesis_sign_task"
HISTORY_APPLY = "ledger.tasks.import_history_apply_task"
LABEL_APPEND = "ledger.tasks.label_append_task"
RECEIPT_KEY_ENDORSE = "ledger.tasks.receipt_key_endorse_task"
OUTCOMES_APPLY = "ledger.tasks.outcomes_apply_task"


def import_parse(job_id: int) -> None:
    """A worker parses and imports the staged upload of ``job_id``."""
    send(IMPORT_PARSE, job_id)


def import_chunk(job_id: int | None, memory_ids: list[int]) -> None:
    """The housekeeper signs the chunk's genesis entries, then a worker embeds the chunk and
    advances the job's ``done`` count."""
    chain(signature(GENESIS_SIGN, list(memory_ids)),
          signature(EMBEDDINGS_COMPUTE, job_id, list(memory_ids))).apply_async()


def import_finish(job_id: int, *, memory_ids: list[int] | None = None, pk_range: tuple[int, int] | None = None,
                  history: bool = False) -> None:
    """After every chunk is queued: the foreign history (housekeeper, once every genesis is
    signed) when ``history``, then the ingest classifier over the import's memories (given as
    ids or, for a streamed import, as the range of their primary keys), which finishes the job."""
    classify = signature(INGEST_CLASSIFY, job_id, memory_ids, pk_range=list(pk_range) if pk_range else None)
    if history:
        # The history first (it waits for the genesis entries), so the job is "done" only once
        # every update and delete is signed.
        chain(signature(HISTORY_APPLY, job_id), classify).apply_async()
    else:
        classify.apply_async()


def history_apply(job_id: int) -> None:
    send(HISTORY_APPLY, job_id)


def finding_label(finding_id: int) -> None:
    """Ask the housekeeper to sign the label an ingest-classifier finding calls for (it re-checks
    the finding first; the message carries the finding's id, never a label)."""
    send(LABEL_APPEND, decision=f"finding:{finding_id}")


def receipt_key_endorse(organization_id: int, receipt_key_id: int) -> None:
    """Ask the housekeeper to endorse a recall-receipt key (eager mode: done on return)."""
    send(RECEIPT_KEY_ENDORSE, organization_id, receipt_key_id)


def outcomes_apply(organization_id: int) -> None:
    """Ask the housekeeper to fold an organization's pending outcomes into transitions."""
    send(OUTCOMES_APPLY, organization_id)


def recall_prepare(store_id: int) -> None:
    """A worker grows the store's ANN graph and verifies ahead of recall what moved since its last
    run (``ledger.embedding_store.store_prepare``); asked for by recall when its index calls for it."""
    send(RECALL_PREPARE, store_id)
