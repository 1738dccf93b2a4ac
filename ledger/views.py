"""Pages of the ledger: stores, imports, the memory browser and detail, the ledger and keys.

Views validate input, call one service or selector and render. Signing never happens here:
the web process does not hold the housekeeper role, so anything that signs is queued as a
``ledger.tasks`` task for the housekeeper worker.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ledger import export, services, store_selectors, ui_selectors, verification
from ledger.forms import MemoryFilterForm, StoreCreateForm, UploadForm
from ledger.imports import memories_import_upload
from ledger.models import ImportJob
from orgs.permissions import org_required

PAGE_SIZE = 50


@org_required()
@require_http_methods(["GET", "POST"])
def store_list(request):
    form = StoreCreateForm(request.POST or None)
    if request.method == "POST":
        if not request.membership.can_propose:
            raise PermissionDenied(f"Your role ({request.membership.get_role_display()}) cannot create stores.")
        if form.is_valid():
            try:
                store = services.store_create(organization=request.organization, **form.cleaned_data)
            except ValidationError as exc:
                for field, errs in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errs)
            else:
                messages.success(request, f"Store “{store.name}” created. Import its memories next.")
                return redirect("store-import", store_id=store.pk)
    stores = store_selectors.store_list(organization=request.organization)
    return render(request, "ledger/store_list.html", {"stores": stores, "form": form},
                  status=400 if form.is_bound and form.errors else 200)


@org_required()
@require_GET
def store_detail(request, store_id: int):
    """The memory browser: search, filters, pagination."""
    store = store_selectors.store_get(organization=request.organization, store_id=store_id)
    form = MemoryFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    qs = ui_selectors.memory_browse(store=store, q=filters.get("q") or None, state=filters.get("state") or None,
                                    weight_min=filters.get("weight_min"), weight_max=filters.get("weight_max"),
                                    label=filters.get("label") or None)
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "ledger/store_detail.html", {
        "store": store, "form": form, "page": page, "query": query.urlencode(),
        "imports": ui_selectors.import_job_list(store=store, limit=5),
    })


@org_required()
@require_http_methods(["GET", "POST"])
def store_import(request, store_id: int):
    from django.conf import settings

    from interchange.importers import MEMORIES, formats

    store = store_selectors.store_get(organization=request.organization, store_id=store_id)
    form = UploadForm(request.POST or None, request.FILES or None)
    job = None
    if request.method == "POST":
        if not request.membership.can_propose:
            raise PermissionDenied(f"Your role ({request.membership.get_role_display()}) cannot import memories.")
        if form.is_valid():
            job = memories_import_upload(store=store, upload=form.cleaned_data["file"], user=request.user,
                                         fmt=form.cleaned_data.get("format") or None)
            if job.status != ImportJob.Status.FAILED:
                return redirect("import-detail", job_id=job.pk)
    return render(request, "ledger/store_import.html", {
        "store": store, "form": form, "job": job, "issue_total": f"{job.issue_count:,}" if job else "",
        "imports": ui_selectors.import_job_list(store=store),
        "formats": [f.describe() for f in formats(MEMORIES)],
        "max_upload_mb": settings.MAX_UPLOAD_BYTES // (1024 * 1024),
        "inline_mb": round(settings.IMPORT_INLINE_MAX_BYTES / (1024 * 1024), 1),
    }, status=400 if (job is not None or form.errors) else 200)


@org_required()
@require_GET
def import_detail(request, job_id: int):
    job = store_selectors.import_job_get(organization=request.organization, job_id=job_id)
    return render(request, "ledger/import_detail.html", {"job": job, "store": job.store,
                                                         "issue_total": f"{job.issue_count:,}"})


@org_required()
@require_GET
def import_progress(request, job_id: int):
    """The partial the import page polls (``data-poll``)."""
    job = store_selectors.import_job_get(organization=request.organization, job_id=job_id)
    return render(request, "ledger/_import_progress.html", {"job": job})


@org_required()
@require_GET
def memory_detail(request, memory_id: int):
    memory = store_selectors.memory_get(organization=request.organization, memory_id=memory_id)
    history = ui_selectors.memory_history(memory=memory)
    findings = verification.memory_verify(memory, cached=False)
    return render(request, "ledger/memory_detail.html", {
        "memory": memory, "store": memory.store, "history": history, "findings": findings,
        "weights_json": json.dumps(history["weights"]),
        "metadata_json": json.dumps(memory.metadata, indent=2, ensure_ascii=False, sort_keys=True),
    })


# --------------------------------------------------------------------------- ledger


def _ledger_context(org) -> dict:
    return {"tree_heads": ui_selectors.tree_head_list(organization=org),
            "log_size": ui_selectors.log_size(organization=org),
            "activity": ui_selectors.log_activity_recent(organization=org, limit=20)}


@org_required()
@require_GET
def ledger_page(request):
    return render(request, "ledger/ledger.html", _ledger_context(request.organization))


@org_required()
@require_POST
def ledger_verify(request):
    """"Verify now": the portable verifier's checks over the whole organization, live."""
    findings = verification.organization_verify(request.organization)
    return render(request, "ledger/ledger.html", {**_ledger_context(request.organization),
                                                  "verified": True, "findings": findings})


@org_required("admin")
@require_POST
def tree_head_issue(request):
    from ledger.tasks import tree_head_issue_task

    tree_head_issue_task.delay(request.organization.pk)
    messages.info(request, "Tree head requested: the housekeeper signs it in a moment (refresh to see it).")
    return redirect("ledger")


@org_required()
@require_GET
def ledger_export(request):
    bundle = export.bundle_build(request.organization)
    body = json.dumps(bundle, indent=None, separators=(",", ":"), ensure_ascii=False)
    response = HttpResponse(body, content_type="application/json")
    stamp = bundle.get("exported_at", "").replace(":", "").replace("-", "")
    response["Content-Disposition"] = f'attachment; filename="memaudit-{request.organization.slug}-{stamp}.json"'
    return response


@org_required("admin")
@require_GET
def keys_page(request):
    from django.conf import settings

    return render(request, "ledger/keys.html", {
        "epochs": ui_selectors.key_epoch_list(organization=request.organization),
        "key_dir": settings.HOUSEKEEPER_KEY_DIR,
    })


@org_required("admin")
@require_POST
def keys_rotate(request):
    from ledger import tasks

    tasks.housekeeper_rotate_task.delay(request.organization.pk)
    messages.info(request, "Rotation requested: the housekeeper creates the new epoch, endorsed by the "
                           "current one (refresh to see it).")
    return redirect("keys")
