"""Fixtures of the hardening tier (tamper, concurrency, faults, fuzzing, authorization, deploy).

- ``FUZZ_EXAMPLES`` (default 200) is the fuzzing budget for the whole tier; each property gets
  its share (``fuzz_settings``). ``FUZZ_EXAMPLES=10000 .venv/bin/python -m pytest
  tests/hardening -k fuzz`` is the long run; the number of cases actually executed is printed
  at the end of the run (``hardening figures``).
- Tests marked ``real_worker`` run with Celery *not* eager (they start worker subprocesses);
  everything else keeps the shared eager fixture.
- ``recall_env``: the HashingEmbedder test double and fresh per-process recall caches.
"""

from __future__ import annotations

import os
import socket
from collections import Counter, defaultdict

import pytest
from django.db import connection
from hypothesis import HealthCheck, settings

FUZZ_EXAMPLES = int(os.getenv("FUZZ_EXAMPLES", "200") or "200")
FUZZ_PROPERTIES = 12  # the number of @fuzz properties in this tier: each gets an equal share
FUZZ_RANDOM = os.getenv("FUZZ_RANDOM", "") == "1"

# Figures collected while the tier runs, printed by pytest_terminal_summary.
FIGURES: dict[str, Counter] = defaultdict(Counter)
TABLES: dict[str, list[tuple]] = defaultdict(list)


def fuzz_settings(share: float = 1.0) -> settings:
    """Hypothesis settings for one property: its share of FUZZ_EXAMPLES, deterministic in CI."""
    n = max(5, int(FUZZ_EXAMPLES * share / FUZZ_PROPERTIES))
    return settings(max_examples=n, deadline=None, database=None, derandomize=not FUZZ_RANDOM,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much],
                    print_blob=True)


def count_case(suite: str) -> None:
    FIGURES["fuzz cases"][suite] += 1


def pytest_configure(config):
    config.addinivalue_line("markers", "real_worker: starts Celery worker subprocesses (Celery not eager)")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not FIGURES and not TABLES:
        return
    tr = terminalreporter
    tr.section("hardening figures")
    for name, counts in FIGURES.items():
        tr.write_line(f"{name}: {sum(counts.values())} in total")
        for key, n in sorted(counts.items()):
            tr.write_line(f"  {key:<48} {n:>8}")
    for name, rows in TABLES.items():
        tr.write_line(f"{name}:")
        for row in rows:
            tr.write_line("  " + " | ".join(str(c) for c in row))


@pytest.fixture(autouse=True)
def _celery_eager(request, settings):
    """The shared eager fixture, except for tests that start real workers."""
    from memaudit_site.celery import app

    if request.node.get_closest_marker("real_worker"):
        previous = app.conf.task_always_eager
        app.conf.task_always_eager = False
        yield
        app.conf.task_always_eager = previous
        return
    previous = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


@pytest.fixture
def recall_env(settings):
    from ledger.embedding_store import index_invalidate
    from ledger.recall import verification_cache_clear
    from ledger.verification import memory_verify_cache_clear

    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    index_invalidate()
    verification_cache_clear()
    memory_verify_cache_clear()
    yield
    index_invalidate()
    verification_cache_clear()
    memory_verify_cache_clear()


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def needs_postgres():
    return pytest.mark.skipif(not os.getenv("DATABASE_URL", "").startswith("postgres"),
                              reason="needs PostgreSQL (DATABASE_URL=postgres://...)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
