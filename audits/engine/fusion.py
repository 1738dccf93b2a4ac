"""Fusion, ranking, one-batch removal and residual harm (DESIGN section 4).

1. Normalise over the candidates (the scope and its graph neighbourhood): CAS by min-max;
   CMIS by min-max with the floor pinned at 0, the CMIS of a memory whose removal changes
   nothing (otherwise, when every candidate is causal, min-max would map them all to 0).
2. DS(m) = α·CMIS^(m) + (1 − α)·CAS^(m). α = 0.6 is MemAudit's best fusion weight; the audit
   fits α per store (`fit_alpha`) from evidence CAS plays no part in, between 0.6 and 1.0 (CAS
   without weight where it separates that store's causal memories no better than chance).
   Rank by DS.
3. The batch is decided once, after all events: top-N when N is given, else every suspect with
   DS ≥ threshold. The default 0.7 asks both signals to speak: with α = 0.6, full causal
   credit plus a quarter of the structural range, or half the causal credit plus the
   strongest structural anomaly; a memory without causal evidence never reaches it (≤ 0.4).
4. Verification: replay every incident with the whole batch removed. If harm remains, the
   suspects now retrieved by a still-harmful incident with DS ≥ threshold/2 and a positive
   CMIS join the batch and
   the check repeats (a bounded number of rounds). What the final check shows is reported as
   the residual harm.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cmis import AuditEvent, CmisScore
from .graph import minmax
from .replay import Replayer

HARMFUL = 0.5


@dataclass
class Suspect:
    id: str
    rank: int
    ds: float
    cmis: float
    cas: float
    cmis_hat: float
    cas_hat: float
    ci_low: float = 0.0
    ci_high: float = 0.0
    per_event: list[dict[str, Any]] = field(default_factory=list)
    signals: dict[str, float] = field(default_factory=dict)
    # Additive (issue 16): "poison-like" | "honest-error" for batch members, with reasons.
    verdict: str = ""
    reasons: list[str] = field(default_factory=list)


def fuse(cmis: Mapping[str, CmisScore | float], cas: Mapping[str, float], *, alpha: float = 0.6,
         candidates: Iterable[str] | None = None,
         signals: Mapping[str, Mapping[str, float]] | None = None) -> list[Suspect]:
    """DS for every candidate (default: every memory with a CMIS or a CAS), best first."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError("alpha must lie in [0, 1]")
    raw_c = {k: (v.cmis if isinstance(v, CmisScore) else float(v)) for k, v in cmis.items()}
    cands = list(dict.fromkeys(candidates)) if candidates is not None else list(
        dict.fromkeys([*raw_c, *cas]))
    c_vals = {m: max(raw_c.get(m, 0.0), 0.0) for m in cands}
    a_vals = {m: cas.get(m, 0.0) for m in cands}
    c_top = max(c_vals.values(), default=0.0)
    c_hat = {m: (v / c_top if c_top > 0 else 0.0) for m, v in c_vals.items()}
    a_hat = minmax(a_vals)
    out = []
    for m in cands:
        ds = alpha * c_hat.get(m, 0.0) + (1 - alpha) * a_hat.get(m, 0.0)
        sc = cmis.get(m)
        out.append(Suspect(
            id=m, rank=0, ds=ds, cmis=raw_c.get(m, 0.0), cas=a_vals[m],
            cmis_hat=c_hat.get(m, 0.0), cas_hat=a_hat.get(m, 0.0),
            ci_low=sc.ci_low if isinstance(sc, CmisScore) else 0.0,
            ci_high=sc.ci_high if isinstance(sc, CmisScore) else 0.0,
            per_event=list(sc.per_event) if isinstance(sc, CmisScore) else [],
            signals={k: float(v[m]) for k, v in (signals or {}).items() if m in v},
        ))
    out.sort(key=lambda s: (-s.ds, -s.cmis, -s.cas, s.id))
    for i, s in enumerate(out, start=1):
        s.rank = i
    return out


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """P(a positive scores above a negative), ties half; None without both."""
    if not pos or not neg:
        return None
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


CAS_CHANCE = 0.6  # a CAS AUC at or below this on a store's own evidence is no better than chance


