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
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audits import casework, endpoints, exports, selectors, services, ui_selectors
from audits.casework_forms import (
    AssignForm,
    AuditFilterForm,
    IncidentFilterForm,
    NoteForm,
    QueueFilterForm,
    SuspectFilterForm,
)
from audits.engine.scenario import ValidationError as FileValidationError
from audits.forms import (
    AgentEndpointForm,
    AuditStartForm,
    BulkDecisionForm,
    DecisionForm,
    IncidentForm,
    IncidentUploadForm,
)
from audits.services.review import corrections_create_from_run
from audits.tasks import incidents_import_staged_task
from interchange.importers import INCIDENTS
from interchange.importers import formats as import_formats
from interchange.issues import issues_as_dicts
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
    return issues_as_dicts(exc.issues)


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
    # The list's filters (store, search) are validated by a form: a bad value is a message, not a 500.
    filters = IncidentFilterForm(request.GET or None, stores=store_selectors.store_list(organization=org))
    wanted = filters.cleaned_data if filters.is_valid() else {}
    store = _filter_store(org, wanted.get("store"))
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
    listing = casework.paginate(casework.incidents_filtered(organization=org, store=store, q=wanted.get("q") or ""),
                                request.GET)
    return render(request, "audits/incident_list.html", {
        "incidents": listing.page.object_list, "page": listing.page, "query": listing.query, "filters": filters,
        "store": store, "upload": upload, "single": single, "errors": errors,
        "issue_count": issue_count, "issue_total": f"{issue_count:,}",
        "incident_formats": [f.describe() for f in import_formats(INCIDENTS)],
        "stores": store_selectors.store_list(organization=org), **_upload_limits(),
    }, status=400 if (errors or upload.errors or filters.errors) else 200)


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
    org = request.organization
    stores = store_selectors.store_list(organization=org)
    form = AuditFilterForm(request.GET or None, stores=stores)
    f = form.cleaned_data if form.is_valid() else {}
    store = _filter_store(org, f.get("store"))
    listing = casework.paginate(casework.audits_filtered(organization=org, store=store, status=f.get("status") or ""),
                                request.GET)
    return render(request, "audits/audit_list.html", {"runs": listing.page.object_list, "page": listing.page,
                                                      "query": listing.query, "filters": form, "stores": stores},
                  status=400 if form.errors else 200)


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
    _skipped_messages(request, run, created.skipped, "not proposed")
    return redirect("audit-detail", audit_run_id=run.pk)


def _skipped_messages(request, run, skipped: dict, what: str, shown: int = 20) -> None:
    """One warning per memory a proposal left out (by name, with why), the first ``shown`` of them."""
    if not skipped:
        return
    names = dict(run.suspects.filter(memory_id__in=list(skipped)).values_list("memory_id", "memory__external_id"))
    for memory_id, why in sorted(skipped.items(), key=lambda kv: names.get(kv[0], ""))[:shown]:
        messages.warning(request, f"{names.get(memory_id, memory_id)} {what}: {why}.")
    if len(skipped) > shown:
        messages.warning(request, f"… and {len(skipped) - shown} more {what} (see the table).")


@org_required("propose")
@require_POST
@_not_found_outside_org
def audit_propose_corrections(request, audit_run_id: int):
    """Propose the run's honest errors (all, or the ``memory`` posted) as corrections (issue 16)."""
    run = selectors.audit_run_get(organization=request.organization, audit_run_id=audit_run_id)
    chosen = [int(m) for m in request.POST.getlist("memory") if m.isdigit()]
    try:
        created = corrections_create_from_run(audit_run=run, user=request.user, memory_ids=chosen or None)
    except DjangoValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
        return redirect("audit-detail", audit_run_id=run.pk)
    if created:
        messages.success(request, f"{len(created)} correction{'s' if len(created) != 1 else ''} proposed for review; "
                                  "on approval the housekeeper signs a down-weight for each.")
    elif not created.skipped:
        messages.info(request, "Nothing to propose: this audit found no honest errors.")
    _skipped_messages(request, run, created.skipped, "not proposed as a correction")
    return redirect(f"{reverse('audit-detail', args=[run.pk])}#verdicts")


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
    listing, form = _queue_listing(request)
    ctx = ui_selectors.review_queue(organization=org, user=request.user, items=list(listing.page.object_list))
    casework.notes_attach(organization=org, proposals=ctx["open"])
    ctx.update({"bulk": BulkDecisionForm(), "filters": form, "page": listing.page, "query": listing.query,
                "state": form.cleaned_data.get("state") or "open" if form.is_valid() else "open",
                "reviewers": form.reviewers, "note_form": NoteForm()})
    return render(request, "audits/review_queue.html", ctx, status=400 if form.errors else 200)


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
    if p.is_correction:
        if p.status == "refuted":
            messages.success(request, f"Correction of {p.memory.external_id} rejected; nothing signed, its weight stays.")
        elif p.transition_id:
            messages.success(request, f"Correction of {p.memory.external_id} approved: signed down-weight appended "
                                      f"(weight {p.transition.prev_weight_q / 1000:.3f} → "
                                      f"{p.transition.new_weight_q / 1000:.3f}).")
        else:
            messages.info(request, f"Correction of {p.memory.external_id} approved; waiting for the housekeeper to "
                                   "sign the down-weight.")
        return redirect("review-queue")
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


# ----------------------------------------------------------------------------- case work (issue 15)
# Notes, assignment, the filtered lists and the exports; the logic is in audits.casework and
# audits.exports, these views validate, call one of them and render or redirect.


