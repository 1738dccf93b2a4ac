"""Where the ledger's services and request paths enqueue housekeeper tasks (one place).

Tasks import services (a task loads by id and calls one service); a service that must hand work
to the housekeeper enqueues through here, so no service module imports ``ledger.tasks`` and the
two never form an import loop. Each function imports its task when called: ``ledger.tasks``
imports the services, which import this module.
"""

from __future__ import annotations


def receipt_key_endorse(organization_id: int, receipt_key_id: int) -> None:
    """Ask the housekeeper to endorse a recall-receipt key (eager mode: done on return)."""
    from ledger.tasks import receipt_key_endorse_task  # local: ledger.tasks imports the services

    receipt_key_endorse_task.delay(organization_id, receipt_key_id)


def outcomes_apply(organization_id: int) -> None:
    """Ask the housekeeper to fold an organization's pending outcomes into transitions."""
    from ledger.tasks import outcomes_apply_task  # local: ledger.tasks imports the services

    outcomes_apply_task.delay(organization_id)