def fit_alpha(ranked: Sequence[Suspect], *, default: float, threshold: float, seed: int = 0,
              reference: int = 200) -> dict[str, Any]:
    """The fusion weight α this store's own evidence supports (issue 16: CAS earns its weight
    or loses it), from evidence CAS plays no part in.

    Evidence: the suspects whose CMIS alone reaches the batch threshold (their removal undoes
    the harm, whatever CAS says) against a seeded sample of ``reference`` candidates with no
    causal effect. CAS's weight 1 − α grows with its AUC on that evidence: none at or below
    `CAS_CHANCE`, the full 1 − ``default`` (the paper's 0.4 at its α = 0.6) only when it separates
    them perfectly, linear in between. Without evidence (no causal suspect, or nothing to compare
    with) ``default`` stands. Returns α, the AUC and the evidence's sizes, and why.
    """
    seeds = [s for s in ranked if s.cmis_hat >= threshold]
    rest = sorted((s for s in ranked if s.cmis <= 0), key=lambda s: s.id)
    rng = np.random.default_rng(seed)
    sample = [rest[i] for i in rng.permutation(len(rest))[:reference]] if rest else []
    a = auc([s.cas_hat for s in seeds], [s.cas_hat for s in sample])
    out: dict[str, Any] = {"default": default, "seeds": len(seeds), "reference": len(sample),
                           "cas_auc": None if a is None else round(a, 3)}
    if a is None:
        return {**out, "alpha": default, "why": "no causal evidence to fit on: α as set"}
    share = min(max((a - CAS_CHANCE) / (1.0 - CAS_CHANCE), 0.0), 1.0)
    alpha = round(1.0 - (1.0 - default) * share, 3)
    why = ("CAS separates this store's causal memories from clean ones no better than chance: no weight"
           if share == 0.0 else f"CAS AUC {a:.2f} on this store's causal memories against clean ones")
    return {**out, "alpha": alpha, "why": why}


def select_batch(ranked: Sequence[Suspect], *, top_n: int | None = None,
                 threshold: float = 0.7) -> list[str]:
    if top_n is not None:
        return [s.id for s in ranked[:top_n]]
    return [s.id for s in ranked if s.ds >= threshold]


def residual_harm(events: Sequence[AuditEvent], replayer: Replayer,
                  removed: Iterable[str]) -> dict[str, Any]:
    """Replay every event with the batch removed (the agent calls in flight together); per-event
    harm and a summary."""
    rem = set(removed)
    rows = []
    for ev, (retrieved, out) in zip(events, replayer.replay_each([(ev.query, rem, ev.candidates) for ev in events])):
        harms = [float(ev.harm(ev.query, s, harmful_output=ev.output)) for s in out.samples]
        h = sum(harms) / len(harms) if harms else 0.0
        rows.append({"event": ev.id, "harm": h, "output": out.text,
                     "retrieved": [m.id for m in retrieved], "harmful": h >= HARMFUL})
    n_harm = sum(1 for r in rows if r["harmful"])
    return {"events": rows, "harmful": n_harm, "total": len(rows),
            "rate": n_harm / len(rows) if rows else 0.0,
            "mean_harm": sum(r["harm"] for r in rows) / len(rows) if rows else 0.0}


def decide_batch(ranked: Sequence[Suspect], events: Sequence[AuditEvent], replayer: Replayer, *,
                 top_n: int | None = None, threshold: float = 0.7, max_rounds: int = 3
                 ) -> tuple[list[str], dict[str, Any], list[dict[str, Any]]]:
    """Steps 3–4 of the module docstring. Returns (batch, residual, rounds)."""
    batch = select_batch(ranked, top_n=top_n, threshold=threshold)
    by_id = {s.id: s for s in ranked}
    rounds: list[dict[str, Any]] = []
    residual = residual_harm(events, replayer, batch)
    rounds.append({"batch_size": len(batch), "harmful": residual["harmful"]})
    if top_n is not None:
        return batch, residual, rounds
    for _ in range(max_rounds):
        if residual["harmful"] == 0:
            break
        in_batch = set(batch)
        extra: list[str] = []
        for row in residual["events"]:
            if not row["harmful"]:
                continue
            for mid in row["retrieved"]:
                s = by_id.get(mid)
                # Only with causal credit: a retrieved memory that merely looks anomalous
                # (a clean near-duplicate family) did not cause what is left.
                if s is not None and mid not in in_batch and mid not in extra \
                        and s.ds >= threshold / 2 and s.cmis > 0:
                    extra.append(mid)
        if not extra:
            break
        batch = batch + sorted(extra, key=lambda m: by_id[m].rank)
        residual = residual_harm(events, replayer, batch)
        rounds.append({"batch_size": len(batch), "harmful": residual["harmful"], "added": extra})
    return batch, residual, rounds
