import json

import pytest

from audits.engine.agents import make_agent
from audits.engine.audit import AuditParams, run_audit
from audits.engine.evaluate import KEYS, evaluate_all, evaluate_scenario
from audits.engine.scenario import load_scenario

from .conftest import EVIL, qa_scenario


def test_evaluate_returns_exactly_the_design_keys(hashing_embedder):
    row = evaluate_scenario(qa_scenario(), hashing_embedder)
    assert tuple(row) == KEYS == ("asr_before", "asr_after", "removed", "true_positives",
                                  "false_positives", "precision", "recall", "agent_calls",
                                  "seconds")


@pytest.mark.parametrize("poisons", [3, 5, 8])
def test_memaudit_removes_every_poison_and_nothing_else(hashing_embedder, poisons):
    row = evaluate_scenario(qa_scenario(poisons_per_target=poisons, seed=poisons),
                            hashing_embedder)
    assert row["asr_before"] == pytest.approx(0.2)
    assert row["asr_after"] == 0.0
    assert row["precision"] == 1.0 and row["recall"] == 1.0
    assert row["agent_calls"] > 0


def test_full_method_is_at_least_as_good_as_every_baseline(hashing_embedder):
    rows = evaluate_all(qa_scenario(n_topics=30, n_targets=6, poisons_per_target=3, seed=2),
                        hashing_embedder)
    full = rows["memaudit"]
    for name, row in rows.items():
        assert row["removed"] == full["removed"], name
        assert full["asr_after"] <= row["asr_after"], name
        assert full["recall"] >= row["recall"], name
    assert rows["random"]["recall"] < full["recall"]


def test_incidents_default_to_the_observed_harmful_probes(hashing_embedder):
    sc = qa_scenario(n_targets=4, observed_share=0.0)  # only probe q0 is observed
    params = AuditParams(expansion_harm_reach=False, reach_candidates=0)
    row = evaluate_scenario(sc, hashing_embedder, params=params)
    assert row["asr_before"] == pytest.approx(0.2)
    # One incident shows one attack; without harm reach (nor the format-free reach) the audit
    # finds its poisons only.
    assert row["true_positives"] == 5 and row["false_positives"] == 0
    assert row["asr_after"] == pytest.approx(0.15)
    # The format-free reach (engine/reach.py) goes from that attack's poisons to the others'.
    row = evaluate_scenario(sc, hashing_embedder, params=AuditParams(expansion_harm_reach=False))
    assert row["true_positives"] == 20 and row["false_positives"] == 0
    assert row["asr_after"] == 0.0


def test_harm_reach_finds_the_unobserved_attacks_that_plant_the_same_answer(hashing_embedder):
    # Changed in issue 16: the other three attacks plant the same answer; their records carry
    # the incident's harm and sit nearer the seeds than any clean reference record, so the
    # audit replays their own questions and removes them too.
    sc = qa_scenario(n_targets=4, observed_share=0.0)
    row = evaluate_scenario(sc, hashing_embedder)
    assert row["true_positives"] == 20 and row["false_positives"] == 0
    assert row["asr_after"] == 0.0


def test_a_clean_store_has_nothing_to_remove(hashing_embedder):
    row = evaluate_scenario(qa_scenario(n_targets=0), hashing_embedder)
    assert row["asr_before"] == 0.0 and row["removed"] == 0 and row["agent_calls"] == 0


def test_evaluate_reads_a_section_5_folder(tmp_path, hashing_embedder):
    sc = qa_scenario(n_targets=2)
    with open(tmp_path / "memories.jsonl", "w") as f:
        f.writelines(json.dumps({"id": m.id, "text": m.text, "metadata": m.metadata}) + "\n" for m in sc.memories)
    with open(tmp_path / "probes.jsonl", "w") as f:
        f.writelines(json.dumps({"id": p.id, "query": p.query, "harm": p.harm.to_dict(),
                                "observed": p.observed}) + "\n" for p in sc.probes)
    (tmp_path / "agent.json").write_text('{"connector": "builtin-vote", "top_k": 5}')
    (tmp_path / "truth.json").write_text(json.dumps({"poisoned": sorted(sc.truth)}))
    row = evaluate_scenario(load_scenario(tmp_path), hashing_embedder)
    assert row["asr_after"] == 0.0 and row["recall"] == 1.0 and row["precision"] == 1.0


def test_run_audit_reports_suspects_graph_residual_and_baselines(hashing_embedder):
    sc = qa_scenario(n_targets=2)
    from audits.engine.evaluate import ProbeRunner, incidents_from_probes
    from audits.engine.replay import Replayer
    from audits.engine.retriever import Retriever

    E = hashing_embedder.encode([m.text for m in sc.memories])
    agent = make_agent(sc.agent)
    rows = ProbeRunner(sc, Replayer(agent, Retriever(sc.memories, E, embedder=hashing_embedder),
                                     5), hashing_embedder).run(())
    incidents = incidents_from_probes(rows)
    stages = []
    res = run_audit(sc.memories, E, None, incidents, agent, None, AuditParams(), {},
                    lambda s, d, t: stages.append(s), embedder=hashing_embedder)
    assert set(res.batch) == sc.truth and res.residual["harmful"] == 0
    top = res.suspects[0]
    assert top.id in sc.truth and top.per_event and top.per_event[0]["group_id"]
    assert res.graph["nodes"] and set(res.baselines) >= {"random", "cmis", "mcg"}
    assert {"replay", "graph", "fusion"} <= set(stages)
    assert res.to_dict()["agent_calls"] == res.agent_calls
    assert all(EVIL not in r["output"] for r in res.residual["events"])
