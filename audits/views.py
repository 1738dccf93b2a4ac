"""Pages of the audit: dashboard, incidents, audit runs and their results, the review queue.

Views validate the request, call one service or selector and render; the services enforce
roles again themselves, so the API and commands cannot differ. Another organization's objects
are "not found" (the selectors raise ``DoesNotExist``, answered here as 404).
"""

from __future__ import annotations

import json
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audits import endpoints, selectors, services, ui_selectors
from audits.engine.scenario import ValidationError as FileValidationError
from audits.forms import (
    AgentEndpointForm,
    AuditStartForm,
    BulkDecisionForm,
    DecisionForm,
    IncidentForm,
    IncidentUploadForm,
)
from audits.tasks import incidents_import_staged_task
from interchange.importers import INCIDENTS
from interchange.importers import formats as import_formats
from ledger import store_selectors
from ledger import ui_selectors as ledger_ui
from ledger.imports import import_job_stage, inline_limit
from orgs.permissions import org_required


def _not_found_outside_org(view):
    """Selectors raise ``DoesNotExist`` for another organization's objects: answer 404."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except ObjectDoesNotExist:
            raise Http404("Not found in your organization.") from None

    return wrapper


def _issues(exc: FileValidationError) -> list[dict]:
    """The issues kept (at most MAX_KEPT_ISSUES), sorted by file and line (file-wide ones first);
    the page shows ``exc.total`` beside them."""
    return ui_selectors.issue_rows(exc.issues)


def _upload_limits() -> dict:
    return {"max_upload_mb": settings.MAX_UPLOAD_BYTES // (1024 * 1024),
            "inline_mb": round(settings.IMPORT_INLINE_MAX_BYTES / (1024 * 1024), 1)}


def _errors_into(form, exc: DjangoValidationError) -> None:
    for field, errs in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, errs)


@require_GET
def favicon(request):
    """Browsers ask for /favicon.ico whatever the page links: send them to the static file
    (resolved per request, so the hashed name of the manifest storage is used)."""
    return redirect(static("favicon.ico"), permanent=True)


# ----------------------------------------------------------------------------- dashboard


@org_required()
@require_GET
def dashboard(request):
    ctx = ui_selectors.dashboard(organization=request.organization)
    ctx["stores"] = store_selectors.store_list(organization=request.organization)
    ctx["activity"] = ledger_ui.log_activity_recent(organization=request.organization, limit=8)
    return render(request, "audits/dashboard.html", ctx)


@org_required()
@require_GET
def dashboard_runs(request):
    """Partial: the active runs' progress bars (polled)."""
    runs = ui_selectors.audit_runs_active(organization=request.organization)
    return render(request, "audits/_active_runs.html", {"active_runs": runs, "poll_done": not runs})


# ----------------------------------------------------------------------------- incidents


@org_required()
@require_http_methods(["GET", "POST"])
def incident_list(request):
    org = request.organization
    store_id = request.GET.get("store")
    store = store_selectors.store_get(organization=org, store_id=int(store_id)) if (store_id or "").isdigit() else None
    initial = {"store": store} if store else None
    upload = IncidentUploadForm(request.POST or None, request.FILES or None, organization=org, initial=initial)
    single = IncidentForm(organization=org, initial=initial)
    errors, issue_count = None, 0
    if request.method == "POST":
        if not request.membership.can_propose:
            raise PermissionDenied(f"Your role ({request.membership.get_role_display()}) cannot upload incidents.")
        if upload.is_valid():
            f = upload.cleaned_data["file"]
            if f.size > inline_limit():  # parsed by a worker; the import page shows its progress
                job = import_job_stage(store=upload.cleaned_data["store"], chunks=f.chunks(), filename=f.name,
                                       kind="incidents", user=request.user,
                                       enqueue=incidents_import_staged_task.delay)
                return redirect("import-detail", job_id=job.pk)
            try:
                created = services.incidents_import(store=upload.cleaned_data["store"], data=f.read(),
                                                    filename=f.name, user=request.user)
            except FileValidationError as exc:
                errors, issue_count = _issues(exc), exc.total
            else:
                messages.success(request, f"{len(created)} incident{'s' if len(created) != 1 else ''} imported "
                                          f"into {upload.cleaned_data['store'].name}.")
                return redirect(f"{reverse('incident-list')}?store={upload.cleaned_data['store'].pk}")
    incidents = selectors.incident_list(organization=org, store=store)
    return render(request, "audits/incident_list.html", {
        "incidents": incidents[:500], "store": store, "upload": upload, "single": single, "errors": errors,
        "issue_count": issue_count, "issue_total": f"{issue_count:,}",
        "incident_formats": [f.describe() for f in import_formats(INCIDENTS)],
        "stores": store_selectors.store_list(organization=org), **_upload_limits(),
    }, status=400 if (errors or upload.errors) else 200)


