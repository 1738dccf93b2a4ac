"""Read paths only the analyst's pages need, on top of ``audits.selectors``.

They reshape what the selectors return into rows the templates lay out as they are (the
templates compute nothing).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.core.cache import cache

from audits import selectors
from audits.engine import layout
from audits.models import AuditRun, AuditSuspect, ReplayJobRecord, ReviewProposal
from audits.services import review_ineligibility
from audits.services.review import run_corrections
from ledger.models import Memory
from orgs.models import Membership, Organization

HARMFUL = 0.5

BASELINE_NAMES = {
    "cmis": "CMIS only",
    "mcg": "MCG (CAS) only",
    "frequency": "Retrieval frequency",
    "nn-contradiction": "Nearest-neighbour contradiction",
    "random": "Random",
}


# What each stage of the audit's agent calls does: the results page counts the calls by stage
# and names the stages the call budget cut short.
BUDGET_STAGES = {
    "cmis": "the incidents' counterfactual replays (CMIS)",
    "residual": "the batch's residual harm",
    "conditional": "the conditional rounds (suspects that show once the batch is out)",
    "peel": "peeling (an incident's harm-carrying records taken out layer by layer until its harm is gone)",
    "expansion": "pattern expansion (unobserved copies of the confirmed poisons)",
    "claims": "what records naming a side of a question's choice claim (each read alone)",
    "copies": "joining the confirmed poisons' planted copies",
    "reach": "the reach (unobserved poisons verified by replay)",
    "collateral": "the collateral check",
    "baselines": "the baselines' replays",
}


def audit_results(*, organization: Organization, audit_run_id: int) -> dict[str, Any]:
    """``selectors.suspects_for_run`` plus: bars in percent, the baselines as table rows beside
    DS, per-event harm before and after the batch, and the graph with the suspects' scores."""
    data = selectors.suspects_for_run(organization=organization, audit_run_id=audit_run_id)
    replays = _RunReplays(data["run"], graph=data["graph"])
    for s in data["suspects"]:
        # The table shows the normalised CMIS and CAS, the values DS fuses (raw ones in the tooltip).
        s["bars"] = {k: max(0, min(100, round(100 * float(s[src] or 0))))
                     for k, src in (("cmis", "cmis_hat"), ("cas", "cas_hat"), ("ds", "ds"))}
        s["events_hit"] = sum(1 for e in s["per_event"] if float(e.get("score") or 0) > 0)
        # The evidence panel for every suspect the audit credits (DS > 0); a zero-score row has none.
        s["evidence"] = suspect_evidence(run=data["run"], suspect=s, replays=replays) if s["ds"] > 0 else None
        s["signal_rows"] = signal_rows(s["signals"] or {})
    events = data["events"]
    residual = data["residual"] or {}
    after = {e["event"]: e for e in residual.get("events", [])}
    event_rows = [{
        "id": e["id"], "query": e.get("query", ""), "before": e.get("h_observed"),
        "after": after.get(e["id"], {}).get("harm"), "harmful_after": after.get(e["id"], {}).get("harmful"),
        "output_after": after.get(e["id"], {}).get("output", ""),
        "harmful_before": float(e.get("h_observed") or 0) >= HARMFUL,
        # None (no replay recorded) counts as reproduced: nothing says otherwise.
        "reproduced": replays.reproduced(e["id"]) is not False,
    } for e in events]
    # The headline counts only the harm the replay reproduced: a removal cannot be credited
    # with "fixing" an incident whose harm never came back in the replay.
    counted = [e for e in event_rows if e["harmful_before"] and e["reproduced"]]
    harmful_before = len(counted)
    not_reproduced = [e["id"] for e in event_rows if e["harmful_before"] and not e["reproduced"]]
    harmful_after = sum(1 for e in counted if e["harmful_after"]) if residual else None
    rounds = [{"n": i, "batch_size": r.get("batch_size"), "harmful": r.get("harmful"),
               "added": len(r.get("added") or []), "split": len(r.get("split") or []),
               "restored": len(r.get("restored") or [])}
              for i, r in enumerate(data["residual_rounds"], start=1)
              if i > 1 and r.get("batch_size") and r.get("harmful") is not None]
    batch_size = len(data["batch"])
    baselines = []
    if residual:
        baselines.append({"key": "ds", "name": "DS (CMIS + CAS fused)", "removed": batch_size,
                          "harmful": residual.get("harmful"), "total": residual.get("total"),
                          "rate": residual.get("rate"), "ours": True})
    for key, b in (data["baselines"] or {}).items():
        r = b.get("residual") or {}
        baselines.append({"key": key, "name": BASELINE_NAMES.get(key, key), "removed": len(b.get("removed", [])),
                          "harmful": r.get("harmful"), "total": r.get("total"), "rate": r.get("rate"),
                          "ours": False})
    suspect_by_ext = {s["external_id"]: s for s in data["suspects"]}
    res = data["run"].results or {}
    verdicts = res.get("verdicts") or {}  # issue 16: poison-like vs honest error per batch member
    text_by_pk = dict(Memory.objects.filter(pk__in=[n["memory_pk"] for n in data["graph"]["nodes"]
                                                    if n.get("memory_pk")]).values_list("pk", "text"))
    nodes = []
    for n in data["graph"]["nodes"]:
        s = suspect_by_ext.get(n["id"])
        nodes.append({**n, "ds": s["ds"] if s else None, "rank": s["rank"] if s else None,
                      "in_batch": bool(s and s["in_batch"]), "text": (text_by_pk.get(n.get("memory_pk")) or "")[:140]})
    data["graph"] = {"nodes": nodes, "edges": data["graph"].get("edges", [])}
    focus = data["batch"] or [s["external_id"] for s in data["suspects"] if s["ds"] > 0][:5]
    data["graph_views"] = audit_graph_views(run=data["run"], graph=data["graph"], focus=focus)
    data.update({
        "harmful_before": harmful_before, "events_total": len(events), "event_rows": event_rows,
        "harmful_after": harmful_after, "not_reproduced": not_reproduced, "round_rows": rounds,
        "positive_count": selectors.positive_suspect_count(run=data["run"]), "terms": TERMS,
        "batch_size": batch_size, "baseline_rows": baselines,
        "budget_cut": [BUDGET_STAGES.get(s, s) for s in data["budget"].get("cut", [])],
        "calls_by_stage": [(BUDGET_STAGES.get(s, s), n) for s, n in (data["budget"].get("by_stage") or {}).items() if n],
        "conflict_edges": sum(1 for e in data["graph"]["edges"] if e.get("conflict")),
        "proposable": sum(1 for s in data["suspects"] if s["in_batch"] and not s["blocked"]
                          and verdicts.get(s["external_id"], {}).get("verdict") != "honest-error"),
    })
    data.update(verdict_groups(run=data["run"], suspect_by_ext=suspect_by_ext))
    data["fusion"] = fusion_weighting(res)
    return data


