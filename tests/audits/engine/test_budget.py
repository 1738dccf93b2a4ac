"""The audit's agent-call budget (issue 16: ≤ 600 agent calls for an audit of 5 incidents).

A replay past ``Replayer.limit`` raises before the agent is called; ``analyse`` counts every
stage's calls and stops the exploratory stages where the budget runs out, keeping the batch it
had and still running the collateral check."""

from __future__ import annotations

import pytest

from audits.engine.agents import make_agent
from audits.engine.audit import AuditParams, call_budget, run_audit
from audits.engine.cmis import run_replay
from audits.engine.harm import HarmSpec
from audits.engine.replay import BudgetExhausted, Replayer
from audits.engine.scenario import IncidentCase

from .conftest import EVIL, qa_scenario
from .test_cmis import _setup
from .test_replay import SlowAgent, _jobs


def test_a_replay_past_the_limit_raises_before_the_agent_is_called_and_cache_hits_still_answer(
        hashing_embedder):
    sc, retriever, events, jobs = _jobs(hashing_embedder)
    evmap = {ev.id: ev for ev in events}
    agent = SlowAgent(delay=0.0)
    r = Replayer(agent, retriever, 5)
    run_replay(jobs[0], evmap[jobs[0].event_id], r)
    r.limit = r.calls
    with pytest.raises(BudgetExhausted):
        run_replay(jobs[1], evmap[jobs[1].event_id], r)
    assert agent.calls == r.calls == 1
    assert run_replay(jobs[0], evmap[jobs[0].event_id], r)  # cached: answered at the limit
    # A batch in flight is all or none: it needs more calls than are left, so none is made.
    r.limit = r.calls + 1
    with pytest.raises(BudgetExhausted):
        r.replay_many([(evmap[j.event_id].query, j.removed, None) for j in jobs[1:4]])
    assert agent.calls == r.calls == 1


def test_the_default_budget_is_600_calls_up_to_5_incidents_then_120_each():
    assert [call_budget(n) for n in (1, 5, 6, 10)] == [600, 600, 720, 1200]
    assert call_budget(5, 80) == 80


def _audit(hashing_embedder, **params):
    """Four planted targets, of which the incidents observed only some: the rest are the
    exploratory stages' to find."""
    sc = qa_scenario(n_targets=4, poisons_per_target=4, observed_share=0.3)
    _, _, events = _setup(sc, hashing_embedder)
    observed = {p.id for p in sc.probes if p.observed}
    incidents = [IncidentCase(id=ev.id, query=ev.query, output=ev.output, retrieved=ev.retrieved,
                              harm=HarmSpec("contains", {"target": EVIL})) for ev in events if ev.id in observed]
    E = hashing_embedder.encode([m.text for m in sc.memories])
    return run_audit(sc.memories, E, None, incidents, make_agent(sc.agent), None,
                     AuditParams(top_k=sc.agent.top_k, **params), {}, embedder=hashing_embedder)


def test_every_stage_is_counted_and_an_ample_budget_changes_nothing(hashing_embedder):
    free = _audit(hashing_embedder)
    ample = _audit(hashing_embedder, max_calls=100_000)
    b = free.budget
    assert b["limit"] == 600 and b["cut"] == [] and b["used"] == free.agent_calls
    assert sum(b["by_stage"].values()) == free.agent_calls
    assert b["by_stage"]["cmis"] == free.cmis_agent_calls > 0 and b["by_stage"]["collateral"] > 0
    assert ample.batch == free.batch and ample.agent_calls == free.agent_calls
    assert ample.budget["by_stage"] == b["by_stage"]


def test_a_tight_budget_stops_the_exploratory_stages_keeps_the_batch_and_still_checks_collateral(
        hashing_embedder):
    free = _audit(hashing_embedder)
    by = free.budget["by_stage"]
    essential = by["cmis"] + by["residual"]
    explored = sum(by.get(s, 0) for s in ("conditional", "expansion", "copies", "reach"))
    assert explored > 0, "the scenario must explore beyond the first batch for this test to mean anything"
    # Room for the first batch and its collateral check, not for the exploration.
    limit = essential + by["collateral"] + 2 * 20
    tight = _audit(hashing_embedder, max_calls=limit)
    assert tight.agent_calls <= limit
    assert tight.budget["cut"], "a stage must have been stopped"
    assert set(tight.budget["cut"]) <= {"conditional", "expansion", "copies", "reach", "baselines"}
    assert tight.collateral.get("questions") == 20
    assert set(tight.batch) <= set(free.batch) and tight.batch
    # What the tight audit proposes stands on the same evidence: the first batch is the same.
    assert tight.residual_rounds[0]["batch_size"] == free.residual_rounds[0]["batch_size"]


def test_out_of_calls_mid_round_the_expansion_round_adds_nothing_and_the_audit_goes_on(hashing_embedder, monkeypatch):
    from audits.engine import expansion

    free = _audit(hashing_embedder)
    first = free.residual_rounds[0]["batch_size"]
    assert any(r.get("added") for r in free.residual_rounds if r.get("expansion")), \
        "the expansion must add to the first batch for this test to mean anything"
    asked = []

    def out_of_calls(*args, **kwargs):  # the budget runs out in the round's CMIS replays
        asked.append(args)
        raise BudgetExhausted(0)

    monkeypatch.setattr(expansion, "replay_all", out_of_calls)
    cut = _audit(hashing_embedder)
    assert asked and "expansion" in cut.budget["cut"]
    assert not [r for r in cut.residual_rounds if r.get("expansion")]  # no round, no dormant step
    assert cut.residual_rounds[0]["batch_size"] == first and cut.collateral.get("questions") == 20
