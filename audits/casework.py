"""Case work (issue 15): notes on a suspect or a proposal, assignment of a proposal to a
reviewer, and the filtered, paged lists of the review queue, audits, suspects and incidents.

Services (``note_add``, ``proposal_assign``) write and record the activity trail; selectors
(``*_filtered``, ``notes_for_*``) read, always scoped to one organization (another tenant's
object is ``DoesNotExist``). Notes are append-only evidence: added, never edited.
"""

from __future__ import annotations

import html
import logging
import re
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.paginator import Page, Paginator
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from audits.models import AuditRun, AuditSuspect, CaseNote, Incident, ReviewProposal
from orgs.models import Membership, Organization
from orgs.notifications import notification_emit, site_url
from orgs.services import activity_record

logger = logging.getLogger(__name__)

NOTE_MAX_CHARS = 10_000
PAGE_SIZE = 25

# ----------------------------------------------------------------------------- markdown

_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s()<>\"']+)\)")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EM = re.compile(r"(?<![\w*])[*_](?=\S)(.+?)(?<=\S)[*_](?![\w*])")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d{1,4}[.)]\s+(.*)$")


def _inline(escaped: str) -> str:
    """Inline markup over text that is ALREADY HTML-escaped: code spans first (their content
    takes no further markup), then http(s) links, strong, emphasis."""
    codes: list[str] = []

    def keep_code(m: re.Match) -> str:
        codes.append(f"<code>{m.group(1)}</code>")
        return f"\x00{len(codes) - 1}\x00"

    out = _INLINE_CODE.sub(keep_code, escaped)
    # The URL is escaped text: & < > " ' are entities already, so it cannot leave the attribute.
    out = _LINK.sub(lambda m: f'<a href="{m.group(2)}" rel="noopener noreferrer nofollow" '
                              f'target="_blank">{m.group(1)}</a>', out)
    out = _STRONG.sub(r"<strong>\1</strong>", out)
    out = _EM.sub(r"<em>\1</em>", out)
    return re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], out)