def fusion_weighting(results: dict[str, Any]) -> dict[str, Any] | None:
    """The results page's "How CMIS and CAS were weighted" card (issue 16): the α the analysis
    used and how this store's evidence set it, what CAS decided, and each signal's AUC on the
    run's confirmed seeds (best first). None for a run that recorded none of it."""
    inf = results.get("signal_influence") or {}
    if "alpha_used" not in inf:
        return None
    fit = inf.get("alpha_fit") or {}
    return {"alpha": inf["alpha_used"], "cas_weight": round(1 - float(inf["alpha_used"]), 3), "fit": fit,
            "cas_auc": inf.get("cas_auc"), "seeds": inf.get("seeds"), "reference": inf.get("reference"),
            "cas_decided": inf.get("cas_decided", 0), "rank_shift": inf.get("mean_rank_shift_in_batch"),
            "signals": signal_rows(dict(sorted((inf.get("signal_auc") or {}).items(),
                                               key=lambda kv: (-kv[1], kv[0]))))}


# What each signal the engine records per suspect means (``audits.engine.graph`` and
# ``audits.engine.expansion``), for the results page: (label, explanation). The JSON export keeps
# the engine's names.
SIGNAL_TERMS = {
    "contradiction": ("Contradiction", "How strongly it contradicts its neighbours outside its own near-duplicate "
                                       "group, weighted by similarity (raised for weakly connected memories)."),
    "isolation": ("Isolation", "1 − its mean similarity to its nearest neighbours in the store."),
    "tightness": ("Tightness", "Its mean similarity to its 3 nearest neighbours."),
    "dup_count": ("Near-duplicates", "How many of its neighbours are near-duplicates of it (planted redundancy)."),
    "cluster_gap": ("Cluster gap", "How much more it agrees with its nearest few than with the rest of its "
                                   "neighbourhood: records that agree with each other and with nothing else."),
    "relative_tightness": ("Relative tightness", "Its tightness minus the median tightness of its neighbours "
                                                 "outside its group: a group abnormally tight for its neighbourhood."),
    "answer_agreement": ("Same answer as the causal memories", "Reached from the confirmed memories: how far its "
                                                               "answer agrees with theirs."),
    "seed_embedding": ("Close to the causal memories", "Its similarity to the confirmed causal memories, above "
                                                       "the most any sampled clean memory reaches."),
    "seed_lexical": ("Words of the causal memories", "Its word overlap with the confirmed causal memories, above "
                                                     "the most any sampled clean memory reaches."),
    "seed_provenance": ("Their rare source", "It shares a source with the causal memories that few memories of the "
                                             "store have, where the sampled clean memories do not."),
    "seed_write_time": ("Written with them", "It was written inside the causal memories' write-time burst, where "
                                             "the sampled clean memories were not."),
    "seed_shape_margin": ("Shaped like the causal memories", "How much nearer it is to the confirmed memories' "
                                                             "shape than to the shape of memories found clean."),
}


