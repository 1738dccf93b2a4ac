"""Every message the audit services send, in one small module: the only place that names tasks.

Services enqueue through these functions; ``audits.tasks`` imports the services, never the
reverse, so there is no import loop between them. Tasks are looked up by name in the Celery app
(``celery.current_app``); a task not registered yet (a web process imports no task module) is
registered by importing the module its name gives, at the first call — after every module has
loaded, so no import cycle can form — and then honours ``CELERY_TASK_ALWAYS_EAGER`` like any task.
(The app's own autodiscovery would do the same for every installed app, in seconds, not
milliseconds.)
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module

from celery import current_app
from celery.app.task import Task

AUDIT_RUN = "audits.tasks.audit_run_task"
AUDIT_REPLAY = "audits.tasks.audit_replay_task"
AUDIT_ANALYSIS = "audits.tasks.audit_analysis_task"
PROPOSALS_SYNC = "audits.tasks.proposals_sync_task"
RESUME_UNFINISHED = "audits.tasks.audit_runs_resume_unfinished_task"
LABEL_APPEND = "ledger.tasks.label_append_task"
TREE_HEAD_AFTER_LABELS = "ledger.tasks.tree_head_after_labels_task"


def task(name: str) -> Task:
    """The registered task called ``name`` (KeyError names it when no app module defines it)."""
    app = current_app
    if name not in app.tasks:
        import_module(name.rpartition(".")[0])  # registers the module's tasks with the app
    return app.tasks[name]


def audit_run_enqueue(run_id: int) -> None:
    """Step 1 of a run: plan and fan out (``services.runs.audit_run_execute``)."""
    task(AUDIT_RUN).delay(run_id)


def audit_replays_enqueue(run_id: int, job_ids: Sequence[str]) -> None:
    """Step 2: one chunk of replay jobs (``services.runs.audit_run_replay``)."""
    task(AUDIT_REPLAY).delay(run_id, list(job_ids))


def audit_analysis_enqueue(run_id: int) -> None:
    """Step 3: the analysis (``services.analysis.audit_run_analyse``)."""
    task(AUDIT_ANALYSIS).delay(run_id)


def audit_runs_resume_enqueue() -> None:
    task(RESUME_UNFINISHED).delay()


def proposal_label_enqueue(proposal_id: int) -> None:
    """Ask the housekeeper (the only process holding signing keys) to sign what the proposal's
    recorded state calls for; once signed, the linked sync marks the proposal decided."""
    task(LABEL_APPEND).apply_async(kwargs={"decision": f"proposal:{proposal_id}"},
                                   link=task(PROPOSALS_SYNC).si())


def tree_head_after_labels_enqueue(organization_id: int) -> None:
    """After a batch of labels (one housekeeper worker, FIFO): a tree head covering them."""
    task(TREE_HEAD_AFTER_LABELS).delay(organization_id)