@org_required("propose")
@require_http_methods(["GET", "POST"])
def incident_create(request):
    org = request.organization
    if request.method == "GET":  # the form lives on the incidents page (a bookmark or a reload lands here)
        return redirect(f"{reverse('incident-list')}#single-incident")
    form = IncidentForm(request.POST, organization=org)
    errors = None
    if form.is_valid():
        d = form.cleaned_data
        try:
            incident = services.incident_create(store=d["store"], query=d["query"], output=d["output"],
                                                retrieved=d["retrieved"], harm=form.harm(),
                                                external_id=d["external_id"] or None, user=request.user)
        except FileValidationError as exc:
            errors = _issues(exc)
            for issue in exc.issues:
                field = {"id": "external_id"}.get(issue.field or "", issue.field or "")
                form.add_error(field if field in form.fields else None, issue.message)
        else:
            messages.success(request, f"Incident {incident.external_id} recorded.")
            return redirect("incident-detail", incident_id=incident.pk)
    return render(request, "audits/incident_list.html", {
        "incidents": selectors.incident_list(organization=org)[:500], "store": None, "single": form,
        "upload": IncidentUploadForm(organization=org), "errors": errors, "single_open": True,
        "stores": store_selectors.store_list(organization=org), **_upload_limits(),
        "incident_formats": [f.describe() for f in import_formats(INCIDENTS)],
    }, status=400)


@org_required()
@require_GET
@_not_found_outside_org
def incident_detail(request, incident_id: int):
    incident = selectors.incident_get(organization=request.organization, incident_id=incident_id)
    return render(request, "audits/incident_detail.html", {
        "incident": incident, "retrieved": selectors.incident_retrieved_memories(incident=incident),
        "harm_json": json.dumps(incident.harm) if incident.harm else "",
        "runs": incident.audit_runs.order_by("-created_at")[:10],
    })


# ----------------------------------------------------------------------------- audit runs


@org_required()
@require_GET
def audit_list(request):
    runs = selectors.audit_run_list(organization=request.organization, status=request.GET.get("status") or None)
    return render(request, "audits/audit_list.html", {"runs": runs[:200],
                                                      "stores": store_selectors.store_list(
                                                          organization=request.organization)})


@org_required("propose")
@require_http_methods(["GET", "POST"])
def audit_new(request):
    org = request.organization
    stores = store_selectors.store_list(organization=org)
    store_id = request.POST.get("store") or request.GET.get("store")
    if (store_id or "").isdigit():
        store = store_selectors.store_get(organization=org, store_id=int(store_id))
    else:
        store = stores.first()
    incidents = selectors.incident_list(organization=org, store=store) if store else selectors.incident_list(
        organization=org).none()
    wanted = [int(i) for i in request.GET.getlist("incidents") if i.isdigit()]
    initial = {"incidents": [i for i in incidents if i.pk in wanted] if wanted else list(incidents)}
    form = AuditStartForm(request.POST or None, incidents=incidents, initial=initial,
                          endpoints=endpoints.agent_endpoint_list(organization=org))
    if request.method == "POST" and store is not None and form.is_valid():
        try:
            run = services.audit_run_create(store=store, incident_ids=[i.pk for i in form.cleaned_data["incidents"]],
                                            settings=form.audit_settings(), user=request.user)
        except DjangoValidationError as exc:
            _errors_into(form, exc)
        else:
            messages.success(request, f"Audit #{run.pk} started on {store.name}.")
            return redirect("audit-detail", audit_run_id=run.pk)
    return render(request, "audits/audit_new.html", {"form": form, "store": store, "stores": stores},
                  status=400 if form.is_bound and form.errors else 200)