def signal_rows(values: dict[str, float]) -> list[dict[str, Any]]:
    """``{name: value}`` as rows for the page, in the given order: the engine's name, its label and
    explanation (the name itself for a signal this table does not know), and the value."""
    return [{"name": k, "label": SIGNAL_TERMS.get(k, (k, ""))[0], "help": SIGNAL_TERMS.get(k, (k, ""))[1],
             "value": v} for k, v in values.items()]


def verdict_groups(*, run: AuditRun, suspect_by_ext: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The results page's "Poison or honest error" card (issue 16).

    ``verdict_groups``: ``poison_like`` rows (reasons, the suspect, ``breaking`` when the
    collateral check found that removing it changes a clean answer the store supported) and
    ``honest_errors`` rows (reasons, kind, the correcting memory with its pk for a link, the
    correction proposal of this run if any, and why it cannot be proposed now);
    ``correctable``: how many honest errors can be proposed as corrections now;
    ``collateral``: the batch's utility cost (questions checked, answers changed, supported
    answers broken, as counts and percent) and whether the batch is flagged.
    """
    res = run.results or {}
    verdicts = res.get("verdicts") or {}
    corrections = run_corrections(run)
    collateral = {k: v for k, v in (res.get("collateral") or {}).items() if k != "rows"}
    breaking = set(collateral.get("breaking") or [])
    n = collateral.get("questions") or 0
    if n:
        collateral["changed_percent"] = round(100 * (collateral.get("changed") or 0) / n, 1)
        collateral["broken_percent"] = round(100 * (collateral.get("broken") or 0) / n, 1)
    poison_like = [{**v, "suspect": suspect_by_ext.get(ext), "breaking": ext in breaking}
                   for ext, v in sorted(verdicts.items()) if v.get("verdict") != "honest-error"]
    honest_ext = sorted(corrections)
    correcting = dict(Memory.objects.filter(store=run.store, external_id__in=[
        str(c["corrected_by"]) for c in corrections.values() if c.get("corrected_by")]).values_list("external_id", "pk"))
    suspects = list(AuditSuspect.objects.filter(run=run, memory__external_id__in=honest_ext).select_related("memory"))
    blockers = selectors.proposal_blockers(audit_run=run, suspects=suspects, kind=ReviewProposal.Kind.CORRECTION)
    blocked_by_ext = {s.memory.external_id: blockers.get(s.memory_id) for s in suspects}
    pk_by_ext = {s.memory.external_id: s.memory_id for s in suspects}
    proposals: dict[str, ReviewProposal] = {}
    for p in (ReviewProposal.objects.filter(audit_run=run, kind=ReviewProposal.Kind.CORRECTION)
              .select_related("memory", "decided_by", "transition").order_by("created_at", "pk")):
        proposals[p.memory.external_id] = p  # the latest one per memory
    honest = []
    for ext in honest_ext:
        c = corrections[ext]
        cb = str(c.get("corrected_by") or "") or None
        honest.append({**(verdicts.get(ext) or {}), "memory_id": ext, "kind": c.get("kind"),
                       "reasons": c.get("reasons") or (verdicts.get(ext) or {}).get("reasons") or [],
                       "corrected_by": cb, "corrected_by_pk": correcting.get(cb) if cb else None,
                       "suspect": suspect_by_ext.get(ext), "memory_pk": pk_by_ext.get(ext),
                       "proposal": proposals.get(ext), "blocked": blocked_by_ext.get(ext),
                       "proposable": ext in pk_by_ext and not blocked_by_ext.get(ext),
                       "breaking": ext in breaking})
    return {"verdict_groups": {"poison_like": poison_like, "honest_errors": honest},
            "correctable": sum(1 for h in honest if h["proposable"]), "collateral": collateral}


def audit_graph_views(*, run: AuditRun, graph: dict[str, Any], focus: list[str]) -> dict[str, Any]:
    """The graph card's two views (``layout.focus_view`` of the batch, ``layout.full_view``),
    laid out once per finished run and cached: every later view of the page reads them back.

    Keyed by the run, when it finished, and a digest of the graph and the focus, so a run that
    is resumed and finishes again (or a reused primary key) never reads another's layout.
    The worker may call it right after the analysis to have it ready for the first view."""
    digest = hashlib.sha256(json.dumps([sorted(n["id"] for n in graph.get("nodes", [])), len(graph.get("edges", [])),
                                        focus], separators=(",", ":")).encode()).hexdigest()[:24]
    key = f"audit-graph-views:1:{run.pk}:{run.finished_at.isoformat() if run.finished_at else '-'}:{digest}"
    views = cache.get(key)
    if views is None:
        views = {"focus": layout.focus_view(graph, focus=focus), "full": layout.full_view(graph)}
        cache.set(key, views, timeout=None)
    return views


def graph_views_warm(*, run: AuditRun) -> None:
    """Lay out and cache a finished run's graph views now (the worker, right after the analysis),
    so the first person to open the results page does not wait for the layout."""
    audit_results(organization=run.organization, audit_run_id=run.pk)


# ----------------------------------------------------------------------------- evidence

TERMS = {
    "cmis": "CMIS (causal memory influence): how much the harm of the incidents dropped when the agent's "
            "answer was replayed without this memory (alone, or with its near-duplicate group).",
    "cas": "CAS (consistency anomaly): how much the memory disagrees with its neighbours in the consistency "
           "graph (contradictions, near-duplicate families, query-shaped text).",
    "ds": "DS (detection score): the fused suspicion, α·normalised CMIS + (1−α)·normalised CAS, that ranks "
          "the suspects and picks the batch.",
    "single": "Harm drop when the replay leaves out this memory alone.",
    "group": "Harm drop when the replay leaves out this memory's whole near-duplicate group.",
    "in_rstar": "Whether the agent actually retrieved this memory for the incident (R* = the logged retrieval).",
    "reproduced": "Whether replaying the incident with every memory in place gave the harmful answer again; a "
                  "harm the replay cannot reproduce cannot be attributed, and is left out of before → after.",
    "now_answers": "What the agent answers to the incident's question when replayed without the batch.",
    "batch": "The suspects proposed for removal together: the top of the DS ranking, cut where removing more "
             "stops lowering the incidents' harm.",
    "residual": "Harm of each incident replayed with the batch removed (0 = harmless, 1 = the harmful answer); "
                "harmful from 0.50 up.",
    "rounds": "Later rounds: the audit removes the batch, replays again and adds the suspects that only show "
              "up once the first batch is gone.",
    "baselines": "Simpler ways to pick the same number of memories, replayed the same way, for comparison.",
    "se": "Standard error of the harm drop over the replay samples.",
    "agent_calls": "How many times the agent was called (replays of the incidents, verification of the suspects, "
                   "the collateral check, the baselines; cached replays not counted), and the audit's budget.",
    "ego": "This memory and its nearest neighbours in the consistency graph; red lines are contradictions.",
}


def _replay_view(result: dict | None) -> dict[str, Any] | None:
    if not result:
        return None
    harms = [float(h) for h in result.get("harms") or []]
    return {"output": result.get("output", ""), "harm": sum(harms) / len(harms) if harms else 0.0,
            "harmful": bool(harms) and sum(harms) / len(harms) >= HARMFUL}


class _RunReplays:
    """A finished run's recorded replays, incidents and graph, loaded once for many suspects."""

    def __init__(self, run: AuditRun, graph: dict[str, Any] | None = None) -> None:
        self.graph = graph if graph is not None else _graph_with_pks(run)
        self.base: dict[str, dict] = {}
        self.single: dict[tuple[str, str], dict] = {}
        self.group: dict[tuple[str, str], dict] = {}
        for event, kind, target, result in ReplayJobRecord.objects.filter(
                run=run, status=ReplayJobRecord.Status.DONE).values_list("event_id", "kind", "target", "result"):
            if kind == "base":
                self.base[event] = result
            elif kind == "single":
                self.single[(event, target)] = result
            elif kind == "group":
                self.group[(event, target)] = result
        self.incidents = {i.external_id: i for i in run.incidents.all()}
        self.h_observed = {e["id"]: e.get("h_observed") for e in (run.results or {}).get("events", [])}

    def reproduced(self, event: str) -> bool | None:
        """Did the full replay give the observed harm again (the engine's own test)? None: no record."""
        base = _replay_view(self.base.get(event))
        if base is None or self.h_observed.get(event) is None:
            return None
        return base["harm"] >= float(self.h_observed[event]) - 1e-9


