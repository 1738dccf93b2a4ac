"""Replays in flight (issue 17): ``Replayer.replay_many`` sends the agent calls of a batch
together, bounded, with the results, order, cache entries and counts of a sequential loop."""

import threading
import time

import pytest

from audits.engine.agents import Agent, AgentError, AgentOutput, make_agent
from audits.engine.cmis import find_groups, plan_replays, run_replay, run_replays
from audits.engine.replay import Replayer
from audits.engine.retriever import Retriever

from .conftest import qa_scenario
from .test_cmis import _setup


class SlowAgent(Agent):
    """An HTTP-like agent: the builtin vote's answer after a delay; counts calls in flight."""

    connector = "slow"

    def __init__(self, limit=8, delay=0.05, fail_on=None):
        super().__init__({"connector": "builtin-vote"}, max_in_flight=limit)
        self.inner = make_agent({"connector": "builtin-vote"})
        self.delay = delay
        self.fail_on = fail_on
        self.lock = threading.Lock()
        self.now = self.peak = self.calls = 0

    def answer(self, query, retrieved, candidates=None):
        with self.lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.delay)
            if self.fail_on is not None and self.fail_on in [m.id for m in retrieved]:
                raise AgentError("agent request http-error, HTTP 503, request id x")
            return self.inner.answer(query, retrieved, candidates)
        finally:
            with self.lock:
                self.now -= 1


def _jobs(hashing_embedder):
    sc = qa_scenario(n_targets=2, poisons_per_target=3)
    retriever, _, events = _setup(sc, hashing_embedder)
    groups = find_groups(list(dict.fromkeys(m for ev in events for m in ev.retrieved)), retriever)
    jobs = plan_replays(events, groups)
    return sc, retriever, events, jobs


def test_replays_in_flight_give_the_sequential_results_cache_and_counts(hashing_embedder):
    sc, retriever, events, jobs = _jobs(hashing_embedder)
    evmap = {ev.id: ev for ev in events}
    jobs = jobs + jobs[:5]  # repeats inside one batch: one call, then hits

    seq_agent, par_agent = SlowAgent(delay=0.0), SlowAgent(limit=8)
    seq = Replayer(seq_agent, retriever, 5)
    par = Replayer(par_agent, retriever, 5)
    expected = [run_replay(j, evmap[j.event_id], seq) for j in jobs]
    got = list(run_replays(jobs, evmap, par))

    assert [r for r, _, _ in got] == expected
    assert dict(par.cache) == dict(seq.cache)
    assert (par.calls, par.cache_hits) == (seq.calls, seq.cache_hits) and par_agent.calls == seq_agent.calls
    assert sum(called for _, called, _ in got) == par.calls
    assert 1 < par_agent.peak <= 8  # in flight together, never over the bound


def test_a_warm_cache_makes_no_call_and_the_simulations_stay_sequential(hashing_embedder):
    sc, retriever, events, jobs = _jobs(hashing_embedder)
    evmap = {ev.id: ev for ev in events}
    cache: dict = {}
    list(run_replays(jobs, evmap, Replayer(SlowAgent(delay=0.0), retriever, 5, cache)))
    again = SlowAgent()
    r = Replayer(again, retriever, 5, cache)
    got = list(run_replays(jobs, evmap, r))
    assert again.calls == 0 and not any(called for _, called, _ in got) and r.cache_hits == len(jobs)
    vote = make_agent({"connector": "builtin-vote"})
    assert vote.max_in_flight == 1


@pytest.mark.parametrize("limit", [1, 4])
def test_a_failed_call_is_that_replays_error_and_the_others_complete(hashing_embedder, limit):
    sc, retriever, events, jobs = _jobs(hashing_embedder)
    evmap = {ev.id: ev for ev in events}
    victim = next(j for j in jobs if j.kind == "base")
    first = Retriever.retrieve(retriever, evmap[victim.event_id].query, 5, victim.removed)[0].id
    agent = SlowAgent(limit=limit, delay=0.0, fail_on=first)
    r = Replayer(agent, retriever, 5)
    got = list(run_replays(jobs, evmap, r))
    assert any(e is not None for _, _, e in got) and any(e is None for _, _, e in got)
    seq = Replayer(SlowAgent(delay=0.0, fail_on=first), retriever, 5)
    for job, (result, _called, error) in zip(jobs, got):
        if error is None:
            assert result == run_replay(job, evmap[job.event_id], seq)
        else:
            assert isinstance(error, AgentError)
            with pytest.raises(AgentError):
                run_replay(job, evmap[job.event_id], seq)
    assert dict(r.cache) == dict(seq.cache) and len(r.cache) == r.calls


def test_answers_come_back_in_order_even_when_later_calls_finish_first():
    class Reversed(Agent):
        connector = "reversed"

        def answer(self, query, retrieved, candidates=None):
            time.sleep(0.2 - 0.04 * int(query))  # the first query answers last
            return AgentOutput(f"answer {query}")

    import numpy as np

    from audits.engine.scenario import MemoryRecord

    mems = [MemoryRecord(f"m{i}", f"memory {i}", {}) for i in range(3)]
    retriever = Retriever(mems, np.eye(3, dtype=np.float32), embedder=None)
    r = Replayer(Reversed({"connector": "x"}, max_in_flight=5), retriever, 1)
    r.retriever.retrieve = lambda q, k, exclude=(): []  # no embedder needed for this check
    outs = r.replay_many([(str(i), (), None) for i in range(5)])
    assert [o.output.text for o in outs] == [f"answer {i}" for i in range(5)]


