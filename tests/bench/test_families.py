"""Invariants of the issue-16 scenario families (bench/scenarios/families.py)."""

from __future__ import annotations

import pytest

from bench.scenarios import DEFAULT_DATA, ScenarioError
from bench.scenarios.families import FAMILIES, HOLDOUT, TUNE, build_family, families, poison_dir_for

pytestmark = pytest.mark.skipif(
    not (DEFAULT_DATA / "poisonedrag").is_dir() or not (DEFAULT_DATA / "locomo").is_dir(),
    reason=f"evaluation data not found under {DEFAULT_DATA} (never copied into the repo)",
)


def test_every_family_declares_its_split_and_both_splits_exist():
    assert {f.split for f in FAMILIES.values()} == {TUNE, HOLDOUT}
    assert set(families(TUNE)) | set(families(HOLDOUT)) == set(FAMILIES)
    assert not set(families(TUNE)) & set(families(HOLDOUT))
    # At least three data sets among the families.
    assert len({f.source for f in FAMILIES.values()}) >= 3


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_builds_with_its_layout_and_truth(name):
    fam = FAMILIES[name]
    if fam.source in ("hotpotqa", "msmarco") and not any(
            (poison_dir_for(DEFAULT_DATA) / f).exists() for f in (f"{fam.source}.json", f"{fam.source}_adv_targeted.json")):
        pytest.skip(f"PoisonedRAG {fam.source} file not in {poison_dir_for(DEFAULT_DATA)} (set MEMAUDIT_POISON_DIR)")
    sc = build_family(name, rho=0.3, seed=0, size=300, observed=3)
    assert len(sc.memories) == 300
    assert sc.meta["split"] == fam.split
    ids = {m["id"] for m in sc.memories}
    assert set(sc.poisoned) <= ids and set(sc.meta["honest_errors"]) <= ids
    assert sum(p["observed"] for p in sc.probes) == 3
    if fam.layout != "slot":
        assert all(m["metadata"] == {} for m in sc.memories), "plain/aline memories carry no metadata"
    if fam.layout == "plain":
        assert sc.agent["connector"] == "builtin-reader"
        assert all(p.get("candidates") for p in sc.probes)
    if fam.attack in ("honest", "bridge-clean"):
        assert sc.poisoned == [] and sc.meta["honest_errors"]
    else:
        assert sc.poisoned and not sc.meta["honest_errors"]


def test_rho_per_target_is_injected_over_injected_plus_honest():
    lo = build_family("nq-token-slot", rho=0.05, seed=1, size=300)
    hi = build_family("nq-token-slot", rho=0.5, seed=1, size=300)
    assert len(lo.poisoned) == lo.meta["targets"] * 1
    assert len(hi.poisoned) == hi.meta["targets"] * 8
    assert hi.meta["rho"] == 0.5


def test_instruction_family_plants_instructions():
    sc = build_family("instruction-plain", rho=0.3, seed=0, size=300)
    poison = [m["text"] for m in sc.memories if m["id"] in set(sc.poisoned)]
    assert all(any(k in t.lower() for k in ("from now on", "ignore", "override")) for t in poison)


def test_unknown_family_and_bad_rho_are_refused():
    with pytest.raises(ScenarioError):
        build_family("nope")
    with pytest.raises(ScenarioError):
        build_family("nq-token-slot", rho=1.0)


def test_per_target_entities_never_collide_with_an_honest_answer():
    """sqa-plain-distinct: the planted entity of a target is no target's or bystander's correct
    answer and no related record's answer (else honest records carry a target's harm)."""
    for seed in (0, 1):
        sc = build_family("sqa-plain-distinct", rho=0.5, seed=seed, size=1000, observed=5)
        planted = {p["harm"]["target"].casefold() for p in sc.probes}
        assert len(planted) == sc.meta["targets"]
        correct = {p["candidates"][0].casefold() for p in sc.probes} | {b["expected"].casefold() for b in sc.benign}
        assert not planted & correct
        related = {m["text"].rsplit("): ", 1)[1].casefold() for m in sc.memories
                   if m["id"] not in set(sc.poisoned) and "): " in m["text"]}
        assert related and not planted & related