def _graph_with_pks(run: AuditRun) -> dict[str, Any]:
    graph = (run.results or {}).get("graph") or {"nodes": [], "edges": []}
    pk_by_ext = dict(Memory.objects.filter(store=run.store, external_id__in=[n["id"] for n in graph["nodes"]])
                     .values_list("external_id", "pk"))
    return {"nodes": [{**n, "memory_pk": pk_by_ext.get(n["id"])} for n in graph["nodes"]], "edges": graph["edges"]}


def _ego(graph: dict[str, Any], external_id: str) -> dict[str, Any] | None:
    """``layout.ego_view`` in percent of a 100 x 100 drawing, each label cut short."""
    ego = layout.ego_view(graph, external_id)
    if ego is None:
        return None
    for n in [ego["center"], *ego["neighbours"]]:
        n["px"], n["py"], n["ty"] = round(100 * n["x"], 2), round(100 * n["y"], 2), round(100 * n["y"] + 7.5, 2)
        n["short"] = n["id"] if len(n["id"]) <= 14 else n["id"][:13] + "…"
    return ego


def suspect_evidence(*, run: AuditRun, suspect: dict[str, Any], replays: _RunReplays | None = None
                     ) -> dict[str, Any]:
    """What a reviewer decides on for one suspect of ``run``: the incidents it was retrieved
    for with the observed harmful answer, the replayed answers with it, without it and without
    its group, and CMIS/CAS/DS with the normalised values DS used, each explained in a line."""
    replays = replays or _RunReplays(run)
    ext = suspect["external_id"]
    alpha = selectors.run_alpha(run)
    cmis_hat, cas_hat = float(suspect.get("cmis_hat") or 0), float(suspect.get("cas_hat") or 0)
    fused = alpha * cmis_hat + (1 - alpha) * cas_hat
    incidents = []
    for e in suspect.get("per_event") or []:
        event = e.get("event")
        inc = replays.incidents.get(event)
        incidents.append({
            "event": event, "incident_pk": inc.pk if inc else None, "query": inc.query if inc else "",
            "observed_output": inc.output if inc else "", "h_observed": replays.h_observed.get(event),
            "retrieved": bool(e.get("in_rstar")), "reproduced": e.get("reproduced", replays.reproduced(event)),
            "with_it": _replay_view(replays.base.get(event)),
            "without_it": _replay_view(replays.single.get((event, ext))),
            "without_group": _replay_view(replays.group.get((event, e.get("group_id") or ""))),
            "group_id": e.get("group_id"), "single": e.get("single"), "group": e.get("group"),
            "score": e.get("score"), "kind": "conditional" if e.get("conditional") else
            "derived" if e.get("derived") else "",
        })
    ds = float(suspect.get("ds") or 0)
    lines = {
        "cmis": f"CMIS {float(suspect.get('cmis') or 0):.3f} (normalised {cmis_hat:.3f}, the value DS uses): how "
                "much the incidents' harm dropped when replayed without this memory, alone or with its group.",
        "cas": f"CAS {float(suspect.get('cas') or 0):.3f} (normalised {cas_hat:.3f}, the value DS uses): how much "
               "it disagrees with its neighbours in the consistency graph.",
        "ds": f"DS {ds:.3f} = {alpha:g}·{cmis_hat:.3f} + {1 - alpha:g}·{cas_hat:.3f}"
              + ("" if abs(fused - ds) < 5e-4 else f" = {fused:.3f}, raised to {ds:.3f} by causal credit found "
                                                     "in a later round (after the first batch was removed)")
              + ": the fused suspicion that ranks the suspects and picks the batch.",
    }
    return {"text": suspect.get("text", ""), "incidents": incidents, "explain": lines, "alpha": alpha,
            "cmis_hat": cmis_hat, "cas_hat": cas_hat, "ego": _ego(replays.graph, ext)}