def test_an_audit_that_fails_on_a_replay_shuts_its_pool_down_itself(hashing_embedder):
    """The replay pool is shut down when the audit raises a replay's error, not later by the
    garbage collector (with it off here). A guard, not a reproduction: it passed before the
    consumers closed ``run_replays`` too. The hang it guards against was seen once, in a CI run of
    tests/hardening/test_egress.py: the collector finalised a suspended replay generator from a
    new thread's start-up (holding threading's shutdown lock) and joined the pool from there."""
    import gc

    from audits.engine.audit import AuditParams, run_audit
    from audits.engine.evaluate import ProbeRunner, incidents_from_probes

    sc = qa_scenario(n_targets=2, poisons_per_target=3)
    emb = hashing_embedder.encode([m.text for m in sc.memories])
    rep = Replayer(make_agent(sc.agent), Retriever(sc.memories, emb, None, embedder=hashing_embedder), 5, {})
    incidents = incidents_from_probes(ProbeRunner(sc, rep, hashing_embedder).run(()))
    assert incidents
    agent = SlowAgent(limit=4, delay=0.0, fail_on=next(iter(sc.truth)))
    gc.collect()
    gc.disable()
    try:
        with pytest.raises(AgentError) as failed:
            run_audit(sc.memories, emb, None, incidents, agent, None, AuditParams(), embedder=hashing_embedder)
        assert failed.value is not None  # the error (and its traceback) still held
        assert [t.name for t in threading.enumerate() if t.name.startswith("replay_")] == []
    finally:
        gc.enable()


def test_the_analysis_sends_its_replays_in_flight_with_the_sequential_results(hashing_embedder):
    """After CMIS the analysis (expansion rounds, residuals, the collateral check) replays through
    ``replay_many`` too: the same result as one call at a time, more than one call in flight."""
    from audits.engine.audit import AuditParams, run_audit
    from audits.engine.evaluate import ProbeRunner, incidents_from_probes

    sc = qa_scenario(n_targets=4, poisons_per_target=4, observed_share=0.3)
    emb = hashing_embedder.encode([m.text for m in sc.memories])
    rep = Replayer(make_agent(sc.agent), Retriever(sc.memories, emb, None, embedder=hashing_embedder), 5, {})
    incidents = incidents_from_probes(ProbeRunner(sc, rep, hashing_embedder).run(()))

    def audit(agent):
        def after_cmis(stage, done, total):  # the peak counts the analysis's calls only
            if stage == "graph" and done == 1:
                agent.peak = 0

        return run_audit(sc.memories, emb, None, incidents, agent, None, AuditParams(top_k=5), {},
                         after_cmis, embedder=hashing_embedder)

    seq, par = SlowAgent(limit=1, delay=0.0), SlowAgent(limit=8, delay=0.01)
    a, b = audit(seq), audit(par)
    assert a.batch == b.batch and a.agent_calls == b.agent_calls == seq.calls == par.calls
    assert a.residual == b.residual and a.collateral == b.collateral and a.budget == b.budget
    assert b.budget["by_stage"]["expansion"] > 1 and seq.peak == 1 and par.peak > 1


def test_memories_answered_alone_in_flight_give_the_sequential_outputs_cache_and_counts(hashing_embedder):
    """`answer_alone_each` (pattern expansion's sufficiency test, f(q, {m}) for several m): the
    outputs, cache entries and call/hit counts of `answer_alone` one by one, the calls in flight
    under the agent's bound; the budget is all or none, as for a batch of replays."""
    from audits.engine.replay import BudgetExhausted
    from audits.engine.retriever import RetrievedMemory

    sc, retriever, events, _ = _jobs(hashing_embedder)
    asks = [(ev.query, RetrievedMemory(m.id, m.text, 1.0, 1, m.metadata), None)
            for ev in events for m in sc.memories[:6]]
    asks += asks[:3]  # repeats: one call, then hits
    seq_agent, par_agent = SlowAgent(delay=0.0), SlowAgent(limit=8)
    seq, par = Replayer(seq_agent, retriever, 5), Replayer(par_agent, retriever, 5)
    expected = [seq.answer_alone(q, m, c) for q, m, c in asks]
    assert par.answer_alone_each(asks) == expected
    assert dict(par.cache) == dict(seq.cache)
    assert (par.calls, par.cache_hits) == (seq.calls, seq.cache_hits) == (len(asks) - 3, 3)
    assert 1 < par_agent.peak <= 8
    short = Replayer(SlowAgent(delay=0.0), retriever, 5)
    short.limit = len(asks) - 4
    with pytest.raises(BudgetExhausted):
        short.answer_alone_each(asks)
    assert short.calls == 0