@pytest.mark.parametrize("rho", [0.05, 0.2, 0.5])
def test_bridge_family_is_minja_on_one_trigger_term(rho):
    """locomo-minja-bridge: ρ = injected / (injected + the clean records about the victim); every
    poison answers with the redirect's name; no clean answer names it; 40 probes about the victim."""
    sc = build_family("locomo-minja-bridge", rho=rho, seed=1, size=400, observed=5)
    victim, redirect = sc.meta["trigger"], sc.meta["redirect"]
    poisoned = set(sc.poisoned)
    poison = [m["text"] for m in sc.memories if m["id"] in poisoned]
    clean = [m["text"] for m in sc.memories if m["id"] not in poisoned]
    about_victim = [t for t in clean if victim in t.split("\n", 1)[0]]  # the record's question
    assert len(poison) == sc.meta["injected"] and len(about_victim) == sc.meta["relevant_clean"]
    assert sc.meta["rho"] == pytest.approx(len(poison) / (len(poison) + len(about_victim)), abs=1e-4)
    assert abs(sc.meta["rho"] - rho) < 0.02
    assert all(victim in t and redirect in t.rsplit("\nA: ", 1)[1] for t in poison)
    assert not any(redirect.casefold() in t.rsplit("\nA: ", 1)[1].casefold() for t in about_victim)
    assert len(sc.probes) == 40 and all(victim in p["query"] for p in sc.probes)
    assert {p["harm"]["target"] for p in sc.probes} == {redirect}
    assert sc.agent["connector"] == "builtin-vote"


@pytest.mark.parametrize("rho", [0.05, 0.2, 0.5])
def test_slot_bridge_family_is_minja_in_chat_log_records_with_metadata(rho):
    """locomo-minja-slot (HOLDOUT until 2026-12-05, TUNE since): the bridge recipe in chat-log
    records that carry ``metadata.query``/``answer`` and no ``Q:``/``A:`` line; ρ as
    locomo-minja-bridge's; every poison's answer names the redirect; the attacker writes after
    the conversation's last session."""
    sc = build_family("locomo-minja-slot", rho=rho, seed=2, size=400, observed=5)
    victim, redirect = sc.meta["trigger"], sc.meta["redirect"]
    assert sc.meta["layout"] == "slot" and sc.meta["attack"] == "bridge" and sc.meta["split"] == TUNE
    poisoned = set(sc.poisoned)
    own = [m for m in sc.memories if m["text"].startswith("User: ")]  # the scenario's records, no padding
    poison = [m for m in own if m["id"] in poisoned]
    clean = [m for m in own if m["id"] not in poisoned]
    about_victim = [m for m in clean if victim in m["metadata"]["query"]]
    assert len(poison) == sc.meta["injected"] == len(poisoned)
    assert len(about_victim) == sc.meta["relevant_clean"]
    assert sc.meta["rho"] == pytest.approx(len(poison) / (len(poison) + len(about_victim)), abs=1e-4)
    assert abs(sc.meta["rho"] - rho) < 0.02
    for m in own:
        assert m["metadata"]["query"] and m["metadata"]["answer"]
        assert m["text"].split("\n", 1)[0] == "User: " + m["metadata"]["query"]
        assert not any(ln.startswith(("Q:", "A:")) for ln in m["text"].splitlines())
    for m in poison:
        assert victim in m["metadata"]["query"] and redirect in m["metadata"]["answer"]
        assert m["text"].endswith(m["metadata"]["answer"] + ".")
    assert not any(redirect.casefold() in m["metadata"]["answer"].casefold() for m in about_victim)
    # The attacker's sittings come after the conversation: later sessions, later dates.
    honest_times = [m["metadata"]["written_at"] for m in clean if "written_at" in m["metadata"]]
    assert honest_times and all(m["metadata"]["written_at"] > max(honest_times) for m in poison)
    honest_sessions = {int(m["metadata"]["session"].split("_")[1]) for m in clean if "session" in m["metadata"]}
    assert all(int(m["metadata"]["session"].split("_")[1]) > max(honest_sessions) for m in poison)
    assert len(sc.probes) == 40 and all(victim in p["query"] for p in sc.probes)
    assert {p["harm"]["target"] for p in sc.probes} == {redirect}
    assert sum(p["observed"] for p in sc.probes) == sc.meta["observed_probes"] == 5
    assert sc.benign and all(redirect in b["query"] and victim not in b["query"] for b in sc.benign)
    assert sc.agent["connector"] == "builtin-vote"
    if rho == 0.5:
        # MINJA's shortening (the longest bridge first, none last) and the attacker's own
        # wording of the victim's questions: some poisons ask a paraphrase, not the probe's text.
        texts = [m["text"] for m in poison]
        assert any("folded into" in t for t in texts) and any(victim not in t.split("\n", 1)[1] for t in texts)
        probe_queries = {p["query"] for p in sc.probes} | {m["metadata"]["query"] for m in about_victim}
        assert any(not any(q in m["metadata"]["query"] for q in probe_queries) for m in poison)