def _suspect_dict(s) -> dict[str, Any]:
    return {"external_id": s.memory.external_id, "text": s.memory.text, "ds": s.ds, "cmis": s.cmis, "cas": s.cas,
            "cmis_hat": s.cmis_hat, "cas_hat": s.cas_hat, "per_event": s.per_event}


def memory_evidence(*, organization: Organization, memory: Memory) -> dict[str, Any] | None:
    """The evidence panel for the memory page: from the latest finished audit that credits it
    (DS > 0), with that run and rank; None when no audit has."""
    s = (AuditSuspect.objects.filter(memory=memory, run__organization=organization, run__status=AuditRun.Status.DONE,
                                     ds__gt=0).select_related("run", "memory").order_by("-run__finished_at", "-pk")
         .first())
    if s is None:
        return None
    return {**suspect_evidence(run=s.run, suspect=_suspect_dict(s)), "run": s.run, "rank": s.rank, "terms": TERMS}


def dashboard(*, organization: Organization) -> dict[str, Any]:
    runs = list(selectors.audit_run_list(organization=organization)[:6])
    return {
        "counts": selectors.dashboard_counts(organization=organization),
        "recent_incidents": list(selectors.incident_list(organization=organization)[:6]),
        "recent_runs": runs,
        "active_runs": [r for r in runs if not r.is_finished],
    }


