"""An audit run on eager Celery: plan, fan-out, analysis; progress; resumption after a crash."""

from __future__ import annotations

import pytest

from audits import services
from audits.models import AuditRun, ReplayJobRecord
from audits.services import replay as replay_services

pytestmark = pytest.mark.django_db(transaction=True)


class CountingAgent:
    """Wraps the real connector and counts the calls that reach it; can crash after N."""

    def __init__(self, inner, crash_after: int | None = None):
        self.inner = inner
        self.calls = 0
        self.crash_after = crash_after

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def answer(self, query, retrieved, candidates=None):
        if self.crash_after is not None and self.calls >= self.crash_after:
            raise WorkerKilled("worker killed mid-chunk")
        self.calls += 1
        return self.inner.answer(query, retrieved, candidates)


class WorkerKilled(BaseException):
    """BaseException, like SystemExit from a killed worker: nothing catches it on the way."""


@pytest.fixture
def counting(monkeypatch):
    agents: list[CountingAgent] = []
    real = services.agent_for

    def factory(config, crash_after=None):
        a = CountingAgent(real(config), crash_after)
        agents.append(a)
        return a

    monkeypatch.setattr(replay_services, "agent_for", factory)
    return agents


def _start(poisoned, alice, **settings):
    incidents = services.incidents_import(store=poisoned.store, data=poisoned.incidents_jsonl(),
                                          filename="incidents.jsonl", user=alice)
    return services.audit_run_create(store=poisoned.store, incident_ids=[i.pk for i in incidents],
                                     settings=settings, user=alice)


def test_it_finds_the_poisons_and_reports_progress(poisoned, alice):
    run = _start(poisoned, alice)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    assert run.replays_total > 0 and run.replays_done == run.replays_total
    assert run.progress_percent == 100
    batch = {s.memory.external_id for s in run.suspects.filter(in_batch=True).select_related("memory")}
    assert batch == poisoned.poisoned
    assert run.results["residual"]["harmful"] == 0
    assert set(run.results["baselines"]) == {"random", "frequency", "nn-contradiction", "cmis", "mcg"}
    assert run.results["agent_calls"] > 0
    top = run.suspects.order_by("rank").first()
    assert top.per_event and top.ds >= run.suspects.order_by("rank").last().ds


def test_it_rejects_bad_settings(poisoned, alice):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as exc:
        _start(poisoned, alice, alpha=1.5, agent={"connector": "telepathy"}, consistency="magic")
    assert {"alpha", "agent", "consistency"} <= set(exc.value.message_dict)
    assert AuditRun.objects.count() == 0


def test_a_budget_too_small_fails_the_run_with_the_reason(poisoned, alice):
    run = _start(poisoned, alice, budget=2)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.FAILED
    assert "over the budget of 2" in run.error


def test_the_run_counts_its_calls_by_stage_against_its_budget_and_the_page_says_what_the_budget_cut(
        poisoned, alice, client):
    free = _start(poisoned, alice)
    free.refresh_from_db()
    b = free.results["budget"]
    assert b["limit"] == 600 and b["cut"] == [] and b["used"] == free.results["agent_calls"] > 0
    assert sum(b["by_stage"].values()) == free.results["agent_calls"]
    assert b["by_stage"]["cmis"] == free.results["cmis_agent_calls"]

    # A second store (nothing cached) with a budget the CMIS plan and the first batch fit in, not the rest.
    from tests.audits.factories import poisoned_store_import

    other = poisoned_store_import(organization=poisoned.store.organization, slug="tight")
    limit = b["by_stage"]["cmis"] + b["by_stage"]["residual"] + 1
    run = _start(other, alice, budget=limit)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    tight = run.results["budget"]
    assert tight["limit"] == limit and tight["cut"] and run.results["agent_calls"] <= limit
    client.force_login(alice)
    page = client.get(f"/audits/{run.pk}/").content.decode()
    assert f"of a budget of {limit}" in page and 'id="budget-cut"' in page
    assert f"the incidents&#x27; counterfactual replays (CMIS) {tight['by_stage']['cmis']}" in page
    assert "The agent-call budget ran out" in page


