"""Read paths for the audit pages and the API, always scoped to one organization.

An object of another organization raises ``DoesNotExist`` (the views answer 404). Values the
templates show are computed here, so templates only lay them out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q, QuerySet

from audits.models import AuditRun, AuditSuspect, Incident, ReviewProposal
from ledger.models import EpistemicLabel, Memory, Store
from ledger.recall import quarantined_q
from orgs.models import Organization

# ----------------------------------------------------------------------------- incidents


def incident_list(*, organization: Organization, store: Store | None = None) -> QuerySet[Incident]:
    qs = Incident.objects.filter(organization=organization).select_related("store", "created_by")
    if store is not None:
        qs = qs.filter(store=store)
    return qs.annotate(audit_count=Count("audit_runs")).order_by("-created_at", "external_id")


def incident_get(*, organization: Organization, incident_id: int) -> Incident:
    return Incident.objects.select_related("store", "created_by").get(pk=incident_id, organization=organization)


def incident_retrieved_memories(*, incident: Incident) -> list[dict[str, Any]]:
    """The incident's retrieved memories in rank order, with their current state."""
    by_ext = {m.external_id: m for m in Memory.objects.filter(store=incident.store,
                                                                 external_id__in=incident.retrieved)}
    out = []
    for rank, ext in enumerate(incident.retrieved, start=1):
        m = by_ext.get(ext)
        out.append({"rank": rank, "external_id": ext, "memory": m, "text": m.text if m else "",
                    "state": (m.epistemic_state or "clean") if m else "missing"})
    return out


# ----------------------------------------------------------------------------- audit runs


def audit_run_list(*, organization: Organization, store: Store | None = None,
                   status: str | None = None) -> QuerySet[AuditRun]:
    qs = AuditRun.objects.filter(organization=organization).select_related("store", "created_by")
    if store is not None:
        qs = qs.filter(store=store)
    if status:
        qs = qs.filter(status=status)
    return qs.annotate(incident_count=Count("incidents", distinct=True)).order_by("-created_at")


def audit_run_get(*, organization: Organization, audit_run_id: int) -> AuditRun:
    return AuditRun.objects.select_related("store", "created_by").get(pk=audit_run_id, organization=organization)


def audit_run_progress(*, organization: Organization, audit_run_id: int) -> dict[str, Any]:
    """What the live progress bar polls: status, stage, replays done/total, percent, error."""
    run = audit_run_get(organization=organization, audit_run_id=audit_run_id)
    return {"id": run.pk, "status": run.status, "stage": run.stage, "stage_label": run.get_stage_display(),
            "replays_done": run.replays_done, "replays_total": run.replays_total,
            "percent": run.progress_percent, "finished": run.is_finished, "error": run.error}


def suspects_for_run(*, organization: Organization, audit_run_id: int, limit: int | None = 200) -> dict[str, Any]:
    """The results page in one dict.

    ``suspects``: ranked rows (memory, text, CMIS with CI, CAS, DS, normalised parts, in_batch,
    per-event breakdown, structural signals, current state, open proposal);
    ``batch``, ``residual`` (harm with the batch removed, per event), ``residual_rounds``,
    ``baselines`` ({method: removed ids, residual} each with the batch's size, plus precision
    against nothing — truth is never known here), ``graph`` (Plotly nodes/edges from
    ``engine.graph.graph_for_plot``; nodes carry ``memory_pk`` for links), ``events``,
    ``groups``, ``agent_calls``, ``timings``.
    """
    run = audit_run_get(organization=organization, audit_run_id=audit_run_id)
    rows = AuditSuspect.objects.filter(run=run).select_related("memory").order_by("rank")
    if limit is not None:
        rows = rows[:limit]
    rows = list(rows)
    live = dict(ReviewProposal.objects.filter(
        memory_id__in=[r.memory_id for r in rows],
        status__in=[ReviewProposal.Status.OPEN, ReviewProposal.Status.APPLYING]).values_list("memory_id", "pk"))
    # Why a suspect cannot be proposed now: the rule "Propose" applies, shown beside the row.
    blockers = proposal_blockers(audit_run=run, suspects=rows)
    suspects = [{
        "rank": s.rank, "memory_pk": s.memory_id, "external_id": s.memory.external_id, "text": s.memory.text,
        "ds": s.ds, "cmis": s.cmis, "cmis_ci": [s.cmis_ci_low, s.cmis_ci_high], "cmis_hat": s.cmis_hat,
        "cas": s.cas, "cas_hat": s.cas_hat, "in_batch": s.in_batch, "per_event": s.per_event,
        "signals": s.signals, "state": s.memory.epistemic_state or "clean", "proposal_id": live.get(s.memory_id),
        "blocked": blockers.get(s.memory_id),
    } for s in rows]
    res = run.results or {}
    pk_by_ext = dict(Memory.objects.filter(store=run.store, external_id__in=[
        n["id"] for n in (res.get("graph") or {}).get("nodes", [])]).values_list("external_id", "pk"))
    graph = dict(res.get("graph") or {"nodes": [], "edges": []})
    graph["nodes"] = [{**n, "memory_pk": pk_by_ext.get(n["id"])} for n in graph.get("nodes", [])]
    return {
        "run": run,
        "suspects": suspects,
        "suspect_count": AuditSuspect.objects.filter(run=run).count(),
        "batch": res.get("batch", []),
        "residual": res.get("residual"),
        "residual_rounds": res.get("residual_rounds", []),
        "baselines": res.get("baselines", {}),
        "graph": graph,
        "events": res.get("events", []),
        "groups": res.get("groups", []),
        "agent_calls": res.get("agent_calls"),
        "budget": res.get("budget") or {},
        "replays": res.get("replays"),
        "timings": res.get("timings", {}),
        "alpha": run_alpha(run),
    }


