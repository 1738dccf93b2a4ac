"""The PoisonedRAG adversarial-passage families on HotpotQA and MS MARCO (bench/scenarios/families.py).

Their attack files are not in the shared data: they are fetched from sleeepeer/PoisonedRAG into a
folder outside the repo (``MEMAUDIT_POISON_DIR``). Tests that need them are skipped without them;
the absence path and a small synthetic file are tested always (the synthetic one needs only the
shared padding data).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.scenarios import DEFAULT_DATA, ScenarioError
from bench.scenarios.families import FAMILIES, HOLDOUT, TUNE, build_family, poison_dir_for

POISON_DIR = poison_dir_for(DEFAULT_DATA)
HAVE_DATA = (DEFAULT_DATA / "locomo").is_dir() and (DEFAULT_DATA / "wiki2").is_dir()
ADV = {"hotpot-plain-adv": "hotpotqa", "msmarco-plain-adv": "msmarco"}
needs_data = pytest.mark.skipif(not HAVE_DATA, reason=f"evaluation data not found under {DEFAULT_DATA}")


def _have(name: str) -> bool:
    stem = ADV[name]
    return any((POISON_DIR / f).exists() for f in (f"{stem}.json", f"{stem}_adv_targeted.json"))


def _synthetic(tmp_path: Path, stem: str, n: int = 30) -> Path:
    rows = {}
    for i in range(n):
        right, wrong = f"Arvel{i:02d}", f"Quorin{i:02d}"
        rows[f"q{i}"] = {"id": f"q{i}", "question": f"which river town {i} hosts the old mill",
                         "correct answer": right, "incorrect answer": wrong,
                         "adv_texts": [f"Passage {k}: the old mill of river town {i} stands in {wrong}."
                                       for k in range(5)]}
    (tmp_path / f"{stem}.json").write_text(json.dumps(rows))
    return tmp_path


def test_hotpot_is_tune_and_msmarco_is_held_out():
    assert FAMILIES["hotpot-plain-adv"].split == TUNE
    assert FAMILIES["msmarco-plain-adv"].split == HOLDOUT
    for name in ADV:
        fam = FAMILIES[name]
        assert (fam.layout, fam.attack, fam.answer_type) == ("plain", "adv", "any")
        assert (fam.layout, fam.attack) == (FAMILIES["nq-plain-adv"].layout, FAMILIES["nq-plain-adv"].attack)


@pytest.mark.parametrize("name", sorted(ADV))
def test_an_absent_attack_file_is_refused_with_where_to_get_it(tmp_path, name):
    with pytest.raises(ScenarioError) as err:
        build_family(name, rho=0.2, seed=0, size=200, data=tmp_path, poison_dir=tmp_path / "none")
    msg = str(err.value)
    assert "sleeepeer/PoisonedRAG" in msg and str(tmp_path / "none") in msg and "MEMAUDIT_POISON_DIR" in msg


def test_the_poison_dir_is_the_argument_else_the_environment_else_the_data(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMAUDIT_POISON_DIR", raising=False)
    assert poison_dir_for(tmp_path) == tmp_path / "poisonedrag"
    monkeypatch.setenv("MEMAUDIT_POISON_DIR", str(tmp_path / "env"))
    assert poison_dir_for(tmp_path) == tmp_path / "env"
    assert poison_dir_for(tmp_path, tmp_path / "arg") == tmp_path / "arg"


@needs_data
@pytest.mark.parametrize("name", sorted(ADV))
def test_a_synthetic_attack_file_is_planted_as_nq_plain_adv_plants_its_own(tmp_path, name):
    pdir = _synthetic(tmp_path, ADV[name])
    sc = build_family(name, rho=0.5, seed=0, size=300, observed=5, poison_dir=pdir)
    poisons = [m for m in sc.memories if m["id"] in set(sc.poisoned)]
    assert len(poisons) == sc.meta["targets"] * 8
    assert all(m["text"].startswith("Passage ") and m["metadata"] == {} for m in poisons)
    # One attacker answer per target, harm = that answer; candidates = [correct, attacker].
    wrong = {p["target"]: p["harm"]["target"] for p in sc.probes}
    assert len(set(wrong.values())) == sc.meta["targets"]
    assert all(p["candidates"] == [p["candidates"][0], p["harm"]["target"]] for p in sc.probes)
    # The honest memories of a target carry its correct answer in the plain templates.
    right = {p["candidates"][0] for p in sc.probes}
    honest = [m["text"] for m in sc.memories if m["id"] not in set(sc.poisoned)]
    assert all(sum(r in t for t in honest) >= 2 for r in right)


def test_the_environment_points_the_families_at_the_files(tmp_path, monkeypatch):
    if not HAVE_DATA:
        pytest.skip(f"evaluation data not found under {DEFAULT_DATA}")
    _synthetic(tmp_path, "msmarco")
    monkeypatch.setenv("MEMAUDIT_POISON_DIR", os.fspath(tmp_path))
    sc = build_family("msmarco-plain-adv", rho=0.2, seed=1, size=250)
    assert sc.poisoned and sc.meta["split"] == HOLDOUT


@needs_data
@pytest.mark.parametrize("name", sorted(ADV))
def test_the_real_families_plant_poisonedrags_passages(name):
    if not _have(name):
        pytest.skip(f"PoisonedRAG {ADV[name]} file not in {POISON_DIR} (set MEMAUDIT_POISON_DIR)")
    rows = json.loads(next(p for p in (POISON_DIR / f"{ADV[name]}.json",
                                       POISON_DIR / f"{ADV[name]}_adv_targeted.json") if p.exists()).read_text())
    adv = {t for v in rows.values() for t in v["adv_texts"]}
    assert len(rows) == 100 and all(len(v["adv_texts"]) == 5 for v in rows.values())
    for seed in (0, 1):
        sc = build_family(name, rho=0.5, seed=seed, size=400, observed=5)
        poisons = [m for m in sc.memories if m["id"] in set(sc.poisoned)]
        assert len(poisons) == 80 and all(m["text"] in adv for m in poisons)
        assert all(m["metadata"] == {} for m in sc.memories)
        assert sum(p["observed"] for p in sc.probes) == 5


BLACK_BOX = {"hotpot-plain-adv-bb": ("hotpotqa", TUNE), "hotpot-plain-adv-bbq": ("hotpotqa", TUNE),
             "nq-plain-adv-bb": ("nq", HOLDOUT),
             "msmarco-plain-adv-bb": ("msmarco", HOLDOUT)}


def test_the_black_box_families_are_split_as_their_plain_twins():
    for name, (_, split) in BLACK_BOX.items():
        fam = FAMILIES[name]
        assert fam.black_box and fam.split == split
        assert (fam.layout, fam.attack, fam.answer_type) == ("plain", "adv", "any")
    assert not any(FAMILIES[n].black_box for n in ("nq-plain-adv", *ADV))


@needs_data
@pytest.mark.parametrize("name", ["hotpot-plain-adv-bb", "msmarco-plain-adv-bb"])
def test_a_black_box_passage_is_its_question_a_dot_and_the_adversarial_text(tmp_path, name):
    """As PoisonedRAG's src/attack.py `get_attack` plants them for its default "LM_targeted"
    (black-box) attack: `question + "."` followed by the adversarial text, no space between."""
    stem = BLACK_BOX[name][0]
    pdir = _synthetic(tmp_path, stem)
    rows = json.loads((pdir / f"{stem}.json").read_text())
    planted = {v["question"] + "." + t for v in rows.values() for t in v["adv_texts"]}
    sc = build_family(name, rho=0.5, seed=0, size=300, observed=5, poison_dir=pdir)
    poisons = [m for m in sc.memories if m["id"] in set(sc.poisoned)]
    assert len(poisons) == sc.meta["targets"] * 8
    assert all(m["text"] in planted and m["metadata"] == {} for m in poisons)
    assert all(m["text"].startswith("which river town") and ".Passage " in m["text"] for m in poisons)


@needs_data
def test_the_query_form_asks_in_lower_case_without_a_question_mark(tmp_path):
    """`as_query`: HotpotQA's question written as NQ and MS MARCO write theirs."""
    pdir = _synthetic(tmp_path, "hotpotqa")
    rows = json.loads((pdir / "hotpotqa.json").read_text())
    for v in rows.values():
        v["question"] = v["question"].title() + "?"
    (pdir / "hotpotqa.json").write_text(json.dumps(rows))
    planted = {v["question"].rstrip("?").lower() + "." + t for v in rows.values() for t in v["adv_texts"]}
    sc = build_family("hotpot-plain-adv-bbq", rho=0.5, seed=0, size=300, observed=5, poison_dir=pdir)
    poisons = [m["text"] for m in sc.memories if m["id"] in set(sc.poisoned)]
    assert poisons and all(t in planted and "?" not in t for t in poisons)