def test_it_resumes_after_a_crash_with_the_same_result_and_no_double_count(poisoned, alice, monkeypatch):
    clean = _start(poisoned, alice)
    clean.refresh_from_db()
    clean_batch = sorted(clean.results["batch"])
    total = clean.replays_total

    # A second store with the same content: nothing cached, the crash happens half-way.
    from tests.audits.factories import poisoned_store_import

    other = poisoned_store_import(organization=poisoned.store.organization, slug="copy")
    half = total // 2
    monkeypatch.setattr(replay_services, "agent_for", lambda config: CountingAgent(
        services.make_agent(config), crash_after=half))
    with pytest.raises(WorkerKilled):
        _start(other, alice)
    run = AuditRun.objects.filter(store=other.store).get()
    done_before = run.jobs.filter(status=ReplayJobRecord.Status.DONE).count()
    assert run.status == AuditRun.Status.RUNNING
    assert 0 < done_before < run.replays_total
    assert run.replays_done == done_before

    # The worker comes back: a fresh process (no cached context) resumes the run.
    # A worker that starts resumes every unfinished run by itself (worker_ready).
    services._CONTEXTS.items.clear()
    agents: list[CountingAgent] = []
    monkeypatch.setattr(replay_services, "agent_for", lambda config: agents.append(
        CountingAgent(services.make_agent(config))) or agents[-1])
    from audits.tasks import _resume_after_a_worker_restart

    _resume_after_a_worker_restart()
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    assert run.replays_done == run.replays_total == total
    assert sorted(run.results["batch"]) == clean_batch
    # Recorded replays were not replayed again: the resumed CMIS work reached the agent only
    # for jobs that were still pending (cache entries written before the crash answer the rest).
    resumed_cmis_calls = sum(a.calls for a in agents)
    assert resumed_cmis_calls <= total - done_before + run.results["analysis_agent_calls"]


def test_replaying_a_chunk_twice_counts_it_once(poisoned, alice):
    run = _start(poisoned, alice)
    run.refresh_from_db()
    ids = list(run.jobs.values_list("job_id", flat=True)[:5])
    AuditRun.objects.filter(pk=run.pk).update(status=AuditRun.Status.RUNNING)
    assert services.audit_run_replay(audit_run_id=run.pk, job_ids=ids) == 0
    run.refresh_from_db()
    assert run.replays_done == run.replays_total


def test_an_audit_plans_its_replays_once_and_the_analysis_replays_none_of_them(poisoned, alice, monkeypatch):
    from audits.engine import audit as engine_audit
    from audits.services import analysis, runs

    plans = []
    real_plan = runs.plan_cmis
    monkeypatch.setattr(runs, "plan_cmis", lambda *a, **k: plans.append(1) or real_plan(*a, **k))
    monkeypatch.setattr(analysis, "plan_cmis", lambda *a, **k: pytest.fail("the analysis planned again"))
    monkeypatch.setattr(engine_audit, "run_replays", lambda *a, **k: pytest.fail("the analysis replayed the plan"))
    run = _start(poisoned, alice)
    run.refresh_from_db()
    assert run.status == AuditRun.Status.DONE, run.error
    assert plans == [1]
    assert sorted(run.results["batch"]) == sorted(poisoned.poisoned)
    # The recorded plan is what the analysis used: its groups and every recorded replay.
    assert run.results["replays"] == run.replays_total == run.jobs.count()
    assert run.results["cmis_agent_calls"] == run.jobs.filter(result__agent_call=True).count() > 0


def test_every_stage_the_engine_counts_calls_under_is_described_on_the_results_page():
    """A stage the budget counts (`_Budget.run(stage, …)`) is named on the results page by what it
    does, not by its key (the peeling stage, added 2026-12-06, among them)."""
    import inspect
    import re

    from audits.engine import audit as engine_audit
    from audits.ui_selectors import BUDGET_STAGES

    stages = set(re.findall(r"budget\.run\(\s*\"(\w+)\"", inspect.getsource(engine_audit)))
    assert {"residual", "peel", "expansion", "collateral"} <= stages
    assert stages <= set(BUDGET_STAGES), stages - set(BUDGET_STAGES)