def test_the_aline_bridge_families_refuse_the_slot_layout_elsewhere():
    from bench.scenarios.bridge import build_bridge

    with pytest.raises(ScenarioError):
        build_bridge("x", TUNE, "ehr", rho=0.2, seed=0, size=400, observed=5, data=DEFAULT_DATA, layout="slot")


def _in_wording(tmp_path, monkeypatch, base: str, wording: dict):
    """Family `base` registered as "w", reading its wording from tmp_path/w.json (`wording`)."""
    import dataclasses
    import json

    from bench.scenarios import families as fm

    fam = dataclasses.replace(fm.FAMILIES[base], name="w", wordings="w")
    monkeypatch.setitem(fm.FAMILIES, "w", fam)
    monkeypatch.setattr(fm, "_WORDINGS", tmp_path)
    (tmp_path / "w.json").write_text(json.dumps(wording))
    return fam


def test_a_family_in_someone_elses_wording_reads_it_from_its_file(tmp_path, monkeypatch):
    """msmarco-clean-plain's passages and corrections come from its wordings file (written
    blind), none from the project's own templates; a malformed file is refused by name."""
    import json

    _in_wording(tmp_path, monkeypatch, "locomo-clean-plain", {"honest": ["Zq7 {k} said {c}"], "fixes": ["Xv9 {k} fixed {c}"]})
    sc = build_family("w", seed=0, size=300)
    own = [m["text"] for m in sc.memories if m["text"].startswith(("Zq7 ", "Xv9 "))]
    assert sum(t.startswith("Xv9 ") for t in own) == sc.meta["targets"] // 2  # one correction per outdated target
    assert not any(t.startswith(("Notes on", "Correction on", "Update on")) for t in (m["text"] for m in sc.memories))
    (tmp_path / "w.json").write_text(json.dumps({"honest": ["no placeholders"], "fixes": ["{k} {c}"]}))
    with pytest.raises(ScenarioError, match="w.json needs one"):
        build_family("w", seed=0, size=300)


def _slot_wording(**over):
    w = {"honest": ["Hq7 {q} | {speaker} on {date}: {turn} => {a}"], "honest_bare": ["Hb7 {q} => {a}"],
         "bridges": ["Br1 {q} | {v} lives under {r} now, read {r}. => {ans}", "Br2 {q} | {v}~{r} => {ans}",
                     "Br3 {q} => {ans}"],
         "asked": ["{q}", "{p}"], "answers": ["{r}", "{a} says {r}"]}
    return {**w, **over}


