"""Pages of the ledger: stores, imports, the memory browser and detail, the ledger and keys.

Views validate input, call one service or selector and render. Signing never happens here:
the web process does not hold the housekeeper role, so anything that signs is queued as a
``ledger.tasks`` task for the housekeeper worker.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from interchange.importers import MEMORIES, formats
from ledger import export, services, store_selectors, tasks, ui_selectors, verification
from ledger.agent_tokens import agent_token_create, agent_token_get_for_org, agent_token_list, agent_token_revoke
from ledger.checkpoints import receipt_check as check_receipt
from ledger.checkpoints import witness_key_add, witness_key_list, witness_key_revoke
from ledger.forms import LedgerFilterForm, MemoryFilterForm, StoreCreateForm, TokenCreateForm, UploadForm
from ledger.imports import memories_import_upload
from ledger.models import ImportJob, KeyEndorsement, LogLeaf, TreeHead, WitnessKey
from ledger.recall import is_quarantined
from ledger.signing import signer_backend_describe
from orgs.forms import add_validation_errors
from orgs.permissions import org_required
from orgs.services import activity_record

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
    }, status=400 if form.errors else 200)


@org_required()
@require_http_methods(["GET", "POST"])
def store_import(request, store_id: int):
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
    in_recall = not is_quarantined(memory)
    series = ui_selectors.weight_series(history=history)
    return render(request, "ledger/memory_detail.html", {
        "memory": memory, "store": memory.store, "history": history, "findings": findings,
        "in_recall": in_recall, "recall": ui_selectors.recall_status(memory=memory, history=history,
                                                                     in_recall=in_recall),
        "series": series, "weights_json": json.dumps({k: series[k] for k in ("t", "w", "seq")}),
        "metadata_json": json.dumps(memory.metadata, indent=2, ensure_ascii=False, sort_keys=True),
    })


# --------------------------------------------------------------------------- ledger


def _ledger_context(org) -> dict:
    return {"tree_heads": ui_selectors.tree_head_list(organization=org),
            "log_size": ui_selectors.log_size(organization=org),
            "activity": ui_selectors.log_activity_recent(organization=org, limit=20),
            "tree_head_interval": settings.TREE_HEAD_INTERVAL_S,
            **ui_selectors.auditor_pins(organization=org)}


VERIFY_RESULT_KEY = "ledger_verify_result"


@org_required()
@require_GET
def ledger_page(request):
    """The ledger page; its log entries are filtered (kind, memory) and paged (issue 15). "Verify
    now" posts, stores its result for this one page view and redirects here (post/redirect/get: a
    reload shows the page again, it does not re-post)."""
    form = LedgerFilterForm(request.GET or None)
    f = form.cleaned_data if form.is_valid() else {}
    qs = ui_selectors.log_leaves_filtered(organization=request.organization, kind=f.get("kind") or "",
                                          memory=f.get("memory") or "")
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    result = request.session.pop(VERIFY_RESULT_KEY, None)
    extra = {"verified": True, "findings": result["findings"], "verified_at": result["at"]} \
        if result and result.get("org") == request.organization.pk else {}
    return render(request, "ledger/ledger.html", {
        **_ledger_context(request.organization), **extra, "filters": form, "page": page,
        "query": query.urlencode(), "activity": ui_selectors.log_leaf_rows(leaves=list(page.object_list)),
    }, status=400 if form.errors else 200)


@org_required()
@require_GET
def ledger_tree_heads(request):
    """Partial: the signed tree heads card (polled by "Issue tree head" until a new one shows)."""
    return render(request, "ledger/_tree_heads.html", _ledger_context(request.organization))


@org_required()
@require_POST
def ledger_verify(request):
    """"Verify now": the portable verifier's checks over the whole organization, live."""
    findings = verification.organization_verify(request.organization)
    request.session[VERIFY_RESULT_KEY] = {"org": request.organization.pk, "at": timezone.now().isoformat(),
                                          "findings": [asdict(f) for f in findings]}
    return redirect("ledger")


def _wants_fragment(request) -> bool:
    return request.headers.get("X-Requested-With") == "fetch"


@org_required()
@require_POST
def tree_head_issue(request):
    """Any member may ask for a tree head now (the schedule signs one anyway when the log grew).
    From the page's script: 202 with the message, shown beside the button while the card is
    polled; without the script: the message and a redirect."""
    if _wants_fragment(request):
        size = LogLeaf.objects.filter(organization=request.organization).count()
        if TreeHead.objects.filter(organization=request.organization, size__gte=size).exists():
            return JsonResponse({"message": f"The newest tree head already covers all {size} leaves of the log: "
                                            "nothing new to sign.", "current": True})
        tasks.tree_head_issue_task.delay(request.organization.pk)
        return JsonResponse({"message": "Tree head requested: the housekeeper signs it in a moment; the list "
                                        "below updates when it does."}, status=202)
    tasks.tree_head_issue_task.delay(request.organization.pk)
    messages.info(request, "Tree head requested: the housekeeper signs it in a moment (refresh to see it).")
    return redirect("ledger")


EXPORT_TREE_HEAD_WAIT_S = 10.0


def _await_covering_tree_head(organization) -> None:
    """Ask the housekeeper for a tree head over the whole log and wait (briefly) for it, so the
    export's every leaf is under a signed tree head; past the wait the export goes out as it is
    and the verifier reports the uncovered leaves."""
    size = LogLeaf.objects.filter(organization=organization).count()
    covered = lambda: TreeHead.objects.filter(organization=organization, size__gte=size).exists()  # noqa: E731
    if size == 0 or covered():
        return
    tasks.tree_head_after_labels_task.delay(organization.pk)  # logs, never raises, when it cannot sign
    deadline = time.monotonic() + EXPORT_TREE_HEAD_WAIT_S
    while not covered() and time.monotonic() < deadline:
        time.sleep(0.2)


