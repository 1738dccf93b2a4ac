from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from orgs import health
from orgs.forms import InviteForm, LoginForm, ReviewPolicyForm, RoleForm
from orgs.permissions import org_required
from orgs.selectors import SESSION_ORG_KEY, membership_list, organization_list_for_user
from orgs.services import member_invite, member_set_role, organization_review_policy_set


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    authentication_form = LoginForm
    redirect_authenticated_user = True


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    # Most often an expired session or a page left open across a restart: say so plainly.
    return render(request, "403_csrf.html", status=403)


def status(request: HttpRequest) -> HttpResponse:
    checks = health.health_checks()
    code = 200 if all(c.ok for c in checks[:2]) else 503
    if request.headers.get("Accept", "").startswith("application/json"):
        from django.http import JsonResponse

        return JsonResponse({c.name.lower(): {"ok": c.ok, "detail": c.detail} for c in checks}, status=code)
    return render(request, "orgs/status.html", {"checks": checks}, status=code)


@org_required("admin")
def members(request: HttpRequest) -> HttpResponse:
    invite_form = InviteForm(request.POST or None)
    new_password = None
    if request.method == "POST" and invite_form.is_valid():
        try:
            membership, new_password = member_invite(organization=request.organization, invited_by=request.user,
                                                     **invite_form.cleaned_data)
        except ValidationError as exc:
            for field, errs in exc.message_dict.items():
                for err in errs:
                    invite_form.add_error(field if field in invite_form.fields else None, err)
        else:
            messages.success(request, f"{membership.user.username} joined as {membership.get_role_display()}.")
            if new_password is None:
                return redirect("members")
            invite_form = InviteForm()
    context = {
        "memberships": membership_list(organization=request.organization),
        "invite_form": invite_form,
        "role_form": RoleForm(),
        "new_password": new_password,
    }
    return render(request, "orgs/members.html", context)


@require_POST
@org_required("admin")
def member_role(request: HttpRequest, membership_id: int) -> HttpResponse:
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a valid role.")
        return redirect("members")
    from orgs.models import Membership

    try:
        membership = member_set_role(organization=request.organization, membership_id=membership_id, role=form.cleaned_data["role"])
    except Membership.DoesNotExist:
        from django.http import Http404

        raise Http404("No such member in your organization.") from None
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{membership.user.username} is now {membership.get_role_display()}.")
    return redirect("members")


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
