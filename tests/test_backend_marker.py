"""The PostgreSQL + Redis pass of `.ci/run` runs `pytest -m backend`: the tests that touch the
database (and, through it, the broker's tasks). `tests/conftest.py` marks them from the
fixtures they use, so a new test needs no hand-written marker to be run on both backends, and a
test that touches neither (an engine or bench test, most of the suite's time) runs once."""

from __future__ import annotations

import pytest


def test_a_test_that_uses_the_database_runs_on_every_backend(request, organization):
    assert request.node.get_closest_marker("backend") is not None


@pytest.mark.django_db
def test_a_test_marked_for_the_database_runs_on_every_backend(request):
    assert request.node.get_closest_marker("backend") is not None


def test_a_test_that_touches_no_backend_runs_once(request):
    assert request.node.get_closest_marker("backend") is None
