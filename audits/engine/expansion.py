"""Pattern expansion: from confirmed poisons to the records that repeat their attack.

Beyond the paper. Observed incidents retrieve only some of an attack's planted records; the
victim's other questions (held-out probes) retrieve others. CMIS cannot credit those — a
memory must be in some R* to be ablated — and the residual check cannot see them, since every
observed incident is already clean once the first batch is out. The paper's recall drop at
high contamination is this. The planted records share what makes the attack work, the planted
answer (MINJA's bridging step ends in it; PoisonedRAG's passages assert it), so the memory
consistency graph gets one more kind of edge, answer-slot agreement, and the audit follows it:

1. Seeds: the batch members with causal credit (CMIS > 0 on an incident, a conditional round
   or a derived event), each with the event that credited it.
2. Candidates: every allowed memory outside the batch whose answer slot (`metadata.answer`,
   else the last `A:` line) agrees with a seed's — token Jaccard ≥ `agreement` over answers of
   at least `min_tokens` distinct tokens (a bare "yes" is no pattern) — and whose own content
   meets that seed's event harm when the harm is cheap to apply.
3. Derived events: each candidate's own query (`metadata.query`, else its text) is replayed
   over M \\ B with the seed event's harm; a harmful replay is what a victim asking that
   question would get, so it becomes an event.
4. CMIS on the derived events in M \\ B: leave-one-out, near-duplicate groups, and the pattern
   group (every candidate removed together, so planted records cannot back each other up).
   A memory joins when its CMIS there is positive, its agreement reaches the bar and
   DS = α·CMIS + (1 − α)·max(CAS^, agreement) reaches the batch threshold: causal and
   structural evidence both speak, as for the incidents.
5. Repeat with the grown batch (bounded rounds) until no memory joins.
6. Dormant records: a candidate left with no harmful derived event (outvoted or outranked
   today, live as soon as the store shifts) is replayed alone, f(q_m, {m}) — sufficiency
   where CMIS tests necessity. When that output meets the harm, its score is that harm and
   it joins under the same DS rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cmis import (
    AuditEvent,
    CmisScore,
    Group,
    combine_cmis,
    find_groups,
    plan_replays,
    run_replay,
)
from .fusion import HARMFUL
from .replay import Replayer
from .retriever import RetrievedMemory, Retriever

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def answer_slot(metadata: Mapping[str, Any] | None, text: str) -> str | None:
    """A memory's answer: `metadata.answer`, else the text after the last line starting `A:`."""
    ans = metadata.get("answer") if isinstance(metadata, Mapping) else None
    if isinstance(ans, (str, int, float)) and not isinstance(ans, bool) and str(ans).strip():
        return str(ans).strip()
    found = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("A:"):
            found = s[2:].strip()
    return found or None


def slot_tokens(answer: str | None) -> frozenset[str]:
    return frozenset(_TOKEN.findall(answer.casefold())) if answer else frozenset()


def agreement_scores(patterns: Sequence[frozenset[str]], slots: Sequence[frozenset[str]],
                     *, min_tokens: int = 3) -> list[tuple[float, int]]:
    """(best Jaccard, index of that pattern) of every slot against the patterns."""
    pats = [p for p in dict.fromkeys(patterns) if len(p) >= min_tokens]
    index = {p: i for i, p in enumerate(patterns)}
    out: list[tuple[float, int]] = []
    for s in slots:
        best, at = 0.0, -1
        if len(s) >= min_tokens:
            for p in pats:
                inter = len(s & p)
                if inter == 0:
                    continue
                j = inter / (len(s) + len(p) - inter)
                if j > best:
                    best, at = j, index[p]
        out.append((best, at))
    return out


@dataclass
class ExpansionResult:
    batch: list[str]
    added: list[str] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    derived: dict[str, AuditEvent] = field(default_factory=dict)
    scores: dict[str, CmisScore] = field(default_factory=dict)
    agreement: dict[str, float] = field(default_factory=dict)