def _filter_store(org, store_id: int | None):
    """The filter's store (the form offered only this organization's stores)."""
    return store_selectors.store_get(organization=org, store_id=store_id) if store_id else None


def _queue_listing(request):
    org = request.organization
    reviewers = casework.reviewer_choices(organization=org)
    form = QueueFilterForm(request.GET or None, stores=store_selectors.store_list(organization=org),
                           reviewers=reviewers)
    form.reviewers = reviewers
    f = form.cleaned_data if form.is_valid() else {}
    qs = casework.proposals_filtered(
        organization=org, user=request.user, store=_filter_store(org, f.get("store")), audit_run_id=f.get("audit"),
        state=f.get("state") or "open", ds_min=f.get("ds_min"), ds_max=f.get("ds_max"),
        assignee=f.get("assignee") or "", memory_state=f.get("memory_state") or "")
    return casework.paginate(qs, request.GET), form


def _back_to_queue(request, proposal_id: int):
    """Back where the reviewer was (the filtered page they posted from), at the proposal."""
    nxt = request.POST.get("next") or ""
    if not nxt.startswith("/review/") or "//" in nxt or "\\" in nxt:
        nxt = reverse("review-queue")
    return redirect(f"{nxt.split('#')[0]}#proposal-{proposal_id}")


@org_required()
@require_POST
@_not_found_outside_org
def proposal_note_add(request, proposal_id: int):
    form = NoteForm(request.POST)
    if not form.is_valid():
        for errs in form.errors.values():
            messages.error(request, f"Note on proposal #{proposal_id}: {'; '.join(errs)}")
        return _back_to_queue(request, proposal_id)
    try:
        casework.note_add(organization=request.organization, user=request.user, body=form.cleaned_data["body"],
                          proposal_id=proposal_id, request=request)
    except DjangoValidationError as exc:
        messages.error(request, f"Note on proposal #{proposal_id}: {'; '.join(exc.messages)}")
    else:
        messages.success(request, f"Note added to proposal #{proposal_id}.")
    return _back_to_queue(request, proposal_id)


@org_required("review")
@require_POST
@_not_found_outside_org
def proposal_assign(request, proposal_id: int):
    form = AssignForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Proposal #{proposal_id}: {'; '.join(form.errors['assignee'])}")
        return _back_to_queue(request, proposal_id)
    v = form.cleaned_data["assignee"]
    assignee_id = request.user.pk if v == "me" else int(v) if v else None
    try:
        p = casework.proposal_assign(organization=request.organization, proposal_id=proposal_id,
                                     assignee_id=assignee_id, user=request.user, request=request)
    except DjangoValidationError as exc:
        messages.error(request, f"Proposal #{proposal_id}: {'; '.join(exc.messages)}")
    else:
        who = p.assigned_to.get_username() if p.assigned_to else None
        messages.success(request, f"Proposal #{p.pk} assigned to {who}." if who else f"Proposal #{p.pk} unassigned.")
    return _back_to_queue(request, proposal_id)


@org_required()
@require_GET
@_not_found_outside_org
def audit_suspects(request, audit_run_id: int):
    """The audit's ranked suspects as a filtered, paged table, with notes and the exports."""
    org = request.organization
    run = selectors.audit_run_get(organization=org, audit_run_id=audit_run_id)
    form = SuspectFilterForm(request.GET or None)
    f = form.cleaned_data if form.is_valid() else {}
    listing = casework.paginate(casework.suspects_filtered(
        run=run, ds_min=f.get("ds_min"), ds_max=f.get("ds_max"), memory_state=f.get("memory_state") or "",
        in_batch=f.get("in_batch") or "", q=f.get("q") or ""), request.GET, per_page=50)
    return render(request, "audits/audit_suspects.html", {
        "run": run, "filters": form, "page": listing.page, "query": listing.query,
        "rows": casework.suspect_rows(organization=org, suspects=list(listing.page.object_list)),
    }, status=400 if form.errors else 200)


@org_required()
@require_http_methods(["GET", "POST"])
@_not_found_outside_org
def suspect_notes(request, audit_run_id: int, memory_id: int):
    """One suspect of an audit: its scores and notes, and a form to add one (POST/redirect/GET)."""
    org = request.organization
    suspect = casework.suspect_get(organization=org, audit_run_id=audit_run_id, memory_id=memory_id)
    form = NoteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            casework.note_add(organization=org, user=request.user, body=form.cleaned_data["body"],
                              audit_run_id=audit_run_id, memory_id=memory_id, request=request)
        except DjangoValidationError as exc:
            _errors_into(form, exc)
        else:
            messages.success(request, f"Note added to {suspect.memory.external_id}.")
            return redirect("suspect-notes", audit_run_id=audit_run_id, memory_id=memory_id)
    return render(request, "audits/suspect_notes.html", {
        "run": suspect.run, "suspect": suspect, "form": form,
        "notes": casework.notes_for_suspect(organization=org, suspect=suspect),
    }, status=400 if form.is_bound and form.errors else 200)


@org_required()
@require_GET
@_not_found_outside_org
def audit_export(request, audit_run_id: int, fmt: str):
    run = selectors.audit_run_get(organization=request.organization, audit_run_id=audit_run_id)
    try:
        body, ctype, name = exports.audit_export(organization=request.organization, run=run, fmt=fmt,
                                                 user=request.user, request=request)
    except exports.ExportNotReady as exc:
        messages.error(request, str(exc))
        return redirect("audit-detail", audit_run_id=run.pk)
    resp = HttpResponse(body, content_type=ctype)
    resp["Content-Disposition"] = f'attachment; filename="{name}"'
    return resp