def run_alpha(run: AuditRun) -> float:
    """The fusion weight α the run's analysis used: fitted to the store's evidence
    (``signal_influence.alpha_used``), else the run's setting."""
    used = ((run.results or {}).get("signal_influence") or {}).get("alpha_used")
    return float(used) if used is not None else float(run.settings.get("alpha", 0.6))


def positive_suspect_count(*, run: AuditRun) -> int:
    """Suspects the audit credits at all (DS > 0); a zero-score row is ranked, not suspected."""
    return AuditSuspect.objects.filter(run=run, ds__gt=0).count()


# ----------------------------------------------------------------------------- review


def proposal_queue(*, organization: Organization, status: str | None = "open",
                   store: Store | None = None) -> QuerySet[ReviewProposal]:
    """Proposals to review (default: open), oldest first, audit and classifier ones alike.

    Call ``services.classifier_flags_sync`` before showing the queue so the classifier's direct
    ``poison_likely`` labels appear as items the reviewer can confirm or refute.
    """
    qs = ReviewProposal.objects.filter(organization=organization).select_related(
        "organization", "memory", "store", "audit_run", "proposed_by", "decided_by", "label", "flag_label")
    if status:
        qs = qs.filter(status=status)
    if store is not None:
        qs = qs.filter(store=store)
    return qs.order_by("created_at", "pk")


def proposal_get(*, organization: Organization, proposal_id: int) -> ReviewProposal:
    return ReviewProposal.objects.select_related("memory", "store", "audit_run", "proposed_by", "decided_by",
                                                 "label", "flag_label").get(pk=proposal_id,
                                                                            organization=organization)


def proposal_history(*, organization: Organization, memory_ids: list[int]) -> dict[int, list[ReviewProposal]]:
    """Every proposal on these memories, oldest first, with who proposed and who decided what
    and why: the reviewer sees a memory's earlier decisions before deciding again."""
    out: dict[int, list[ReviewProposal]] = {m: [] for m in memory_ids}
    for p in (ReviewProposal.objects.filter(organization=organization, memory_id__in=memory_ids)
              .select_related("decided_by", "proposed_by", "label", "audit_run", "corrected_by", "transition")
              .order_by("created_at", "pk")):
        out[p.memory_id].append(p)
    return out


def _refutations(memory_ids: Iterable[int], kind: str = ReviewProposal.Kind.POISON) -> dict[int, ReviewProposal]:
    """The latest refutation of each memory among proposals of ``kind`` (decided, or still being
    signed): a rejected correction says nothing about poison, nor a refuted poison about a correction."""
    latest: dict[int, ReviewProposal] = {}
    for p in (ReviewProposal.objects.filter(memory_id__in=list(memory_ids), decision=ReviewProposal.Decision.REFUTE,
                                            kind=kind)
              .exclude(decided_at=None).select_related("decided_by").order_by("decided_at", "pk")):
        latest[p.memory_id] = p
    return latest


