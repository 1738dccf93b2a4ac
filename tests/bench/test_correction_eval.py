"""bench/correction_eval.py: the plain correction notes and their hard negatives are scored."""

from __future__ import annotations

import json

from bench.correction_eval import HOLDOUT_CORRECTIONS, HOLDOUT_NEGATIVES, TUNE_CORRECTIONS, TUNE_NEGATIVES, main


def test_the_eval_scores_every_set_and_the_tune_set_is_read_as_written(tmp_path):
    out = tmp_path / "corr.json"
    assert main(["--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert (len(TUNE_CORRECTIONS), len(TUNE_NEGATIVES), len(HOLDOUT_CORRECTIONS), len(HOLDOUT_NEGATIVES)) == (30, 30, 40, 40)
    # The TUNE set was read while the rules were written: every correction read, no negative.
    assert got["tune"] == {"corrections": 30, "read": 30, "negatives": 30, "false": 0}
    # tune2 (the first HOLDOUT) was read and tuned on in the session of 2026-12-05 11:30: all but one
    # ("the one I saved before was last year's"), no negative.
    assert got["tune2"] == {"corrections": 40, "read": 39, "negatives": 40, "false": 0}
    assert (got["holdout2"]["corrections"], got["holdout2"]["negatives"]) == (80, 80)