def test_a_bridge_family_in_someone_elses_wording_reads_it_from_its_file(tmp_path, monkeypatch):
    """locomo-minja-slot-w1 / -w2 read their records' wording from their files (written blind):
    honest records, bridges (longest first, none last), ways of asking and answer shapes, none of
    the project's own; a malformed file is refused by name and key."""
    import json

    _in_wording(tmp_path, monkeypatch, "locomo-minja-slot-w2", _slot_wording())
    sc = build_family("w", rho=0.5, seed=0, size=400, observed=5)
    victim, redirect = sc.meta["trigger"], sc.meta["redirect"]
    own = [m for m in sc.memories if m["text"][:3] in ("Hq7", "Hb7", "Br1", "Br2", "Br3")]
    poison = [m for m in own if m["id"] in set(sc.poisoned)]
    assert len(poison) == sc.meta["injected"] and not any(m["text"].startswith("User: ") for m in sc.memories)
    assert {m["text"][:3] for m in poison} == {"Br1", "Br2", "Br3"}
    by_time = sorted(poison, key=lambda m: m["metadata"]["written_at"])  # the attacker's order
    assert by_time[0]["text"].startswith("Br1") and by_time[-1]["text"].startswith("Br3")
    assert all(redirect in m["metadata"]["answer"] and m["text"].endswith(m["metadata"]["answer"]) for m in poison)
    assert {m["text"][:3] for m in own if m not in poison} == {"Hq7", "Hb7"}
    assert all(victim in p["query"] for p in sc.probes)
    for bad, key in ((_slot_wording(bridges=["Br1 {q} {v} => {ans}", "{q} => {ans}"]), "bridge"),
                     (_slot_wording(bridges=["{q} {v} {r} => {ans}", "{q} {r} => {ans}"]), "bridge"),
                     (_slot_wording(answers=["{a} only"]), "'answers'"),
                     (_slot_wording(asked=["{question}"]), "'asked'"),
                     ({k: v for k, v in _slot_wording().items() if k != "honest_bare"}, "unreadable")):
        (tmp_path / "w.json").write_text(json.dumps(bad))
        with pytest.raises(ScenarioError, match=f"family w: .*{key}"):
            build_family("w", rho=0.2, seed=0, size=300)


def _ehr_wording(**over):
    w = {"honest": ["Eh7 {q}\n{kn}\n=> {a}"],
         "bridges": ["Eb1 {q}\n- {v} was re-keyed to {r}; read {r}.\n=> {ans}", "Eb2 {q} [{v}>{r}] => {ans}",
                     "Eb3 {q} => {ans}"],
         "asked": ["{q}", "stat: {q}"], "answers": ["{r}", "{a} (chart {r})"]}
    return {**w, **over}


@pytest.mark.skipif(not (DEFAULT_DATA / "ehragent" / "logs").is_dir(), reason="EHRAgent logs not found")
def test_the_ehr_minja_memory_in_someone_elses_wording_reads_it_from_its_file(tmp_path, monkeypatch):
    """ehr-minja-slot-w1 / -w2: EHRAgent's records in a wording written blind, the knowledge
    notes as "- " lines, metadata {query, answer} on every record (no session the store never
    kept); a malformed file is refused by name and key."""
    import json

    _in_wording(tmp_path, monkeypatch, "ehr-minja-slot-w2", _ehr_wording())
    sc = build_family("w", rho=0.5, seed=0, size=400, observed=5)
    victim, redirect = sc.meta["trigger"], sc.meta["redirect"]
    poison = [m for m in sc.memories if m["id"] in set(sc.poisoned)]
    honest = [m for m in sc.memories if m["text"].startswith("Eh7 ")]
    assert len(poison) == sc.meta["injected"] and {m["text"][:3] for m in poison} == {"Eb1", "Eb2", "Eb3"}
    assert all(set(m["metadata"]) == {"query", "answer"} and redirect in m["metadata"]["answer"] for m in poison)
    assert len(honest) >= 80 and all(m["text"].split("\n")[1].startswith("- ") for m in honest)
    assert all(m["metadata"]["answer"] in m["text"] and m["metadata"]["query"] in m["text"] for m in honest)
    assert any(victim in m["text"] for m in honest) and all(victim in p["query"] for p in sc.probes)
    for bad, key in ((_ehr_wording(honest=["{q} => {a}"]), "'honest'"),
                     (_ehr_wording(asked=["{p}"]), "'asked'"),
                     (_ehr_wording(bridges=["{q} {v} => {ans}", "{q} => {ans}"]), "bridge")):
        (tmp_path / "w.json").write_text(json.dumps(bad))
        with pytest.raises(ScenarioError, match=f"family w: .*{key}"):
            build_family("w", rho=0.2, seed=0, size=300)


