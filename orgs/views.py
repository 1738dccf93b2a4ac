from __future__ import annotations

from datetime import datetime, time, timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from orgs import health, ratelimit
from orgs.forms import (
    EmailNotificationsForm,
    InviteForm,
    InviteSignupForm,
    LoginForm,
    ReviewPolicyForm,
    RoleForm,
    WebhookForm,
    add_validation_errors,
)
from orgs.models import Invitation, Membership, WebhookDelivery, WebhookEndpoint
from orgs.notifications import (
    notification_settings_get,
    notification_settings_update,
    webhook_create,
    webhook_delete,
)
from orgs.permissions import org_required
from orgs.selectors import (
    SESSION_ORG_KEY,
    activity_list,
    invitation_list,
    membership_for_request,
    membership_list,
    organization_list_for_user,
)
from orgs.services import (
    activity_record,
    invitation_accept,
    invitation_accept_new_user,
    invitation_create,
    invitation_for_token,
    invitation_revoke,
    invitation_send,
    member_remove,
    member_set_active,
    member_set_role,
    organization_review_policy_set,
)

ACTIVITY_PAGE_SIZE = 50


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    authentication_form = LoginForm
    redirect_authenticated_user = True

    def form_valid(self, form):
        response = super().form_valid(form)
        # Someone in several organizations is told where they are working (never moved silently).
        user = form.get_user()
        count = organization_list_for_user(user=user).count()
        if count > 1:
            membership = membership_for_request(user=user, session=self.request.session)
            if membership is not None:
                messages.info(self.request, f"You are working in {membership.organization.name}. You belong to "
                                            f"{count} organizations: switch with the menu at the top.")
        return response


def _record_for_user_orgs(request: HttpRequest, verb: str) -> None:
    for membership in Membership.objects.select_related("organization").filter(user=request.user, is_active=True):
        activity_record(organization=membership.organization, verb=verb, actor=request.user, request=request,
                        target=f"user:{request.user.get_username()}")


class PasswordChangeView(auth_views.PasswordChangeView):
    template_name = "registration/password_change_form.html"

    def form_valid(self, form):
        response = super().form_valid(form)
        _record_for_user_orgs(self.request, "user.password_changed")
        messages.success(self.request, "Your password was changed. Other sessions of this account are logged out.")
        return response


class PasswordResetView(auth_views.PasswordResetView):
    """Mails a reset link when the address belongs to an account; the page says the same either way."""

    template_name = "registration/password_reset_form.html"
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"

    def form_valid(self, form):
        address = ratelimit.client_address(self.request)
        if ratelimit.request_blocked("password-reset", address, settings.PASSWORD_RESET_MAX_PER_HOUR, 3600):
            form.add_error(None, "Too many reset requests from your address. Try again in an hour.")
            return self.form_invalid(form)
        return super().form_valid(form)


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    template_name = "registration/password_reset_confirm.html"

    def form_valid(self, form):
        response = super().form_valid(form)
        user = form.user
        for membership in Membership.objects.select_related("organization").filter(user=user, is_active=True):
            activity_record(organization=membership.organization, verb="user.password_reset", actor=user,
                            request=self.request, target=f"user:{user.get_username()}")
        return response


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    # Most often an expired session or a page left open across a restart: say so plainly.
    return render(request, "403_csrf.html", status=403)


def status(request: HttpRequest) -> HttpResponse:
    """Liveness for everyone (healthy or not, per component); the details (database name or path,
    broker address, workers) only for a logged-in user."""
    checks = health.health_checks()
    code = 200 if all(c.ok for c in checks[:2]) else 503
    detailed = request.user.is_authenticated
    if request.headers.get("Accept", "").startswith("application/json"):
        body = {c.name.lower(): ({"ok": c.ok, "detail": c.detail} if detailed else {"ok": c.ok}) for c in checks}
        return JsonResponse(body, status=code)
    return render(request, "orgs/status.html", {"checks": checks, "detailed": detailed}, status=code)


# --------------------------------------------------------------------------- members and invitations


