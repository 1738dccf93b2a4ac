"""Browser tests run against a live server and a real Celery worker subprocess, so tasks must
go through the broker: the eager fixture is switched off here."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _celery_eager():
    """Overrides the suite's eager Celery (where a parent conftest has one): tasks go to the
    worker this test starts."""
    from memaudit_site.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False
    yield
    app.conf.task_always_eager = previous