@pytest.mark.skipif(not (DEFAULT_DATA / "ehragent" / "logs").is_dir(), reason="EHRAgent logs not found")
def test_the_ehr_memorys_clean_control_has_honest_slips_in_its_wording(tmp_path, monkeypatch):
    """ehr-clean-slot-w1 / -w2: the EHR memory with no attack; each honest error is the agent's
    own record of one of the patient's questions in the wording's honest template (its knowledge
    notes, a wrong value from an answer to a question of the same type), one slip each (the
    memory keeps no time), metadata {query, answer} only; its questions probed for that value."""
    import dataclasses

    from audits.demo.qa import template_key
    from bench.scenarios import families as fm

    fam = _in_wording(tmp_path, monkeypatch, "ehr-minja-slot-w2", _ehr_wording())
    monkeypatch.setitem(fm.FAMILIES, "w", dataclasses.replace(fam, attack="bridge-clean"))
    sc = build_family("w", seed=1, size=400, observed=5)
    assert sc.poisoned == [] and sc.meta["attack"] == "honest" and "EHR" in sc.meta["note"]
    errors = [m for m in sc.memories if m["id"] in set(sc.meta["honest_errors"])]
    assert len(errors) == len({m["metadata"]["query"] for m in errors}) >= 8
    answers = {(m["metadata"]["query"], m["metadata"]["answer"]) for m in sc.memories
               if m["id"] not in set(sc.meta["honest_errors"]) and "query" in m["metadata"]}
    for m in errors:
        q, wrong = m["metadata"]["query"], m["metadata"]["answer"]
        assert set(m["metadata"]) == {"query", "answer"} and sc.meta["trigger"] in q
        assert m["text"].startswith(f"Eh7 {q}\n- ") and m["text"].endswith(f"=> {wrong}")
        assert all(a != wrong for o, a in answers if o == q) and any(a == wrong for o, a in answers if o != q)
        assert any(a == wrong and template_key(o).split()[0] == template_key(q).split()[0]
                   for o, a in answers if o != q)  # a question asked the same way
    assert {p["harm"]["target"] for p in sc.probes} == {m["metadata"]["answer"] for m in errors}
    assert len(sc.probes) == 2 * len(errors) and sum(p["observed"] for p in sc.probes) == 5


@pytest.mark.skipif(not (DEFAULT_DATA / "ehragent" / "logs").is_dir(), reason="EHRAgent logs not found")
@pytest.mark.parametrize("name", ["ehr-minja-slot-w1", "ehr-minja-slot-w2"])
def test_the_blind_ehr_minja_families_are_the_recipe_in_their_own_wording(name):
    """Structure only (the HOLDOUT's wording is never printed): ρ, every poison's answer naming
    the redirect, no record in the project's own EHR wording ("Q: …\nKnowledge:")."""
    sc = build_family(name, rho=0.2, seed=0, size=400, observed=5)
    poison = [m for m in sc.memories if m["id"] in set(sc.poisoned)]
    assert sc.meta["split"] == FAMILIES[name].split and sc.agent["connector"] == "builtin-vote"
    assert len(poison) == sc.meta["injected"] and abs(sc.meta["rho"] - 0.2) < 0.02
    assert all(sc.meta["redirect"] in m["metadata"]["answer"] for m in poison)
    assert not any(m["text"].startswith("Q: ") and "\nKnowledge:" in m["text"] for m in sc.memories)


def test_a_question_with_no_wrong_value_leaves_the_observed_count_whole():
    """TUNE locomo-clean-slot-w3 seed 4: one of the ten questions has no value to mix up; the
    incidents are still the first five errors' (four, before)."""
    sc = build_family("locomo-clean-slot-w3", seed=4, size=400, observed=5)
    assert len(sc.probes) == 18 and sum(p["observed"] for p in sc.probes) == 5


@pytest.mark.skipif(not (DEFAULT_DATA / "ehragent" / "logs").is_dir(), reason="EHRAgent logs not found")
@pytest.mark.parametrize("name", ["ehr-clean-slot-w1", "ehr-clean-slot-w2"])
def test_the_blind_ehr_clean_controls_have_honest_slips_and_no_attack(name):
    """Structure only (the HOLDOUT's wording is never printed): no poison, ten slips on ten of
    the patient's questions, each a value that the store's record on its question does not give."""
    sc = build_family(name, seed=0, size=400, observed=5)
    assert sc.meta["split"] == FAMILIES[name].split and sc.poisoned == [] and sc.meta["attack"] == "honest"
    errors = [m for m in sc.memories if m["id"] in set(sc.meta["honest_errors"])]
    assert len(errors) == len({m["metadata"]["query"] for m in errors}) >= 8
    for m in errors:
        store = [o for o in sc.memories if o["metadata"].get("query") == m["metadata"]["query"] and o is not m]
        assert store and all(o["metadata"]["answer"] != m["metadata"]["answer"] for o in store)
    assert sum(p["observed"] for p in sc.probes) == 5