@org_required()
@require_GET
@_not_found_outside_org
def audit_detail(request, audit_run_id: int):
    run = selectors.audit_run_get(organization=request.organization, audit_run_id=audit_run_id)
    if run.status != run.Status.DONE:
        progress = selectors.audit_run_progress(organization=request.organization, audit_run_id=run.pk)
        return render(request, "audits/audit_detail.html", {"run": run, "progress": progress})
    results = ui_selectors.audit_results(organization=request.organization, audit_run_id=run.pk)
    return render(request, "audits/audit_detail.html", {
        "run": run, "r": results, "graph_data": {**results["graph_views"],
                                                 "memory_url": reverse("memory-detail", args=[0])},
    })


@org_required()
@require_GET
@_not_found_outside_org
def audit_progress(request, audit_run_id: int):
    """Partial: the live progress bar (polled until the run finishes)."""
    progress = selectors.audit_run_progress(organization=request.organization, audit_run_id=audit_run_id)
    return render(request, "audits/_progress.html", {"progress": progress})


@org_required("propose")
@require_POST
@_not_found_outside_org
def audit_propose(request, audit_run_id: int):
    run = selectors.audit_run_get(organization=request.organization, audit_run_id=audit_run_id)
    chosen = [int(m) for m in request.POST.getlist("memory") if m.isdigit()]
    try:
        created = services.proposals_create_from_run(audit_run=run, user=request.user,
                                                     memory_ids=chosen or None)
    except DjangoValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
        return redirect("audit-detail", audit_run_id=run.pk)
    if created:
        messages.success(request, f"{len(created)} suspect{'s' if len(created) != 1 else ''} proposed for review; "
                                  "each is now signed poison_suspect and awaits a reviewer.")
    elif not created.skipped:
        messages.info(request, "Nothing new to propose: the batch is already under review or labelled.")
    if created.skipped:
        names = dict(run.suspects.filter(memory_id__in=list(created.skipped)).values_list("memory_id",
                                                                                        "memory__external_id"))
        for memory_id, why in sorted(created.skipped.items(), key=lambda kv: names.get(kv[0], ""))[:20]:
            messages.warning(request, f"{names.get(memory_id, memory_id)} not proposed: {why}.")
        if len(created.skipped) > 20:
            messages.warning(request, f"… and {len(created.skipped) - 20} more not proposed (see the table).")
    return redirect("audit-detail", audit_run_id=run.pk)


@org_required("propose")
@require_POST
@_not_found_outside_org
def audit_resume(request, audit_run_id: int):
    run = selectors.audit_run_get(organization=request.organization, audit_run_id=audit_run_id)
    services.audit_run_resume(audit_run_id=run.pk, user=request.user)
    messages.info(request, f"Audit #{run.pk} resumed from its recorded replays.")
    return redirect("audit-detail", audit_run_id=run.pk)


# ----------------------------------------------------------------------------- review


@org_required()
@require_GET
def review_queue(request):
    # A GET only reads: the housekeeper's signed decisions are recorded by the sync linked to each
    # label task, and the classifier's flags join the queue by ``review_queue_sync_task`` (beat).
    org = request.organization
    ctx = ui_selectors.review_queue(organization=org, user=request.user)
    ctx["bulk"] = BulkDecisionForm()
    return render(request, "audits/review_queue.html", ctx)


@org_required()
@require_GET
def review_pending(request):
    """Partial: decisions waiting for the housekeeper (polled until none are left; read only)."""
    pending = ui_selectors.pending_decisions(organization=request.organization)
    return render(request, "audits/_pending.html", {"applying": pending})


@org_required("review")
@require_POST
@_not_found_outside_org
def review_decide(request, proposal_id: int):
    form = DecisionForm(request.POST)
    if not form.is_valid():
        for errs in form.errors.values():
            messages.error(request, f"Proposal #{proposal_id}: {'; '.join(errs)}")
        return redirect("review-queue")
    decide = services.proposal_approve if form.cleaned_data["decision"] == "approve" else services.proposal_refute
    try:
        p = decide(organization=request.organization, proposal_id=proposal_id, user=request.user,
                   reason=form.cleaned_data["reason"])
    except DjangoValidationError as exc:
        messages.error(request, f"Proposal #{proposal_id}: {'; '.join(exc.messages)}")
        return redirect("review-queue")
    verb = "approved" if form.cleaned_data["decision"] == "approve" else "refuted"
    if p.label_id:
        messages.success(request, f"{p.memory.external_id} {verb}: signed {p.label.label} appended "
                                  f"(label #{p.label.seq}).")
    else:
        messages.info(request, f"{p.memory.external_id} {verb}; waiting for the housekeeper to sign the label.")
    return redirect("review-queue")


