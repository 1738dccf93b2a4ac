"""Export of a finished audit's ranked suspects and the decisions on them (issue 15), as CSV
or JSON. One row per suspect the audit credits (DS > 0), best first.

CSV cells that a spreadsheet would read as a formula (starting with = + - @, or a tab or
carriage return) are prefixed with a single quote (OWASP "CSV injection"); numbers are
written as numbers. Each export is recorded in the organization's activity trail.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from audits import selectors
from audits.models import AuditRun, AuditSuspect, CaseNote, ReviewProposal
from orgs.models import Organization
from orgs.services import activity_record

COLUMNS = ("rank", "memory_id", "memory_pk", "store", "text", "ds", "cmis", "cmis_hat", "cas", "cas_hat",
           "in_batch", "verdict", "state", "proposal_id", "proposal_kind", "corrected_by", "proposal_status",
           "assigned_to", "decision", "decided_by", "decided_at", "decision_reason", "notes")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class ExportNotReady(Exception):
    """The audit has not finished: there is nothing ranked to export yet."""


def csv_cell(value: Any) -> Any:
    """A cell that no spreadsheet evaluates: text starting like a formula gets a quote."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def audit_export_rows(*, organization: Organization, run: AuditRun) -> list[dict[str, Any]]:
    if run.organization_id != organization.pk:
        raise AuditRun.DoesNotExist
    if run.status != AuditRun.Status.DONE:
        raise ExportNotReady(f"Audit #{run.pk} is {run.status}: export it once it has finished.")
    suspects = list(AuditSuspect.objects.filter(run=run, ds__gt=0).select_related("memory", "memory__store")
                    .order_by("rank", "pk"))
    memory_ids = [s.memory_id for s in suspects]
    latest: dict[int, ReviewProposal] = {}
    for p in ReviewProposal.objects.filter(organization=organization, memory_id__in=memory_ids) \
            .select_related("decided_by", "assigned_to", "corrected_by").order_by("created_at", "pk"):
        latest[p.memory_id] = p
    note_count: dict[int, int] = {}
    for memory_id in CaseNote.objects.filter(organization=organization, memory_id__in=memory_ids,
                                             audit_run=run).values_list("memory_id", flat=True):
        note_count[memory_id] = note_count.get(memory_id, 0) + 1
    for memory_id in CaseNote.objects.filter(organization=organization, memory_id__in=memory_ids,
                                             proposal__audit_run=run).values_list("memory_id", flat=True):
        note_count[memory_id] = note_count.get(memory_id, 0) + 1
    # The engine's verdict per batch member (poison-like / honest-error, issue 16); "" outside the batch.
    verdicts = (run.results or {}).get("verdicts") or {}
    rows = []
    for s in suspects:
        p = latest.get(s.memory_id)
        rows.append({
            "rank": s.rank, "memory_id": s.memory.external_id, "memory_pk": s.memory_id,
            "store": s.memory.store.slug, "text": s.memory.text, "ds": round(s.ds, 6), "cmis": round(s.cmis, 6),
            "cmis_hat": round(s.cmis_hat, 6), "cas": round(s.cas, 6), "cas_hat": round(s.cas_hat, 6),
            "in_batch": s.in_batch, "verdict": (verdicts.get(s.memory.external_id) or {}).get("verdict", ""),
            "state": s.memory.epistemic_state or "none",
            "proposal_id": p.pk if p else None, "proposal_kind": p.kind if p else "",
            "corrected_by": p.corrected_by.external_id if p and p.corrected_by_id else "",
            "proposal_status": p.status if p else "",
            "assigned_to": p.assigned_to.get_username() if p and p.assigned_to else "",
            "decision": p.decision if p else "",
            "decided_by": p.decided_by.get_username() if p and p.decided_by else "",
            "decided_at": p.decided_at.isoformat() if p and p.decided_at else "",
            "decision_reason": p.decision_reason if p else "", "notes": note_count.get(s.memory_id, 0),
        })
    return rows


def audit_export(*, organization: Organization, run: AuditRun, fmt: str, user=None,
                 request=None) -> tuple[str, str, str]:
    """(body, content type, file name) of the export in ``fmt`` ("csv" or "json")."""
    if fmt not in ("csv", "json"):
        raise ValueError("format is csv or json")
    rows = audit_export_rows(organization=organization, run=run)
    name = f"memaudit-audit-{run.pk}-suspects.{fmt}"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([csv_cell("" if r[c] is None else r[c]) for c in COLUMNS])
        body, ctype = buf.getvalue(), "text/csv; charset=utf-8"
    else:
        body = json.dumps({"audit_run": run.pk, "store": run.store.slug, "alpha": selectors.run_alpha(run),
                           "finished_at": run.finished_at.isoformat() if run.finished_at else None,
                           "columns": list(COLUMNS), "suspects": rows}, indent=1, ensure_ascii=False)
        ctype = "application/json"
    activity_record(organization=organization, verb="audit.exported", actor=user, request=request,
                    target=f"audit #{run.pk}", detail={"format": fmt, "rows": len(rows)})
    return body, ctype, name