@org_required()
@require_GET
def ledger_export(request):
    _await_covering_tree_head(request.organization)
    bundle = export.bundle_build(request.organization)
    activity_record(organization=request.organization, verb="ledger.exported", request=request,
                    target="ledger bundle", detail={"exported_at": bundle.get("exported_at", "")})
    body = json.dumps(bundle, indent=None, separators=(",", ":"), ensure_ascii=False)
    response = HttpResponse(body, content_type="application/json")
    stamp = bundle.get("exported_at", "").replace(":", "").replace("-", "")
    response["Content-Disposition"] = f'attachment; filename="memaudit-{request.organization.slug}-{stamp}.json"'
    return response


@org_required("admin")
@require_GET
def keys_page(request):
    return render(request, "ledger/keys.html", {
        "epochs": ui_selectors.key_epoch_list(organization=request.organization),
        "witnesses": witness_key_list(request.organization),
        **ui_selectors.auditor_pins(organization=request.organization),
        "backend": signer_backend_describe(),
        "refusals": ui_selectors.signing_refusal_list(organization=request.organization),
        "endorsements": ui_selectors.key_endorsement_list(organization=request.organization),
    })


@org_required("admin")
@require_POST
def witness_add(request):
    try:
        w = witness_key_add(organization=request.organization, vkey=request.POST.get("vkey", ""), user=request.user)
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
    else:
        activity_record(organization=request.organization, verb="witness.add", actor=request.user,
                        target=w.name, request=request)
        messages.success(request, f"Witness {w.name} trusted: its cosignatures are now accepted.")
    return redirect("keys")


@org_required("admin")
@require_POST
def witness_revoke(request, witness_id: int):
    try:
        w = witness_key_revoke(organization=request.organization, witness_id=witness_id)
    except WitnessKey.DoesNotExist:
        raise Http404("no such witness") from None
    activity_record(organization=request.organization, verb="witness.revoke", actor=request.user, target=w.name,
                    request=request)
    messages.info(request, f"Witness {w.name} no longer trusted.")
    return redirect("keys")


@org_required()
@require_http_methods(["GET", "POST"])
def receipt_check(request):
    """Paste a recall receipt: the portable receipt check against this organization's anchor,
    newest checkpoint and a consistency proof from the stored log."""
    result = None
    pasted = ""
    if request.method == "POST":
        pasted = request.POST.get("receipt", "")
        result = check_receipt(request.organization, pasted)
    return render(request, "ledger/receipt_check.html", {"pasted": pasted, "result": result,
                                                         **ui_selectors.auditor_pins(
                                                             organization=request.organization)})


@org_required("admin")
@require_POST
def keys_rotate(request):
    tasks.housekeeper_rotate_task.delay(request.organization.pk)
    messages.info(request, "Rotation requested: the housekeeper creates the new epoch, endorsed by the "
                           "current one (refresh to see it).")
    return redirect("keys")


@org_required("admin")
@require_POST
def keys_receipt_revoke(request):
    key_id = (request.POST.get("key_id") or "").strip()
    if not key_id or not KeyEndorsement.objects.filter(organization=request.organization, purpose="receipt",
                                                       key_id=key_id).exists():
        messages.error(request, "No such receipt key in this organization.")
        return redirect("keys")
    tasks.receipt_key_revoke_task.delay(request.organization.pk, key_id)
    activity_record(organization=request.organization, verb="receipt_key.revoke_requested", request=request,
                    target=f"receipt key {key_id}")
    messages.info(request, f"Revocation of receipt key {key_id} requested: receipts it signed from now on are "
                           "refused, and the next recall uses a new, newly endorsed key.")
    return redirect("keys")


@org_required("admin")
def agent_tokens(request: HttpRequest) -> HttpResponse:
    stores = list(store_selectors.store_list(organization=request.organization))
    form = TokenCreateForm(request.POST or None, stores=stores)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        store = store_selectors.store_get(organization=request.organization, store_id=data["store"])
        try:
            token, raw = agent_token_create(store=store, name=data["name"], created_by=request.user,
                                            expires_at=timezone.now() + timedelta(days=data["expires_in_days"]),
                                            request=request)
        except ValidationError as exc:
            add_validation_errors(form, exc)
        else:
            request.session["agent_token_raw"] = {"id": token.pk, "raw": raw}
            messages.success(request, f"Agent token {token.name} created for {store.name}; copy it now, it is "
                                      "shown once.")
            return redirect("agent-tokens")
    new_token = request.session.pop("agent_token_raw", None) if request.method == "GET" else None
    now = timezone.now()
    tokens = [(t, t.state(now)) for t in agent_token_list(organization=request.organization)]
    return render(request, "ledger/agent_tokens.html", {"tokens": tokens, "form": form, "new_token": new_token,
                                                      "stores": stores})


@require_POST
@org_required("admin")
def agent_token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    token = agent_token_get_for_org(organization=request.organization, token_id=token_id)
    if agent_token_revoke(token=token, actor=request.user, request=request):
        messages.success(request, f"Agent token {token.name} revoked: its next request is refused.")
    else:
        messages.info(request, f"Agent token {token.name} was already revoked.")
    return redirect("agent-tokens")
