import random

import numpy as np
import pytest

from audits.engine.agents import Agent, AgentOutput, make_agent
from audits.engine.cmis import (
    AuditEvent,
    ReplayResult,
    combine_cmis,
    compute_cmis,
    find_groups,
    plan_replays,
    run_replay,
)
from audits.engine.harm import make_harm
from audits.engine.replay import Replayer
from audits.engine.retriever import Retriever

from .conftest import EVIL, qa_scenario


def _setup(scenario, embedder, agent=None):
    E = embedder.encode([m.text for m in scenario.memories])
    retriever = Retriever(scenario.memories, E, embedder=embedder)
    agent = agent or make_agent(scenario.agent)
    replayer = Replayer(agent, retriever, scenario.agent.top_k)
    harm = make_harm({"type": "contains", "target": EVIL})
    events = []
    for pr in scenario.probes:
        retrieved, out = replayer.replay(pr.query)
        if harm(pr.query, out.text):
            events.append(AuditEvent(pr.id, pr.query, out.text, [m.id for m in retrieved], harm,
                                     1.0))
    return retriever, replayer, events


def test_five_near_duplicate_poisons_hide_from_leave_one_out_but_not_from_group_ablation(
        hashing_embedder):
    sc = qa_scenario(n_targets=1, poisons_per_target=5)
    _, replayer, events = _setup(sc, hashing_embedder)
    assert len(events) == 1 and sorted(events[0].retrieved) == [f"p0_{j}" for j in range(5)]

    loo, _, _ = compute_cmis(events, replayer, group_ablation=False)
    assert all(loo[f"p0_{j}"].cmis == 0.0 for j in range(5))  # each hides behind the others

    grouped, groups, _ = compute_cmis(events, replayer)
    assert {f"p0_{j}" for j in range(5)} <= set(groups[0].members)
    for j in range(5):
        s = grouped[f"p0_{j}"]
        assert s.cmis == 1.0 and s.single == 0.0 and s.group == 1.0
    assert not any(grouped.get(m) and grouped[m].cmis > 0 for m in grouped if m.startswith("c"))


def test_groups_reach_store_duplicates_beyond_top_k(hashing_embedder):
    sc = qa_scenario(n_targets=1, poisons_per_target=8)
    retriever, replayer, events = _setup(sc, hashing_embedder)
    groups = find_groups(events[0].retrieved, retriever)
    assert any(set(g.members) == {f"p0_{j}" for j in range(8)} for g in groups)
    scores, _, _ = compute_cmis(events, replayer)
    assert all(scores[f"p0_{j}"].cmis == 1.0 for j in range(8))


def test_plan_replays_is_a_flat_list_of_independent_jobs_that_can_run_in_any_order(
        hashing_embedder):
    sc = qa_scenario(n_targets=3, poisons_per_target=5)
    retriever, replayer, events = _setup(sc, hashing_embedder)
    groups = find_groups([m for e in events for m in e.retrieved], retriever)
    jobs = plan_replays(events, groups)
    assert len({j.job_id for j in jobs}) == len(jobs)
    per_event = [j for j in jobs if j.event_id == events[0].id]
    assert [j.kind for j in per_event].count("base") == 1
    assert [j.kind for j in per_event].count("single") == 5
    # A worker elsewhere: fresh replayer, shuffled jobs, results serialised and gathered back.
    fresh = Replayer(make_agent(sc.agent), retriever, sc.agent.top_k)
    evmap = {e.id: e for e in events}
    shuffled = jobs[:]
    random.Random(1).shuffle(shuffled)
    remote = [ReplayResult.from_dict(run_replay(j, evmap[j.event_id], fresh).to_dict())
              for j in shuffled]
    local = [run_replay(j, evmap[j.event_id], replayer) for j in jobs]
    a = combine_cmis(remote, events, groups)
    b = combine_cmis(local, events, groups)
    assert {k: v.cmis for k, v in a.items()} == {k: v.cmis for k, v in b.items()}


def test_combine_sums_or_maxes_over_events(hashing_embedder):
    sc = qa_scenario(n_targets=1, poisons_per_target=3)
    _, replayer, events = _setup(sc, hashing_embedder)
    twice = [events[0], AuditEvent("again", events[0].query, events[0].output,
                                   events[0].retrieved, events[0].harm, 1.0)]
    mx, _, _ = compute_cmis(twice, replayer, combine="max")
    sm, _, _ = compute_cmis(twice, replayer, combine="sum")
    pid = events[0].retrieved[0]
    assert mx[pid].cmis == 1.0 and sm[pid].cmis == 2.0 and sm[pid].n_events == 2
    with pytest.raises(ValueError):
        compute_cmis(twice, replayer, combine="median")


def test_replay_cache_saves_agent_calls_and_counts_only_real_ones(hashing_embedder):
    sc = qa_scenario(n_targets=2, poisons_per_target=5)
    retriever, _, _ = _setup(sc, hashing_embedder)
    cache: dict = {}
    r1 = Replayer(make_agent(sc.agent), retriever, 5, cache)
    r1.replay("what is the capital of Country0?")
    r1.replay("what is the capital of Country0?")
    assert (r1.calls, r1.cache_hits) == (1, 1)
    r2 = Replayer(make_agent(sc.agent), retriever, 5, cache)  # e.g. another worker, same table
    r2.replay("what is the capital of Country0?")
    assert r2.calls == 0


