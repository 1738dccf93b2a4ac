"""The housekeeper hand-offs of the ledger's services and request paths (``ledger.tasks`` registers
the tasks behind these names; see ``orgs.dispatch``)."""

from __future__ import annotations

from orgs.dispatch import send


def receipt_key_endorse(organization_id: int, receipt_key_id: int) -> None:
    """Ask the housekeeper to endorse a recall-receipt key (eager mode: done on return)."""
    send("ledger.tasks.receipt_key_endorse_task", organization_id, receipt_key_id)


def outcomes_apply(organization_id: int) -> None:
    """Ask the housekeeper to fold an organization's pending outcomes into transitions."""
    send("ledger.tasks.outcomes_apply_task", organization_id)