def expand_batch(batch: Sequence[str], seed_events: Mapping[str, AuditEvent],
                 retriever: Retriever, replayer: Replayer, *,
                 cas_hat: Mapping[str, float], alpha: float, threshold: float,
                 agreement: float = 0.6, min_tokens: int = 3, max_rounds: int = 4,
                 dormant: bool = True,
                 group_thresholds: Sequence[float] = (0.9, 0.8), combine: str = "max",
                 carries_harm: Callable[[AuditEvent, str], bool] | None = None
                 ) -> ExpansionResult:
    """Steps 1–6 of the module docstring. `seed_events`: confirmed poison -> its event."""
    res = ExpansionResult(batch=list(batch))
    seeds: dict[str, AuditEvent] = {m: ev for m, ev in seed_events.items() if m in retriever.index}
    mems = retriever.memories
    slots = [slot_tokens(answer_slot(m.metadata, m.text)) for m in mems]
    allowed = np.isfinite(retriever.scores(np.zeros(retriever.embeddings.shape[1], np.float32)))

    def candidates() -> dict[str, AuditEvent]:
        in_batch = set(res.batch)
        seed_ids = list(seeds)
        patterns = [slots[retriever.index[s]] for s in seed_ids]
        scored = agreement_scores(patterns, slots, min_tokens=min_tokens)
        cands: dict[str, AuditEvent] = {}
        for i, (j, at) in enumerate(scored):
            mid = mems[i].id
            if at < 0 or j < agreement or mid in in_batch or not allowed[i]:
                continue
            ev = seeds[seed_ids[at]]
            if carries_harm is not None and not carries_harm(ev, mid):
                continue
            cands[mid] = ev
            res.agreement[mid] = max(res.agreement.get(mid, 0.0), j)
        return cands

    for rnd in range(max_rounds):
        if not seeds:
            break
        in_batch = set(res.batch)
        cands = candidates()
        if not cands:
            break
        # 3. derived events: the candidates' own queries, replayed over M \ B
        derived: list[AuditEvent] = []
        seen_q: set[str] = set()
        for mid, ev in cands.items():
            m = mems[retriever.index[mid]]
            q = m.metadata.get("query") if isinstance(m.metadata, Mapping) else None
            q = q if isinstance(q, str) and q.strip() else m.text
            if q in seen_q:
                continue
            seen_q.add(q)
            retrieved, out = replayer.replay(q, in_batch, ev.candidates)
            harms = [float(ev.harm(q, s, harmful_output=ev.output)) for s in out.samples]
            h = sum(harms) / len(harms) if harms else 0.0
            if h >= HARMFUL:
                dev = AuditEvent(f"derived:{mid}", q, out.text, [r.id for r in retrieved], ev.harm,
                                 h, ev.candidates)
                derived.append(dev)
                res.derived[dev.id] = dev
        if not derived:
            res.rounds.append({"expansion": True, "candidates": len(cands), "derived_events": 0,
                               "added": []})
            break
        # 4. CMIS on the derived events in M \ B, with the pattern group
        pool = list(dict.fromkeys(m for dev in derived for m in dev.retrieved))
        groups = [g for g in find_groups(pool, retriever, thresholds=group_thresholds)
                  if not in_batch.intersection(g.members)]
        groups.append(Group(f"pattern{rnd}", tuple(sorted(cands)), agreement))
        jobs = plan_replays(derived, groups, base_removed=res.batch,
                            retrieved={d.id: d.retrieved for d in derived})
        dmap = {d.id: d for d in derived}
        results = [run_replay(j, dmap[j.event_id], replayer) for j in jobs]
        cond = combine_cmis(results, derived, groups, combine=combine, carries_harm=carries_harm)
        added: list[str] = []
        for mid, sc in cond.items():
            agree = res.agreement.get(mid, 0.0)
            if mid in in_batch or sc.cmis <= 0 or agree < agreement:
                continue
            ds = alpha * min(sc.cmis, 1.0) + (1 - alpha) * max(cas_hat.get(mid, 0.0), agree)
            if ds >= threshold:
                added.append(mid)
                res.scores[mid] = sc
                best = max(sc.per_event, key=lambda e: e["score"])
                seeds[mid] = dmap[best["event"]]
        res.rounds.append({"expansion": True, "candidates": len(cands), "derived_events": len(derived),
                           "replays": len(jobs), "added": sorted(added)})
        if not added:
            break
        res.batch = res.batch + sorted(added)
        res.added += sorted(added)
    if dormant and seeds:
        # 6. what is left of the pattern, each record alone with its own query
        joined: list[str] = []
        for mid, ev in candidates().items():
            m = mems[retriever.index[mid]]
            q = m.metadata.get("query") if isinstance(m.metadata, Mapping) else None
            q = q if isinstance(q, str) and q.strip() else m.text
            out = replayer.answer_alone(q, RetrievedMemory(m.id, m.text, 1.0, 1, m.metadata),
                                        ev.candidates)
            harms = [float(ev.harm(q, s, harmful_output=ev.output)) for s in out.samples]
            h = sum(harms) / len(harms) if harms else 0.0
            agree = res.agreement.get(mid, 0.0)
            if h >= HARMFUL and alpha * min(h, 1.0) + (1 - alpha) * max(
                    cas_hat.get(mid, 0.0), agree) >= threshold:
                joined.append(mid)
                res.scores[mid] = CmisScore(mid, h, h, h, 0.0, 0.0, 1, [
                    {"event": f"alone:{mid}", "score": h, "single": 0.0, "group": 0.0,
                     "sufficiency": True, "query": q, "output": out.text}])
        res.rounds.append({"expansion": True, "dormant": True, "added": sorted(joined)})
        res.batch = res.batch + sorted(joined)
        res.added += sorted(joined)
    return res
