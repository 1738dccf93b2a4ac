"""Hand-offs to Celery tasks by name, so that services never import task modules.

Tasks import services (a task loads by id and calls one service), never the reverse. A service
that queues work calls :func:`send` with a task's registered name; each task module registers
its tasks when it is imported (the app configs import them as Django loads: ``orgs.apps``,
``ledger.apps``; the Celery worker imports them too). The import graph has no loop, function-local
imports included. The sender is looked up at send time, so a patched ``delay`` is the one used.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

_senders: dict[str, Callable[..., object]] = {}


def register(name: str, send: Callable[..., object]) -> None:
    """Route ``name`` to ``send`` (typically ``lambda *a: some_task.delay(*a)``)."""
    _senders[name] = send


def send(name: str, *args: object) -> None:
    """Queue the task registered as ``name`` (in eager mode it has run on return)."""
    sender = _senders.get(name)
    if sender is None:
        raise ImproperlyConfigured(f"no task is registered as {name!r}: task modules register theirs when their "
                                   "app loads (see orgs.dispatch)")
    sender(*args)
