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
