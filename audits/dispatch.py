"""Every message the audit services send, in one small module: the only place in ``audits`` that
names tasks. Services enqueue through these functions; ``audits.tasks`` imports the services, never
the reverse, so there is no import loop between them. Tasks are found by name through
``orgs.dispatch`` (the one mechanism every app's hand-offs share).
"""

from __future__ import annotations

from collections.abc import Sequence

from orgs.dispatch import send, signature, task

AUDIT_RUN = "audits.tasks.audit_run_task"
AUDIT_REPLAY = "audits.tasks.audit_replay_task"
AUDIT_ANALYSIS = "audits.tasks.audit_analysis_task"
PROPOSALS_SYNC = "audits.tasks.proposals_sync_task"
RESUME_UNFINISHED = "audits.tasks.audit_runs_resume_unfinished_task"
LABEL_APPEND = "ledger.tasks.label_append_task"
CORRECTION_TRANSITION = "ledger.tasks.correction_transition_task"
TREE_HEAD_AFTER_LABELS = "ledger.tasks.tree_head_after_labels_task"


def audit_run_enqueue(run_id: int) -> None:
    """Step 1 of a run: plan and fan out (``services.runs.audit_run_execute``)."""
    send(AUDIT_RUN, run_id)


def audit_replays_enqueue(run_id: int, job_ids: Sequence[str]) -> None:
    """Step 2: one chunk of replay jobs (``services.runs.audit_run_replay``)."""
    send(AUDIT_REPLAY, run_id, list(job_ids))


def audit_analysis_enqueue(run_id: int) -> None:
    """Step 3: the analysis (``services.analysis.audit_run_analyse``)."""
    send(AUDIT_ANALYSIS, run_id)


def audit_runs_resume_enqueue() -> None:
    send(RESUME_UNFINISHED)


def proposal_label_enqueue(proposal_id: int) -> None:
    """Ask the housekeeper (the only process holding signing keys) to sign what the proposal's
    recorded state calls for; once signed, the linked sync marks the proposal decided."""
    task(LABEL_APPEND).apply_async(kwargs={"decision": f"proposal:{proposal_id}"},
                                   link=signature(PROPOSALS_SYNC))


def correction_transition_enqueue(proposal_id: int) -> None:
    """Ask the housekeeper to sign what an approved correction calls for (its down-weight; the
    message names the proposal only); once signed, the linked sync marks the proposal approved."""
    task(CORRECTION_TRANSITION).apply_async(kwargs={"decision": f"proposal:{proposal_id}"},
                                            link=signature(PROPOSALS_SYNC))


def tree_head_after_labels_enqueue(organization_id: int) -> None:
    """After a batch of labels (one housekeeper worker, FIFO): a tree head covering them."""
    send(TREE_HEAD_AFTER_LABELS, organization_id)