class CoinAgent(Agent):
    """A stochastic agent: with the poison retrieved, harmful in 3 of 4 samples."""

    connector = "coin"

    def answer(self, query, retrieved, candidates=None):
        poisoned = any(m.id.startswith("p") for m in retrieved)
        samples = [EVIL, EVIL, EVIL, "City"] if poisoned else ["City"] * 4
        return AgentOutput(samples[0], samples)


def test_stochastic_agents_get_a_sample_mean_and_confidence_interval(hashing_embedder):
    sc = qa_scenario(n_targets=1, poisons_per_target=1, clean_per_topic=4)
    retriever = Retriever(sc.memories, hashing_embedder.encode([m.text for m in sc.memories]),
                          embedder=hashing_embedder)
    replayer = Replayer(CoinAgent({}), retriever, 5)
    harm = make_harm({"type": "contains", "target": EVIL})
    retrieved, _ = replayer.replay("what is the capital of Country0?")
    ev = AuditEvent("e", "what is the capital of Country0?", EVIL, [m.id for m in retrieved],
                    harm, 1.0)
    scores, _, results = compute_cmis([ev], replayer)
    base = next(r for r in results if r.kind == "base")
    assert base.harm_mean == 0.75 and base.harm_se > 0
    s = scores["p0_0"]
    # reference = min(h(y*), base replay) = 0.75; removing the poison gives 0.
    assert s.cmis == pytest.approx(0.75) and s.ci_low <= s.cmis <= s.ci_high
    clean = next(m for m in ev.retrieved if m.startswith("c"))
    assert scores[clean].cmis == pytest.approx(0.0)
    assert scores[clean].ci_high > scores[clean].ci_low


def test_a_non_reproducing_incident_does_not_credit_every_candidate(hashing_embedder):
    sc = qa_scenario(n_targets=0)
    retriever = Retriever(sc.memories, hashing_embedder.encode([m.text for m in sc.memories]),
                          embedder=hashing_embedder)
    replayer = Replayer(make_agent(sc.agent), retriever, 5)
    harm = make_harm({"type": "contains", "target": EVIL})
    retrieved, _ = replayer.replay("what is the capital of Country3?")
    ev = AuditEvent("e", "what is the capital of Country3?", EVIL, [m.id for m in retrieved],
                    harm, 1.0)
    scores, _, _ = compute_cmis([ev], replayer)
    assert all(s.cmis == 0.0 for s in scores.values())
    assert all(not e["reproduced"] for s in scores.values() for e in s.per_event)


def test_retriever_backfills_a_removed_memory_and_scales_by_weight(hashing_embedder):
    sc = qa_scenario(n_targets=0, n_topics=3)
    E = hashing_embedder.encode([m.text for m in sc.memories])
    r = Retriever(sc.memories, E, embedder=hashing_embedder)
    top = r.retrieve("what is the capital of Country1?", 3)
    again = r.retrieve("what is the capital of Country1?", 3, exclude={top[0].id})
    assert [m.id for m in again] == [m.id for m in top[1:]] + [again[-1].id]
    assert again[-1].id not in {m.id for m in top}
    w = np.ones(len(sc.memories))
    w[r.index[top[0].id]] = 0.1
    low = Retriever(sc.memories, E, w, embedder=hashing_embedder)
    assert low.retrieve("what is the capital of Country1?", 1)[0].id != top[0].id
    blocked = Retriever(sc.memories, E, embedder=hashing_embedder, blocked={top[0].id})
    assert top[0].id not in {m.id for m in blocked.retrieve("what is the capital of Country1?", 5)}


def test_group_credit_skips_clean_look_alikes_that_do_not_carry_the_harm(hashing_embedder):
    from audits.engine.audit import _carries_harm

    sc = qa_scenario(n_targets=1, poisons_per_target=5)
    retriever, replayer, events = _setup(sc, hashing_embedder)
    groups = find_groups(events[0].retrieved, retriever)
    # A loose group that also swept in a clean record of the same topic.
    from audits.engine.cmis import Group

    loose = Group("gloose", (*groups[0].members, "c0_0"), 0.5)
    jobs = plan_replays(events, [loose])
    results = [run_replay(j, events[0], replayer) for j in jobs]
    plain = combine_cmis(results, events, [loose])
    filtered = combine_cmis(results, events, [loose], carries_harm=_carries_harm(sc.memories))
    assert plain["c0_0"].cmis == 1.0
    assert "c0_0" not in filtered and filtered["p0_0"].cmis == 1.0


def test_leave_one_out_credit_skips_a_clean_record_whose_removal_lets_the_cure_in():
    # Removing "clean" alone cured the event (the honest answer backfilled its top-5 slot), but
    # its content does not carry the harm: with `carries_harm` it gets no causal credit; the
    # poison whose removal also cures keeps its credit.
    harm = make_harm({"type": "contains", "target": EVIL})
    ev = AuditEvent("e", "q?", EVIL, ["poison", "clean"], harm, 1.0)
    results = [ReplayResult("b", "e", "base", "", (), EVIL, [1.0], ["poison", "clean"]),
               ReplayResult("s1", "e", "single", "poison", ("poison",), "x", [0.0], ["clean"]),
               ReplayResult("s2", "e", "single", "clean", ("clean",), "x", [0.0], ["poison"])]
    text = {"poison": f"Q: q?\nA: {EVIL}", "clean": "Q: other?\nA: fine"}

    def carries(event, mid):
        return EVIL.casefold() in text[mid].casefold()

    assert combine_cmis(results, [ev], [])["clean"].cmis == 1.0
    filtered = combine_cmis(results, [ev], [], carries_harm=carries)
    assert "clean" not in filtered and filtered["poison"].cmis == 1.0