@org_required("admin")
def members(request: HttpRequest) -> HttpResponse:
    invite_form = InviteForm(request.POST or None)
    if request.method == "POST" and invite_form.is_valid():
        try:
            invitation, token = invitation_create(organization=request.organization, invited_by=request.user,
                                                  request=request, **invite_form.cleaned_data)
        except ValidationError as exc:
            add_validation_errors(invite_form, exc)
        else:
            link = request.build_absolute_uri(reverse("invitation-accept", args=[token]))
            mailed = invitation_send(invitation=invitation, link=link)
            # The link goes to the admin once (in the session, shown on the next page) so it can be
            # handed over; it carries no password, and it works once.
            request.session["invitation_link"] = {"id": invitation.pk, "link": link, "mailed": mailed}
            messages.success(request, f"Invitation for {invitation.invitee} created "
                                      f"({'emailed and ' if mailed else ''}shown below once).")
            return redirect("members")
    new_link = request.session.pop("invitation_link", None) if request.method == "GET" else None
    now = timezone.now()
    invitations = [i for i in invitation_list(organization=request.organization)[:50]]
    context = {
        "memberships": membership_list(organization=request.organization),
        "invitations": [(i, i.state(now)) for i in invitations],
        "invite_form": invite_form,
        "role_form": RoleForm(),
        "new_link": new_link,
    }
    return render(request, "orgs/members.html", context)


def _membership_action(request: HttpRequest, action) -> HttpResponse:
    try:
        action()
    except Membership.DoesNotExist:
        raise Http404("No such member in your organization.") from None
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("members")


@require_POST
@org_required("admin")
def member_role(request: HttpRequest, membership_id: int) -> HttpResponse:
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a valid role.")
        return redirect("members")

    def change():
        membership = member_set_role(organization=request.organization, membership_id=membership_id,
                                     role=form.cleaned_data["role"], actor=request.user, request=request)
        messages.success(request, f"{membership.user.username} is now {membership.get_role_display()}.")

    return _membership_action(request, change)


@require_POST
@org_required("admin")
def member_active(request: HttpRequest, membership_id: int) -> HttpResponse:
    active = request.POST.get("active") == "1"

    def change():
        membership = member_set_active(organization=request.organization, membership_id=membership_id,
                                       active=active, actor=request.user, request=request)
        messages.success(request, f"{membership.user.username} is {'active' if active else 'deactivated'}.")

    return _membership_action(request, change)


@require_POST
@org_required("admin")
def member_remove_view(request: HttpRequest, membership_id: int) -> HttpResponse:
    def remove():
        username = member_remove(organization=request.organization, membership_id=membership_id,
                                 actor=request.user, request=request)
        messages.success(request, f"{username} was removed from {request.organization.name}.")

    return _membership_action(request, remove)


@require_POST
@org_required("admin")
def invitation_revoke_view(request: HttpRequest, invitation_id: int) -> HttpResponse:
    try:
        invitation = invitation_revoke(organization=request.organization, invitation_id=invitation_id,
                                       actor=request.user, request=request)
    except Invitation.DoesNotExist:
        raise Http404("No such invitation in your organization.") from None
    messages.success(request, f"Invitation for {invitation.invitee} withdrawn.")
    return redirect("members")


def invitation_accept_view(request: HttpRequest, token: str) -> HttpResponse:
    """The invitee's page. Logged in: accept or decline. Not logged in: log in to accept with an
    existing account, or create an account with a password of one's own."""
    try:
        invitation = invitation_for_token(token=token)
    except ValidationError as exc:
        return render(request, "orgs/invitation.html", {"error": " ".join(exc.messages)}, status=410)
    def signup_form(data=None) -> InviteSignupForm:
        form = InviteSignupForm(data, initial={"username": invitation.username, "email": invitation.email})
        # An invitation made out to a username fixes it (a disabled field keeps its initial value).
        form.fields["username"].disabled = bool(invitation.username)
        return form

    signup = signup_form()
    error = None
    if request.method == "POST":
        try:
            if request.user.is_authenticated:
                if request.POST.get("decision") != "accept":
                    messages.info(request, f"You did not join {invitation.organization.name}.")
                    return redirect("dashboard")
                membership = invitation_accept(token=token, user=request.user, request=request)
                messages.success(request, f"You joined {membership.organization.name} as "
                                          f"{membership.get_role_display()}. Switch to it with the menu at the top.")
                return redirect("dashboard")
            signup = signup_form(request.POST)
            if signup.is_valid():
                data = signup.cleaned_data
                membership = invitation_accept_new_user(token=token, username=data["username"],
                                                        password=data["password1"], email=data["email"],
                                                        request=request)
                messages.success(request, f"Your account {membership.user.username} was created and joined "
                                          f"{membership.organization.name}. Log in with your new password.")
                return redirect("login")
        except ValidationError as exc:
            if request.user.is_authenticated:
                error = " ".join(exc.messages)
            else:
                if hasattr(exc, "error_dict") and "password" not in exc.message_dict:
                    add_validation_errors(signup, exc)
                else:  # password validators answer a plain list
                    for err in exc.messages:
                        signup.add_error("password1", err)
    return render(request, "orgs/invitation.html", {
        "invitation": invitation, "signup": signup, "error": error,
        "login_url": f"{reverse('login')}?next={request.path}",
    })


