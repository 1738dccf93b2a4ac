"""Baselines reported beside DS (DESIGN section 4); each removes the same number n.

- `random`: n candidates drawn with a fixed seed.
- `frequency`: the n candidates retrieved by the most incidents (ties: summed rank, better first).
- `nn-contradiction`: the n candidates with the strongest contradiction to a graph neighbour.
- `cmis`: the n best by CMIS alone (α = 1).
- `mcg`: the n best by CAS alone (α = 0).
"""

from __future__ import annotations

import random as _random
from collections.abc import Mapping, Sequence

from .cmis import AuditEvent, CmisScore
from .graph import MemoryGraph

BASELINES = ("random", "frequency", "nn-contradiction", "cmis", "mcg")


def random_removal(candidates: Sequence[str], n: int, *, seed: int = 0) -> list[str]:
    pool = sorted(set(candidates))
    return _random.Random(seed).sample(pool, min(n, len(pool)))


def frequency_removal(events: Sequence[AuditEvent], n: int) -> list[str]:
    count: dict[str, int] = {}
    rank_sum: dict[str, int] = {}
    for ev in events:
        for r, mid in enumerate(dict.fromkeys(ev.retrieved), start=1):
            count[mid] = count.get(mid, 0) + 1
            rank_sum[mid] = rank_sum.get(mid, 0) + r
    order = sorted(count, key=lambda m: (-count[m], rank_sum[m], m))
    return order[:n]


def nn_contradiction_removal(mg: MemoryGraph, candidates: Sequence[str], n: int) -> list[str]:
    g = mg.graph
    score: dict[str, tuple[float, float]] = {}
    for m in dict.fromkeys(candidates):
        best = (0.0, 0.0)
        if m in g:
            for nb in g.neighbors(m):
                d = g.edges[m, nb]
                best = max(best, (d.get("contradict", 0.0), d["weight"]))
        score[m] = best
    return sorted(score, key=lambda m: (-score[m][0], -score[m][1], m))[:n]


def top_by(values: Mapping[str, float | CmisScore], n: int) -> list[str]:
    v = {k: (x.cmis if isinstance(x, CmisScore) else float(x)) for k, x in values.items()}
    return sorted(v, key=lambda m: (-v[m], m))[:n]


def run_baselines(*, n: int, candidates: Sequence[str], events: Sequence[AuditEvent],
                  cmis: Mapping[str, CmisScore], cas: Mapping[str, float], mg: MemoryGraph,
                  seed: int = 0) -> dict[str, list[str]]:
    """Every baseline's removal set of size n."""
    return {
        "random": random_removal(candidates, n, seed=seed),
        "frequency": frequency_removal(events, n),
        "nn-contradiction": nn_contradiction_removal(mg, candidates, n),
        "cmis": top_by(cmis, n),
        "mcg": top_by({m: cas.get(m, 0.0) for m in candidates}, n),
    }
