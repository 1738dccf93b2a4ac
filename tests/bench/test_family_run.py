"""bench/audit_bench.py family runs: the clean control reports corrections, not poison suspects."""

from __future__ import annotations

import pytest

from bench.audit_bench import family_run
from bench.scenarios import DEFAULT_DATA
from ledger.embeddings import HashingEmbedder

pytestmark = pytest.mark.skipif(
    not (DEFAULT_DATA / "locomo").is_dir(),
    reason=f"evaluation data not found under {DEFAULT_DATA} (never copied into the repo)",
)


def test_the_tune_clean_control_proposes_corrections_and_no_poison_suspect():
    rows = family_run("locomo-clean-honest", 0.2, 0, 5, 200, HashingEmbedder(dim=384))
    ma = next(r for r in rows if r["method"] == "memaudit")
    assert ma["incidents"] > 0, "the honest errors must cause incidents for this test to mean anything"
    assert ma["removed"] > 0 and ma["poison_suspects"] == 0
    assert ma["corrections"] == ma["removed"] and ma["corrections_honest"] > 0
    assert ma["engine_utility_cost"] is not None and ma["alpha"] == 0.6
    # A benign answer broken (right before, not after) is also a changed one.
    for r in rows:
        assert 0.0 <= r["utility_broken"] <= r["utility_changed"] <= 1.0


def test_alpha_one_gives_cas_no_weight_in_the_family_run():
    rows = family_run("locomo-clean-honest", 0.2, 0, 5, 200, HashingEmbedder(dim=384), alpha=1.0)
    assert rows[0]["alpha"] == 1.0


@pytest.mark.skipif(not (DEFAULT_DATA / "ehragent" / "logs").is_dir(), reason="EHRAgent logs not found")
def test_one_redirect_planted_across_questions_is_reached_and_judged_poison_like():
    """TUNE ehr-minja-bridge: one record per victim question, every answer naming the redirect in
    its own words. The verdict reads them as one claim planted across questions (none proposed as
    a correction), and the reach, which counts the seeds as their copies, confirms some of the
    records no incident retrieved (each alone on its question: "group of 1" before)."""
    from audits.engine import reach as reach_mod

    confirmed = []
    real = reach_mod.reach

    def spy(*a, **kw):
        res = real(*a, **kw)
        confirmed.extend(t for t in res.trace if t.get("with_seeds") and t.get("stop") == "confirmed")
        return res

    reach_mod_audit = __import__("audits.engine.audit", fromlist=["format_free_reach"])
    old = reach_mod_audit.format_free_reach
    reach_mod_audit.format_free_reach = spy
    try:
        rows = family_run("ehr-minja-bridge", 0.5, 0, 5, 400, HashingEmbedder(dim=384))
    finally:
        reach_mod_audit.format_free_reach = old
    ma = next(r for r in rows if r["method"] == "memaudit")
    assert ma["incidents"] >= 2 and ma["false_positives"] == 0
    assert ma["corrections"] == 0 and ma["poison_suspects"] == ma["removed"] > 0
    assert confirmed