def markdown_render(text: str) -> SafeString:
    """A small, safe markdown subset: paragraphs, line breaks, *emphasis*, **strong**,
    `code`, fenced code blocks, bullet and numbered lists, and [links](https://...) with
    http(s) URLs only (rel=noopener). Everything is HTML-escaped FIRST; no raw HTML passes."""
    blocks: list[str] = []
    lines = html.escape(text or "", quote=True).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    para: list[str] = []
    items: list[str] = []
    list_tag = ""

    def flush() -> None:
        nonlocal list_tag
        if para:
            blocks.append("<p>" + "<br>".join(_inline(p) for p in para) + "</p>")
            para.clear()
        if items:
            blocks.append(f"<{list_tag}>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + f"</{list_tag}>")
            items.clear()
            list_tag = ""

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("```"):
            flush()
            code: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                code.append(lines[i])
                i += 1
            blocks.append("<pre><code>" + "\n".join(code) + "</code></pre>")
            i += 1
            continue
        bullet, numbered = _BULLET.match(line), _NUMBERED.match(line)
        if bullet or numbered:
            tag = "ul" if bullet else "ol"
            if para or (items and list_tag != tag):
                flush()
            list_tag = tag
            items.append((bullet or numbered).group(1))
        elif not line.strip():
            flush()
        else:
            if items:
                flush()
            para.append(line.strip())
        i += 1
    flush()
    return mark_safe("".join(blocks))  # noqa: S308 - built only from escaped text and our own tags


# ----------------------------------------------------------------------------- notes


def _note_body(body: str) -> str:
    body = (body or "").strip()
    if not body:
        raise ValidationError({"body": "Write the note (markdown: *emphasis*, `code`, lists, links)."})
    if len(body) > NOTE_MAX_CHARS:
        raise ValidationError({"body": f"A note is at most {NOTE_MAX_CHARS:,} characters (this one has "
                                       f"{len(body):,})."})
    if "\x00" in body:
        raise ValidationError({"body": "A note cannot contain NUL characters."})
    return body


def suspect_get(*, organization: Organization, audit_run_id: int, memory_id: int) -> AuditSuspect:
    return AuditSuspect.objects.select_related("run", "memory", "memory__store").get(
        run_id=audit_run_id, run__organization=organization, memory_id=memory_id)


@transaction.atomic
def note_add(*, organization: Organization, user, body: str, proposal_id: int | None = None,
             audit_run_id: int | None = None, memory_id: int | None = None, request=None) -> CaseNote:
    """Append a note to a proposal, or to a suspect (``audit_run_id`` + ``memory_id``).

    Any member of the organization may add one (analysts and reviewers both work the case);
    an object of another organization is ``DoesNotExist``. Recorded in the activity trail."""
    body = _note_body(body)
    if (proposal_id is None) == (audit_run_id is None):
        raise ValidationError("A note is on a proposal or on a suspect of an audit, not both.")
    if proposal_id is not None:
        p = ReviewProposal.objects.get(pk=proposal_id, organization=organization)
        note = CaseNote(organization=organization, memory_id=p.memory_id, proposal=p)
        target = f"proposal #{p.pk}"
    else:
        s = suspect_get(organization=organization, audit_run_id=audit_run_id, memory_id=memory_id)
        note = CaseNote(organization=organization, memory_id=s.memory_id, audit_run_id=s.run_id)
        target = f"audit #{s.run_id} suspect {s.memory.external_id}"
    note.author = user if getattr(user, "is_authenticated", False) else None
    note.author_label = f"user:{user.get_username()}" if note.author else "system"
    note.body = body
    note.save()
    activity_record(organization=organization, verb="note.added", actor=note.author, request=request,
                    target=target, detail={"note": note.pk, "memory": note.memory_id, "chars": len(body)})
    return note


def notes_for_proposal(*, organization: Organization, proposal: ReviewProposal) -> list[CaseNote]:
    """The proposal's own notes and those on the same memory as a suspect of its audit."""
    q = Q(proposal=proposal)
    if proposal.audit_run_id:
        q |= Q(audit_run_id=proposal.audit_run_id, memory_id=proposal.memory_id)
    return list(CaseNote.objects.filter(q, organization=organization).select_related("author"))


def notes_for_suspect(*, organization: Organization, suspect: AuditSuspect) -> list[CaseNote]:
    """The suspect's notes and those on proposals that came from the same audit for it."""
    return list(CaseNote.objects.filter(
        Q(audit_run_id=suspect.run_id) | Q(proposal__audit_run_id=suspect.run_id),
        organization=organization, memory_id=suspect.memory_id).select_related("author"))


def notes_attach(*, organization: Organization, proposals: list[ReviewProposal]) -> None:
    """``p.case_notes`` for each proposal, in two queries whatever the page size."""
    by_prop: dict[int, list[CaseNote]] = {p.pk: [] for p in proposals}
    by_suspect: dict[tuple[int, int], list[CaseNote]] = {}
    if proposals:
        runs = {p.audit_run_id for p in proposals if p.audit_run_id}
        for n in CaseNote.objects.filter(Q(proposal__in=proposals) | Q(audit_run_id__in=runs,
                                                                          memory_id__in={p.memory_id for p in proposals}),
                                         organization=organization).select_related("author"):
            if n.proposal_id:
                by_prop.setdefault(n.proposal_id, []).append(n)
            else:
                by_suspect.setdefault((n.audit_run_id, n.memory_id), []).append(n)
    for p in proposals:
        p.case_notes = sorted(by_prop.get(p.pk, []) + by_suspect.get((p.audit_run_id, p.memory_id), []),
                         key=lambda n: (n.created_at, n.pk))


# ----------------------------------------------------------------------------- assignment


def reviewer_choices(*, organization: Organization) -> list[Membership]:
    """Active members who may decide a proposal (reviewers and org admins)."""
    return [m for m in Membership.objects.filter(organization=organization, is_active=True).select_related("user")
            if m.can_review]


def _notify_assignee(*, proposal: ReviewProposal, assignee, by_label: str) -> None:
    """The organization's webhooks/email for ``proposal.assigned``, and a direct email to the
    assignee when the account has an address; both after the commit, never raising."""
    payload = {"proposal": proposal.pk, "memory": proposal.memory_id, "store": proposal.store_id,
               "assigned_to": f"user:{assignee.get_username()}", "assigned_by": by_label,
               "url": site_url("/review/?assignee=me")}
    notification_emit(organization_id=proposal.organization_id, event="proposal.assigned", payload=payload)
    address = (getattr(assignee, "email", "") or "").strip()
    if not address:
        return

    def mail() -> None:
        try:
            send_mail(subject=f"[MemAudit] Proposal #{proposal.pk} assigned to you",
                      message=f"{by_label} assigned you proposal #{proposal.pk} (memory "
                              f"{proposal.memory.external_id}).\n\nYour queue: {payload['url']}\n",
                      from_email=None, recipient_list=[address])
        except Exception:
            logger.exception("could not email the assignee of proposal %s", proposal.pk)

    transaction.on_commit(mail)


@transaction.atomic
def proposal_assign(*, organization: Organization, proposal_id: int, assignee_id: int | None, user,
                    request=None) -> ReviewProposal:
    """Assign an open proposal to a reviewer of the organization (``assignee_id`` None:
    unassign). The caller must be able to review; the assignee must be an active member who
    can review. Assignment routes work only: it does not let anyone decide who could not."""
    membership = Membership.objects.filter(organization=organization, user=user, is_active=True).first()
    if membership is None or not membership.can_review:
        raise ValidationError("Only reviewers and org admins assign proposals.")
    p = ReviewProposal.objects.select_for_update().select_related("memory").get(pk=proposal_id,
                                                                                 organization=organization)
    if p.status != ReviewProposal.Status.OPEN:
        raise ValidationError(f"Proposal #{p.pk} is {p.status}: only open proposals are assigned.")
    assignee = None
    if assignee_id is not None:
        m = Membership.objects.filter(organization=organization, user_id=assignee_id, is_active=True) \
            .select_related("user").first()
        if m is None:
            raise ValidationError({"assignee": "No active member of this organization has that id."})
        if not m.can_review:
            raise ValidationError({"assignee": f"{m.user.get_username()} is an {m.get_role_display().lower()} "
                                               "and cannot review: assign a reviewer or an org admin."})
        assignee = m.user
    if p.assigned_to_id == (assignee.pk if assignee else None):
        return p
    previous = p.assigned_to_id
    p.assigned_to, p.assigned_by, p.assigned_at = assignee, user if assignee else None, \
        timezone.now() if assignee else None
    p.save(update_fields=["assigned_to", "assigned_by", "assigned_at"])
    by_label = f"user:{user.get_username()}"
    activity_record(organization=organization, verb="proposal.assigned" if assignee else "proposal.unassigned",
                    actor=user, request=request, target=f"proposal #{p.pk}",
                    detail={"assignee": f"user:{assignee.get_username()}" if assignee else None,
                            "previous": previous, "memory": p.memory_id})
    if assignee is not None:
        _notify_assignee(proposal=p, assignee=assignee, by_label=by_label)
    return p


# ----------------------------------------------------------------------------- filtered lists


@dataclass
class Listing:
    """One page of a filtered list, with the query string that keeps the filters on the pager."""

    page: Page
    query: str


def paginate(qs, params, *, per_page: int | None = None) -> Listing:
    """Server-side paging (LIMIT/OFFSET through Django's Paginator); a page number out of
    range or not a number gives the nearest page instead of an error."""
    page = Paginator(qs, per_page or PAGE_SIZE).get_page(params.get("page"))
    query = params.copy()
    query.pop("page", None)
    return Listing(page=page, query=query.urlencode())


def proposals_filtered(*, organization: Organization, user, store=None, audit_run_id: int | None = None,
                       state: str = "open", ds_min: float | None = None, ds_max: float | None = None,
                       assignee: str = "", memory_state: str = "") -> QuerySet[ReviewProposal]:
    """The review queue's proposals: ``state`` open (default) / applying / approved / refuted /
    all; ``assignee`` "me", "none" or a user id; DS range over the scores at proposal time."""
    qs = ReviewProposal.objects.filter(organization=organization).select_related(
        "organization", "memory", "store", "audit_run", "proposed_by", "decided_by", "label", "flag_label",
        "assigned_to")
    if state and state != "all":
        qs = qs.filter(status=state)
    if store is not None:
        qs = qs.filter(store=store)
    if audit_run_id is not None:
        qs = qs.filter(audit_run_id=audit_run_id)
    if ds_min is not None:
        qs = qs.filter(scores__ds__gte=ds_min)
    if ds_max is not None:
        qs = qs.filter(scores__ds__lte=ds_max)
    if assignee == "me":
        qs = qs.filter(assigned_to=user)
    elif assignee == "none":
        qs = qs.filter(assigned_to__isnull=True)
    elif assignee:
        qs = qs.filter(assigned_to_id=int(assignee))
    if memory_state:
        qs = qs.filter(memory__epistemic_state="" if memory_state == "none" else memory_state)
    order = ("created_at", "pk") if state in ("open", "applying") else ("-decided_at", "-created_at", "-pk")
    return qs.order_by(*order)


def audits_filtered(*, organization: Organization, store=None, status: str = "") -> QuerySet[AuditRun]:
    qs = AuditRun.objects.filter(organization=organization).select_related("store", "created_by")
    if store is not None:
        qs = qs.filter(store=store)
    if status:
        qs = qs.filter(status=status)
    return qs.annotate(incident_count=Count("incidents", distinct=True)).order_by("-created_at", "-pk")


def incidents_filtered(*, organization: Organization, store=None, q: str = "") -> QuerySet[Incident]:
    qs = Incident.objects.filter(organization=organization).select_related("store", "created_by")
    if store is not None:
        qs = qs.filter(store=store)
    if q:
        qs = qs.filter(Q(external_id__icontains=q) | Q(query__icontains=q))
    return qs.annotate(audit_count=Count("audit_runs")).order_by("-created_at", "external_id")


def suspects_filtered(*, run: AuditRun, ds_min: float | None = None, ds_max: float | None = None,
                      memory_state: str = "", in_batch: str = "", q: str = "",
                      positive_only: bool = True) -> QuerySet[AuditSuspect]:
    """A finished run's ranked suspects, best first; by default only those the audit credits
    (DS > 0): a zero-score row is ranked, not suspected."""
    qs = AuditSuspect.objects.filter(run=run).select_related("memory")
    if positive_only:
        qs = qs.filter(ds__gt=0)
    if ds_min is not None:
        qs = qs.filter(ds__gte=ds_min)
    if ds_max is not None:
        qs = qs.filter(ds__lte=ds_max)
    if memory_state:
        qs = qs.filter(memory__epistemic_state="" if memory_state == "none" else memory_state)
    if in_batch in ("yes", "no"):
        qs = qs.filter(in_batch=in_batch == "yes")
    if q:
        qs = qs.filter(Q(memory__external_id__icontains=q) | Q(memory__text__icontains=q))
    return qs.order_by("rank", "pk")


def suspect_rows(*, organization: Organization, suspects: list[AuditSuspect]) -> list[dict[str, Any]]:
    """Table rows for a page of suspects: scores, state, the memory's live proposal or latest
    decision, and how many notes it has in this audit."""
    memory_ids = [s.memory_id for s in suspects]
    run_ids = {s.run_id for s in suspects}
    proposals: dict[int, ReviewProposal] = {}
    for p in ReviewProposal.objects.filter(organization=organization, memory_id__in=memory_ids) \
            .select_related("decided_by", "assigned_to").order_by("created_at", "pk"):
        proposals[p.memory_id] = p  # the newest wins
    notes = dict(CaseNote.objects.filter(organization=organization, memory_id__in=memory_ids)
                 .filter(Q(audit_run_id__in=run_ids) | Q(proposal__audit_run_id__in=run_ids))
                 .values("memory_id").annotate(n=Count("pk")).values_list("memory_id", "n"))
    return [{"suspect": s, "memory": s.memory, "proposal": proposals.get(s.memory_id),
             "notes": notes.get(s.memory_id, 0)} for s in suspects]