def proposal_blockers(*, audit_run: AuditRun, suspects: Iterable[AuditSuspect],
                      kind: str = ReviewProposal.Kind.POISON) -> dict[int, str]:
    """Why each of these suspects of ``audit_run`` cannot be proposed now as ``kind`` ({memory
    id: why}); a memory missing from the answer can be.

    A memory already under review or already ``poison_likely`` is not proposed twice. A refuted
    memory is proposed again only on new evidence: an audit that finished after the refutation
    and ranks it (a positive score); otherwise one person could undo a reviewer's decision by
    pressing "Propose batch" again. The same holds for a rejected correction; a memory this
    audit's correction already down-weighted is not corrected twice for the same audit.
    """
    suspects = list(suspects)
    ids = [s.memory_id for s in suspects]
    live = dict(ReviewProposal.objects.filter(
        memory_id__in=ids, status__in=[ReviewProposal.Status.OPEN, ReviewProposal.Status.APPLYING])
        .values_list("memory_id", "pk"))
    refuted = _refutations(ids, kind)
    corrected = dict(ReviewProposal.objects.filter(
        memory_id__in=ids, audit_run=audit_run, kind=ReviewProposal.Kind.CORRECTION,
        status=ReviewProposal.Status.APPROVED).values_list("memory_id", "pk")) \
        if kind == ReviewProposal.Kind.CORRECTION else {}
    out: dict[int, str] = {}
    for s in suspects:
        if s.memory_id in live:
            out[s.memory_id] = f"already under review (proposal #{live[s.memory_id]})"
        elif s.memory.epistemic_state == EpistemicLabel.Label.LIKELY:
            out[s.memory_id] = "already out of recall (poison_likely)"
        elif s.memory_id in corrected:
            out[s.memory_id] = f"already corrected for this audit (proposal #{corrected[s.memory_id]})"
        elif s.memory_id in refuted:
            r = refuted[s.memory_id]
            who = r.decided_by.get_username() if r.decided_by else "a reviewer"
            if audit_run.finished_at is None or audit_run.finished_at <= r.decided_at:
                out[s.memory_id] = (f"refuted by {who} on {r.decided_at:%Y-%m-%d %H:%M} UTC (proposal #{r.pk}); "
                                    "proposing it again needs an audit finished after the refutation")
            elif not s.ds > 0:
                out[s.memory_id] = (f"refuted by {who} (proposal #{r.pk}); this audit does not rank it "
                                    "(DS 0), so it is no new evidence")
    return out


def classifier_flag_list(*, organization: Organization) -> QuerySet[Memory]:
    """Memories the ingest classifier labelled ``poison_likely`` that no proposal covers yet."""
    return (Memory.objects.filter(organization=organization, epistemic_state=EpistemicLabel.Label.LIKELY)
            .exclude(labels__actor__startswith="user:").exclude(review_proposals__isnull=False)
            .select_related("store").order_by("store__name", "external_id"))


# ----------------------------------------------------------------------------- dashboard


def dashboard_counts(*, organization: Organization) -> dict[str, int]:
    runs = AuditRun.objects.filter(organization=organization).aggregate(
        running=Count("pk", filter=Q(status__in=[AuditRun.Status.PENDING, AuditRun.Status.RUNNING])),
        done=Count("pk", filter=Q(status=AuditRun.Status.DONE)),
        failed=Count("pk", filter=Q(status=AuditRun.Status.FAILED)))
    props = ReviewProposal.objects.filter(organization=organization).aggregate(
        open=Count("pk", filter=Q(status=ReviewProposal.Status.OPEN)),
        applying=Count("pk", filter=Q(status=ReviewProposal.Status.APPLYING)),
        open_classifier=Count("pk", filter=Q(status=ReviewProposal.Status.OPEN,
                                             source=ReviewProposal.Source.CLASSIFIER)))
    mems = Memory.objects.filter(organization=organization).aggregate(
        total=Count("pk"),
        quarantined=Count("pk", filter=quarantined_q(organization=organization)),
        suspect=Count("pk", filter=Q(epistemic_state=EpistemicLabel.Label.SUSPECT)))
    return {
        "stores": Store.objects.filter(organization=organization).count(),
        "memories": mems["total"],
        "memories_quarantined": mems["quarantined"],
        "memories_suspect": mems["suspect"],
        "incidents": Incident.objects.filter(organization=organization).count(),
        "audits_running": runs["running"],
        "audits_done": runs["done"],
        "audits_failed": runs["failed"],
        "proposals_open": props["open"],
        "proposals_applying": props["applying"],
        "proposals_open_classifier": props["open_classifier"],
        "classifier_flags_unreviewed": classifier_flag_list(organization=organization).count(),
    }
