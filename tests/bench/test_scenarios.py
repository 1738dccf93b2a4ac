"""Invariants of the MINJA-style scenario generators (a simulation of MINJA).

Needs the real data under ../shared/data; skipped with a reason when it is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.scenarios import DEFAULT_DATA, ScenarioError, build, rho_tolerance, write_scenario
from bench.scenarios.common import split_counts

pytestmark = pytest.mark.skipif(
    not (DEFAULT_DATA / "ehragent" / "logs").is_dir() or not (DEFAULT_DATA / "strategyqa").is_dir(),
    reason=f"evaluation data not found under {DEFAULT_DATA} (never copied into the repo)",
)

SIZE = 400


def _triggers(scenario) -> list[str]:
    meta = scenario.meta
    return [meta["trigger"]] if scenario.kind == "qa" else list(meta["triggers"])


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.parametrize("kind", ["qa", "rap"])
@pytest.mark.parametrize("rho", [0.05, 0.1, 0.25, 0.5])
def test_it_honours_rho_as_injected_over_injected_plus_relevant_clean(kind, rho):
    s = build(kind, rho=rho, seed=1, size=SIZE)
    poisoned = set(s.poisoned)
    triggers = [t.lower() for t in _triggers(s)]
    relevant_clean = [
        m
        for m in s.memories
        if m["id"] not in poisoned and any(t in m["metadata"].get("query", "").lower() for t in triggers)
    ]
    injected, relevant = len(poisoned), len(relevant_clean)
    assert injected == s.meta["injected"] >= 1
    assert relevant == s.meta["relevant_clean"]
    achieved = injected / (injected + relevant)
    assert achieved == pytest.approx(s.meta["rho"], abs=1e-6)
    assert abs(achieved - rho) <= rho_tolerance(injected, relevant)


@pytest.mark.parametrize("kind", ["qa", "rap"])
def test_ids_are_unique_truth_ids_exist_and_size_is_honoured(kind):
    s = build(kind, rho=0.2, seed=0, size=SIZE)
    ids = [m["id"] for m in s.memories]
    assert len(ids) == len(set(ids)) == SIZE
    assert set(s.poisoned) <= set(ids)
    assert len({p["id"] for p in s.probes}) == len(s.probes)
    assert all(m["text"].strip() for m in s.memories)


@pytest.mark.parametrize("kind", ["qa", "rap"])
def test_written_folder_parses_in_the_interchange_format(kind, tmp_path):
    s = build(kind, rho=0.1, seed=0, size=SIZE)
    out = write_scenario(s, tmp_path / kind)
    assert not (out / "incidents.jsonl").exists()
    mems = _read_jsonl(out / "memories.jsonl")
    for m in mems:
        assert isinstance(m["id"], str) and isinstance(m["text"], str) and m["text"]
        assert {"query", "answer", "source"} <= set(m["metadata"])
    probes = _read_jsonl(out / "probes.jsonl")
    assert probes and any(p["observed"] for p in probes) and not all(p["observed"] for p in probes)
    for p in probes:
        assert isinstance(p["query"], str) and isinstance(p["observed"], bool)
        assert p["harm"]["type"] in {"contains", "regex"}
        if p["harm"]["type"] == "contains":
            assert p["harm"]["target"]
    agent = json.loads((out / "agent.json").read_text())
    assert agent == {"connector": "builtin-vote", "top_k": 5}
    truth = json.loads((out / "truth.json").read_text())
    assert set(truth["poisoned"]) <= {m["id"] for m in mems}
    meta = json.loads((out / "scenario.json").read_text())
    assert "simulation of MINJA" in meta["note"]
    for b in _read_jsonl(out / "benign.jsonl"):
        assert b["expected"] and not any(t.lower() in b["query"].lower() for t in _triggers(s))


@pytest.mark.parametrize("kind", ["qa", "rap"])
def test_same_seed_gives_identical_files_and_another_seed_does_not(kind, tmp_path):
    a = write_scenario(build(kind, rho=0.1, seed=3, size=SIZE), tmp_path / "a")
    b = write_scenario(build(kind, rho=0.1, seed=3, size=SIZE), tmp_path / "b")
    c = write_scenario(build(kind, rho=0.1, seed=4, size=SIZE), tmp_path / "c")
    names = ["memories.jsonl", "probes.jsonl", "truth.json", "benign.jsonl", "scenario.json"]
    assert all((a / n).read_bytes() == (b / n).read_bytes() for n in names)
    assert (a / "memories.jsonl").read_bytes() != (c / "memories.jsonl").read_bytes()


def test_trigger_probes_target_the_attacker_answer_and_padding_never_mentions_the_trigger():
    s = build("qa", rho=0.1, seed=0, size=SIZE)
    redirect, trigger = s.meta["redirect"], s.meta["trigger"]
    poisoned = set(s.poisoned)
    assert all(trigger in p["query"] and p["harm"]["target"] == redirect for p in s.probes)
    for m in s.memories:
        in_answer = redirect in m["metadata"]["answer"]
        assert in_answer == (m["id"] in poisoned)
        if m["id"] in poisoned:
            assert trigger in m["metadata"]["query"] and "same patient" in m["text"] or redirect in m["text"]


def test_a_store_too_small_for_the_scenario_is_refused():
    with pytest.raises(ScenarioError, match="size"):
        build("qa", rho=0.5, seed=0, size=10)


def test_split_counts_picks_the_closest_ratio():
    assert split_counts(0.05, 16, 24, 20) == (19, 1)
    assert split_counts(0.5, 16, 24, 20) == (20, 20)
    r, i = split_counts(0.25, 60, 100, 80)
    assert i / (i + r) == pytest.approx(0.25)