@org_required("review")
@require_POST
def review_bulk(request):
    form = BulkDecisionForm(request.POST)
    if not form.is_valid():
        for errs in form.errors.values():
            messages.error(request, "; ".join(errs))
        return redirect("review-queue")
    bulk = services.proposals_approve_bulk if form.cleaned_data["decision"] == "approve" else \
        services.proposals_refute_bulk
    result = bulk(organization=request.organization, proposal_ids=form.cleaned_data["proposals"],
                  user=request.user, reason=form.cleaned_data["reason"])
    verb = "approved" if form.cleaned_data["decision"] == "approve" else "refuted"
    if result["decided"]:
        messages.success(request, f"{len(result['decided'])} proposal{'s' if len(result['decided']) != 1 else ''} "
                                  f"{verb}.")
    for s in result["skipped"]:
        messages.error(request, f"Proposal #{s['id']} skipped: {s['error']}")
    return redirect("review-queue")


# ----------------------------------------------------------------------------- agent endpoints


def _endpoint_fields(form) -> dict:
    d = form.cleaned_data
    return {"name": d["name"], "connector": d["connector"], "base_url": d["base_url"], "model": d.get("model") or "",
            "options": d.get("options") or {}, "secret": d.get("secret") or None}


@org_required()
@require_http_methods(["GET", "POST"])
def agent_endpoint_list(request):
    """Every member sees the names analysts pick from; only org admins register (POST)."""
    org = request.organization
    is_admin = request.membership.is_admin
    if request.method == "POST" and not is_admin:
        raise PermissionDenied(f"Your role ({request.membership.get_role_display()}) cannot do this.")
    form = AgentEndpointForm(request.POST or None) if is_admin else None
    if form is not None and request.method == "POST" and form.is_valid():
        try:
            ep = endpoints.agent_endpoint_create(organization=org, user=request.user, request=request,
                                                 **_endpoint_fields(form))
        except DjangoValidationError as exc:
            _errors_into(form, exc)
        else:
            messages.success(request, f"Agent endpoint {ep.name} registered.")
            return redirect("agent-endpoint-list")
    return render(request, "audits/agent_endpoints.html", {
        "endpoints": endpoints.agent_endpoint_list(organization=org), "form": form, "is_admin": is_admin,
    }, status=400 if form is not None and form.is_bound and form.errors else 200)


@org_required("admin")
@require_http_methods(["GET", "POST"])
@_not_found_outside_org
def agent_endpoint_edit(request, endpoint_id: int):
    ep = endpoints.agent_endpoint_get(organization=request.organization, endpoint_id=endpoint_id)
    initial = {"name": ep.name, "connector": ep.connector, "base_url": ep.base_url, "model": ep.model,
               "options": ep.options}
    form = AgentEndpointForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            endpoints.agent_endpoint_update(endpoint=ep, user=request.user, request=request,
                                            clear_secret=form.cleaned_data.get("clear_secret", False),
                                            **_endpoint_fields(form))
        except DjangoValidationError as exc:
            _errors_into(form, exc)
        else:
            messages.success(request, f"Agent endpoint {ep.name} saved.")
            return redirect("agent-endpoint-list")
    return render(request, "audits/agent_endpoint_edit.html", {"endpoint": ep, "form": form},
                  status=400 if form.is_bound and form.errors else 200)


@org_required("admin")
@require_POST
@_not_found_outside_org
def agent_endpoint_delete(request, endpoint_id: int):
    ep = endpoints.agent_endpoint_get(organization=request.organization, endpoint_id=endpoint_id)
    name = ep.name
    endpoints.agent_endpoint_delete(endpoint=ep, user=request.user, request=request)
    messages.success(request, f"Agent endpoint {name} deleted.")
    return redirect("agent-endpoint-list")
