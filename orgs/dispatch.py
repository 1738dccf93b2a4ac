"""Hand-offs to Celery tasks by name: the one way a service queues work (issue 12).

Tasks import services (a task loads by id and calls one service), never the reverse, so a service
that queues work names the task instead of importing it: ``send("ledger.tasks.outcomes_apply_task",
org_id)``. The task is looked up in the Celery app by its registered name; a process that has not
imported the task's module yet (a web process imports no task module; Celery's autodiscovery of
every app costs seconds there) imports just that module at the first call, after every module has
loaded, so no import cycle can form. Each app keeps its hand-offs in its own small module
(``ledger.dispatch``, ``audits.dispatch``); this is the mechanism they share. A task found this way
is the module's task object, so eager mode and a test's patched ``delay`` apply as usual.
"""

from __future__ import annotations

from importlib import import_module

from celery import current_app
from celery.app.task import Task
from celery.canvas import Signature


def task(name: str) -> Task:
    """The registered task called ``name`` (``KeyError`` names it when its module defines none)."""
    app = current_app
    if name not in app.tasks:
        try:
            import_module(name.rpartition(".")[0])  # registers the module's tasks with the app
        except ModuleNotFoundError:
            pass
    if name not in app.tasks:
        # A task that keeps a historical name its module no longer has (``ledger.recall_tasks.*``
        # lives in ``ledger.import_tasks``): load what the app imports (CELERY_IMPORTS, autodiscovery).
        app.loader.import_default_modules()
    return app.tasks[name]


def send(name: str, *args: object, **kwargs: object) -> None:
    """Queue the task ``name`` (in eager mode it has run on return)."""
    task(name).delay(*args, **kwargs)


def signature(name: str, *args: object, **kwargs: object) -> Signature:
    """An immutable signature of ``name`` for chains and links."""
    return task(name).si(*args, **kwargs)
