"""The MutMem weight rule on integer milli-units."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.weights import next_weight_q, valence_from_rewards, weight_move_is_explained


def test_zero_valence_keeps_the_weight():
    assert next_weight_q(1234, 0, 800) == 1234


@pytest.mark.parametrize(
    ("w", "j", "eta", "want"),
    [
        (1000, 1000, 500, 1649),  # 1000 * e^0.5 = 1648.72
        (1000, -1000, 500, 607),  # 1000 * e^-0.5 = 606.53
        (1500, 200, 1000, 1832),  # 1500 * e^0.2 = 1832.10
        (3000, 1000, 1000, 3000),  # clipped at 3.0
        (100, -1000, 10000, 100),  # clipped at 0.1, never deleted
        (2900, 1000, 1000, 3000),
    ],
)
def test_it_applies_clip_of_w_exp_eta_j(w, j, eta, want):
    assert next_weight_q(w, j, eta) == want
    assert abs(min(3000, max(100, w * math.exp(eta / 1000 * j / 1000))) - want) <= 0.5


@pytest.mark.parametrize(("args"), [(99, 0, 1), (3001, 0, 1), (1000, 1001, 1), (1000, 0, -1), (1000.0, 0, 1)])
def test_it_rejects_out_of_range_or_float_inputs(args):
    with pytest.raises(ValueError):
        next_weight_q(*args)


@given(st.integers(100, 3000), st.integers(-1000, 1000), st.integers(0, 10000))
def test_weights_stay_in_bounds_and_follow_the_valence(w, j, eta):
    new = next_weight_q(w, j, eta)
    assert 100 <= new <= 3000
    assert weight_move_is_explained(w, new, j)


@pytest.mark.parametrize(
    ("rewards", "want"),
    [([], 0), ([1000, -1000], 0), ([1, 2], 2), ([-1, -2], -2), ([1000, 1000, 999], 1000), ([300], 300), ([1, 1, 2], 1)],
)
def test_valence_is_the_mean_reward_rounded_half_away_from_zero(rewards, want):
    assert valence_from_rewards(rewards) == want


def test_valence_rejects_rewards_out_of_range():
    with pytest.raises(ValueError):
        valence_from_rewards([1001])
