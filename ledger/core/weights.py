"""Retention-preserving weight rule (MutMem): ``w' = clip(w * exp(eta * j), 0.1, 3.0)``.

Everything is in integer milli-units so signed bodies never carry floats.

Determinism: the exponential is computed with :mod:`decimal` (40 significant
digits; ``Decimal.exp`` is correctly rounded and implemented in software, so
every platform gets the same digits), the product is rounded to an integer
with ROUND_HALF_UP (halves away from zero; all values are positive), then
clipped to ``[WEIGHT_MIN_Q, WEIGHT_MAX_Q]``. No age-based decay.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal
from functools import lru_cache

WEIGHT_MIN_Q = 100
WEIGHT_MAX_Q = 3000
WEIGHT_INITIAL_Q = 1000
VALENCE_MIN_Q = -1000
VALENCE_MAX_Q = 1000
ETA_MAX_Q = 10_000

_CTX = Context(prec=40, rounding=ROUND_HALF_UP)
_MILLI = Decimal(1000)


def _require_int(name: str, value: object, lo: int, hi: int) -> int:
    if type(value) is not int:
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} outside [{lo}, {hi}]")
    return value


@lru_cache(maxsize=65536)  # pure function of three small ints; verifiers call it per node
def next_weight_q(weight_q: int, valence_q: int, eta_q: int) -> int:
    """Apply the weight rule once.

    1. ``x = (eta_q / 1000) * (valence_q / 1000)`` exactly (a decimal fraction).
    2. ``y = weight_q * exp(x)`` at 40 significant digits.
    3. Round ``y`` to an integer, halves up; clip to ``[100, 3000]``.
    """
    _require_int("weight_q", weight_q, WEIGHT_MIN_Q, WEIGHT_MAX_Q)
    _require_int("valence_q", valence_q, VALENCE_MIN_Q, VALENCE_MAX_Q)
    _require_int("eta_q", eta_q, 0, ETA_MAX_Q)
    x = _CTX.divide(Decimal(eta_q * valence_q), Decimal(1_000_000))
    y = _CTX.multiply(Decimal(weight_q), _CTX.exp(x))
    q = int(y.to_integral_value(rounding=ROUND_HALF_UP))
    return min(WEIGHT_MAX_Q, max(WEIGHT_MIN_Q, q))


def valence_from_rewards(rewards_q: list[int]) -> int:
    """Mean of rewards in milli-units (each in [-1000, 1000]); 0 for no rewards.

    Exact integer mean, rounded half away from zero, so the result is
    reproducible and stays in [-1000, 1000].
    """
    if not rewards_q:
        return 0
    for i, r in enumerate(rewards_q):
        _require_int(f"rewards_q[{i}]", r, VALENCE_MIN_Q, VALENCE_MAX_Q)
    total, n = sum(rewards_q), len(rewards_q)
    q, r = divmod(abs(total), n)
    if 2 * r >= n:
        q += 1
    return q if total >= 0 else -q


def weight_move_is_explained(prev_q: int, new_q: int, valence_q: int) -> bool:
    """Whether ``prev -> new`` is reachable by the rule for *some* eta >= 0.

    Used when a node does not record its eta: positive valence never lowers a
    weight, negative never raises it, zero leaves it unchanged (clipping can
    only hold a weight at a bound).
    """
    if valence_q > 0:
        return new_q >= prev_q
    if valence_q < 0:
        return new_q <= prev_q
    return new_q == prev_q