def review_queue(*, organization: Organization, user, store=None,
                 items: list[ReviewProposal] | None = None) -> dict[str, Any]:
    """Open proposals (each marked when four-eyes bars this user), those waiting for the
    housekeeper, and the latest decisions with their signed labels. ``items``: the proposals
    to lay out instead of every open one (a filtered page, ``audits.casework``)."""
    open_items = items if items is not None else list(selectors.proposal_queue(
        organization=organization, status=ReviewProposal.Status.OPEN, store=store))
    membership = Membership.objects.filter(organization=organization, user=user).first() if user else None
    history = selectors.proposal_history(organization=organization, memory_ids=[p.memory_id for p in open_items])
    for p in open_items:
        # What this user may decide (the same rule the decision enforces), and the memory's
        # earlier proposals and decisions.
        p.approve_blocked = review_ineligibility(proposal=p, user=user, decision=ReviewProposal.Decision.APPROVE,
                                                 membership=membership)
        p.refute_blocked = review_ineligibility(proposal=p, user=user, decision=ReviewProposal.Decision.REFUTE,
                                                membership=membership)
        p.history = [h for h in history.get(p.memory_id, []) if h.pk != p.pk]
    _attach_evidence(open_items)
    applying = list(selectors.proposal_queue(organization=organization, status=ReviewProposal.Status.APPLYING,
                                             store=store))
    decided = list(ReviewProposal.objects.filter(
        organization=organization, status__in=[ReviewProposal.Status.APPROVED, ReviewProposal.Status.REFUTED])
        .select_related("memory", "store", "decided_by", "label", "transition").order_by("-decided_at", "-pk")[:15])
    return {"open": open_items, "applying": applying, "decided": decided, "four_eyes": organization.four_eyes,
            "terms": TERMS}


def _attach_evidence(proposals: list[ReviewProposal]) -> None:
    """``p.evidence`` for each audit proposal whose run is finished (None otherwise)."""
    wanted = [p for p in proposals if p.audit_run_id and p.audit_run and p.audit_run.status == AuditRun.Status.DONE]
    rows = {(s.run_id, s.memory_id): s for s in AuditSuspect.objects.filter(
        run_id__in={p.audit_run_id for p in wanted}, memory_id__in={p.memory_id for p in wanted})
        .select_related("memory")}
    replays: dict[int, _RunReplays] = {}
    for p in proposals:
        p.evidence = None
        s = rows.get((p.audit_run_id, p.memory_id)) if p in wanted else None
        if s is None:
            continue
        if p.audit_run_id not in replays:
            replays[p.audit_run_id] = _RunReplays(p.audit_run)
        p.evidence = suspect_evidence(run=p.audit_run, replays=replays[p.audit_run_id], suspect=_suspect_dict(s))


def pending_decisions(*, organization: Organization) -> list[ReviewProposal]:
    return list(selectors.proposal_queue(organization=organization, status=ReviewProposal.Status.APPLYING))


def audit_runs_active(*, organization: Organization) -> list[AuditRun]:
    return [r for r in selectors.audit_run_list(organization=organization)[:20] if not r.is_finished]