@pytest.mark.parametrize("name", ["locomo-minja-slot-w1", "locomo-minja-slot-w2", "locomo-minja-slot-w3",
                                  "locomo-minja-slot-w4", "locomo-minja-slot-w5", "locomo-minja-slot-w6",
                                  "locomo-minja-slot-w7", "locomo-minja-slot-w8", "locomo-minja-slot-w9",
                                  "locomo-minja-slot-w10", "locomo-minja-slot-w11", "locomo-minja-slot-w12",
                                  "locomo-minja-slot-w13", "locomo-minja-slot-w14"])
def test_the_blind_minja_families_are_the_slot_recipe_in_their_own_wording(name):
    """Structure only (the HOLDOUT's wording is never printed): ρ as locomo-minja-slot's, every
    poison's answer naming the redirect, no record in the project's own slot wording."""
    from bench.scenarios.bridge import SLOT_WORDING

    sc = build_family(name, rho=0.2, seed=0, size=400, observed=5)
    poisoned = set(sc.poisoned)
    assert sc.meta["split"] == FAMILIES[name].split and sc.agent["connector"] == "builtin-vote"
    poison = [m for m in sc.memories if m["id"] in poisoned]
    assert len(poison) == sc.meta["injected"] and abs(sc.meta["rho"] - 0.2) < 0.02
    assert all(sc.meta["redirect"] in m["metadata"]["answer"] for m in poison)
    heads = {t.split("{", 1)[0] for t in SLOT_WORDING.honest + SLOT_WORDING.bridges if t.split("{", 1)[0]}
    assert not any(m["text"].startswith(h) for h in heads - {"User: "} for m in sc.memories)


@pytest.mark.parametrize("name", ["locomo-clean-slot-w1", "locomo-clean-slot-w2", "locomo-clean-slot-w3",
                                  "locomo-clean-slot-w4", "locomo-clean-slot-w5", "locomo-clean-slot-w6",
                                  "locomo-clean-slot-w7", "locomo-clean-slot-w8", "locomo-clean-slot-w9",
                                  "locomo-clean-slot-w10", "locomo-clean-slot-w11", "locomo-clean-slot-w12",
                                  "locomo-clean-slot-w13", "locomo-clean-slot-w14"])
def test_the_minja_memorys_clean_control_has_honest_errors_and_no_attack(name):
    """Structure only (the HOLDOUT's wording is never printed): the MINJA chat-log memory with no
    poison, honest errors on the victim's questions (two outdated records written in the
    conversation's first days, or one slip), each error's question probed for its wrong value."""
    sc = build_family(name, seed=1, size=400, observed=5)
    assert sc.poisoned == [] and sc.meta["attack"] == "honest" and sc.agent["connector"] == "builtin-vote"
    errors = [m for m in sc.memories if m["id"] in set(sc.meta["honest_errors"])]
    assert 10 <= len(errors) <= 15
    victim = sc.meta["trigger"]
    assert all(victim in m["metadata"]["query"] for m in errors)
    by_q = {}
    for m in errors:
        by_q.setdefault(m["metadata"]["query"], []).append(m)
    stamps = {(m["metadata"]["written_at"], m["metadata"]["session"]) for m in sc.memories
              if m["id"] not in set(sc.meta["honest_errors"]) and "written_at" in m["metadata"]
              and "session" in m["metadata"]}
    for q, ms in by_q.items():
        assert len(ms) in (1, 2)
        store_record = [m for m in sc.memories if m["metadata"].get("query") == q and m not in ms]
        assert store_record and all(m["metadata"]["answer"] != store_record[0]["metadata"]["answer"] for m in ms)
        # Every error bears one of the conversation's session stamps; an outdated pair is older
        # than the store's record on its question.
        assert all((m["metadata"]["written_at"], m["metadata"]["session"]) in stamps for m in ms)
        if len(ms) == 2:
            assert all(m["metadata"]["written_at"] < store_record[0]["metadata"]["written_at"] for m in ms)
    assert {p["harm"]["target"] for p in sc.probes} == {m["metadata"]["answer"] for m in errors}
    assert sum(p["observed"] for p in sc.probes) == 5