@require_POST
@org_required()
def switch_organization(request: HttpRequest) -> HttpResponse:
    org_id = request.POST.get("organization")
    if organization_list_for_user(user=request.user).filter(pk=org_id).exists():
        request.session[SESSION_ORG_KEY] = int(org_id)
    return redirect("dashboard")


@org_required("admin")
@require_http_methods(["GET", "POST"])
def review_policy(request: HttpRequest) -> HttpResponse:
    """The organization's review policy (four-eyes), set by an org admin."""
    org = request.organization
    form = ReviewPolicyForm(request.POST or None, initial={"four_eyes": org.four_eyes})
    if request.method == "POST" and form.is_valid():
        organization_review_policy_set(organization=org, four_eyes=form.cleaned_data["four_eyes"],
                                       user=request.user, request=request)
        messages.success(request, "Four-eyes review is " + ("on." if org.four_eyes else "off: one person may "
                                                             "propose and approve."))
        return redirect("review-policy")
    return render(request, "orgs/review_policy.html", {"form": form})


# --------------------------------------------------------------------------- activity trail


def _day(value: str, *, end: bool = False) -> datetime | None:
    """A YYYY-MM-DD filter value as an aware datetime (the end of the day for ``until``)."""
    try:
        day = datetime.strptime(value, "%Y-%m-%d").date()
    except (TypeError, ValueError):
        return None
    moment = datetime.combine(day + timedelta(days=1) if end else day, time.min)
    return timezone.make_aware(moment, timezone.get_default_timezone())


@org_required("admin")
@require_GET
def activity(request: HttpRequest) -> HttpResponse:
    q = request.GET
    rows = activity_list(organization=request.organization, verb=q.get("verb", "").strip()[:64],
                         actor=q.get("actor", "").strip()[:200], since=_day(q.get("since", "")),
                         until=_day(q.get("until", ""), end=True))
    page = Paginator(rows, ACTIVITY_PAGE_SIZE).get_page(q.get("page"))
    keep = q.copy()
    keep.pop("page", None)
    return render(request, "orgs/activity.html", {
        "page": page, "filters": {k: q.get(k, "") for k in ("verb", "actor", "since", "until")},
        "query": keep.urlencode(),
        "verbs": ["member.", "user.login", "user.password", "token.", "invitation.", "ledger.export", "webhook.",
                  "notifications."],
    })


# --------------------------------------------------------------------------- notifications


@org_required("admin")
def notification_settings(request: HttpRequest) -> HttpResponse:
    config = notification_settings_get(organization=request.organization)
    webhook_form = WebhookForm(request.POST if request.POST.get("form") == "webhook" else None)
    email_form = EmailNotificationsForm(
        request.POST if request.POST.get("form") == "email" else None,
        initial={"email_recipients": config.email_recipients, "email_events": config.email_events})
    if request.method == "POST":
        try:
            if webhook_form.is_bound and webhook_form.is_valid():
                endpoint, secret = webhook_create(organization=request.organization, created_by=request.user,
                                                  request=request, **webhook_form.cleaned_data)
                request.session["webhook_secret"] = {"id": endpoint.pk, "secret": secret}
                messages.success(request, f"Webhook to {endpoint.url} added; copy its signing secret now.")
                return redirect("notification-settings")
            if email_form.is_bound and email_form.is_valid():
                notification_settings_update(organization=request.organization, actor=request.user,
                                             request=request, **email_form.cleaned_data)
                messages.success(request, "Email notifications saved.")
                return redirect("notification-settings")
        except ValidationError as exc:
            add_validation_errors(webhook_form if webhook_form.is_bound else email_form, exc)
    webhooks = WebhookEndpoint.objects.filter(organization=request.organization)
    deliveries = (WebhookDelivery.objects.select_related("endpoint")
                  .filter(endpoint__organization=request.organization)[:20])
    new_secret = request.session.pop("webhook_secret", None) if request.method == "GET" else None
    return render(request, "orgs/notifications.html", {
        "webhooks": webhooks, "deliveries": deliveries, "webhook_form": webhook_form, "email_form": email_form,
        "new_secret": new_secret,
    })


@require_POST
@org_required("admin")
def webhook_delete_view(request: HttpRequest, webhook_id: int) -> HttpResponse:
    try:
        webhook_delete(organization=request.organization, webhook_id=webhook_id, actor=request.user,
                       request=request)
    except WebhookEndpoint.DoesNotExist:
        raise Http404("No such webhook in your organization.") from None
    messages.success(request, "Webhook removed.")
    return redirect("notification-settings")
