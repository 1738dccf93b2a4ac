"""Read paths only the analyst's pages need, on top of ``audits.selectors``.

They reshape what the selectors return into rows the templates lay out as they are (the
templates compute nothing).
"""

from __future__ import annotations

from typing import Any

from audits import selectors
from audits.models import AuditRun, ReviewProposal
from ledger.models import Memory
from orgs.models import Organization

HARMFUL = 0.5

BASELINE_NAMES = {
    "cmis": "CMIS only",
    "mcg": "MCG (CAS) only",
    "frequency": "Retrieval frequency",
    "nn-contradiction": "Nearest-neighbour contradiction",
    "random": "Random",
}


def audit_results(*, organization: Organization, audit_run_id: int) -> dict[str, Any]:
    """``selectors.suspects_for_run`` plus: bars in percent, the baselines as table rows beside
    DS, per-event harm before and after the batch, and the graph with the suspects' scores."""
    data = selectors.suspects_for_run(organization=organization, audit_run_id=audit_run_id)
    for s in data["suspects"]:
        s["bars"] = {k: max(0, min(100, round(100 * float(s[k] or 0)))) for k in ("cmis", "cas", "ds")}
        s["events_hit"] = sum(1 for e in s["per_event"] if float(e.get("score") or 0) > 0)
    events = data["events"]
    harmful_before = sum(1 for e in events if float(e.get("h_observed") or 0) >= HARMFUL)
    residual = data["residual"] or {}
    after = {e["event"]: e for e in residual.get("events", [])}
    event_rows = [{
        "id": e["id"], "query": e.get("query", ""), "before": e.get("h_observed"),
        "after": after.get(e["id"], {}).get("harm"), "harmful_after": after.get(e["id"], {}).get("harmful"),
        "output_after": after.get(e["id"], {}).get("output", ""),
    } for e in events]
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
    data.update({
        "harmful_before": harmful_before, "events_total": len(events), "event_rows": event_rows,
        "harmful_after": residual.get("harmful"), "batch_size": batch_size, "baseline_rows": baselines,
        "conflict_edges": sum(1 for e in data["graph"]["edges"] if e.get("conflict")),
        "proposable": sum(1 for s in data["suspects"] if s["in_batch"] and not s["proposal_id"]
                          and s["state"] != "poison_likely"
                          and verdicts.get(s["external_id"], {}).get("verdict") != "honest-error"),
        "verdict_groups": {
            "poison_like": [{**v, "suspect": suspect_by_ext.get(ext)} for ext, v in sorted(verdicts.items())
                            if v.get("verdict") != "honest-error"],
            "honest_errors": [{**v, "suspect": suspect_by_ext.get(ext)} for ext, v in sorted(verdicts.items())
                              if v.get("verdict") == "honest-error"],
        },
        "collateral": {k: v for k, v in (res.get("collateral") or {}).items() if k != "rows"},
    })
    return data


def dashboard(*, organization: Organization) -> dict[str, Any]:
    runs = list(selectors.audit_run_list(organization=organization)[:6])
    return {
        "counts": selectors.dashboard_counts(organization=organization),
        "recent_incidents": list(selectors.incident_list(organization=organization)[:6]),
        "recent_runs": runs,
        "active_runs": [r for r in runs if not r.is_finished],
    }


def review_queue(*, organization: Organization, user, store=None) -> dict[str, Any]:
    """Open proposals (each marked when four-eyes bars this user), those waiting for the
    housekeeper, and the latest decisions with their signed labels."""
    open_items = list(selectors.proposal_queue(organization=organization, status=ReviewProposal.Status.OPEN,
                                               store=store))
    for p in open_items:
        p.four_eyes_blocked = bool(p.store.four_eyes and user is not None and p.proposed_by_id == user.pk)
    applying = list(selectors.proposal_queue(organization=organization, status=ReviewProposal.Status.APPLYING,
                                             store=store))
    decided = list(ReviewProposal.objects.filter(
        organization=organization, status__in=[ReviewProposal.Status.APPROVED, ReviewProposal.Status.REFUTED])
        .select_related("memory", "store", "decided_by", "label").order_by("-decided_at", "-pk")[:15])
    return {"open": open_items, "applying": applying, "decided": decided}


def pending_decisions(*, organization: Organization) -> list[ReviewProposal]:
    return list(selectors.proposal_queue(organization=organization, status=ReviewProposal.Status.APPLYING))


def audit_runs_active(*, organization: Organization) -> list[AuditRun]:
    return [r for r in selectors.audit_run_list(organization=organization)[:20] if not r.is_finished]
