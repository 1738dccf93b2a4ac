"""Role checks shared by pages and the API, so both enforce the same rules."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.http import Http404
from rest_framework.permissions import BasePermission

from orgs.models import Membership
from orgs.selectors import membership_for_request

ROLE_CAPABILITIES = {
    "member": lambda m: True,
    "propose": lambda m: m.can_propose,
    "review": lambda m: m.can_review,
    "admin": lambda m: m.is_admin,
}


def membership_allows(membership, capability: str) -> bool:
    return membership is not None and ROLE_CAPABILITIES[capability](membership)


def require(*, user, organization, capability: str) -> None:
    """Services enforce roles themselves, so the UI, the API and commands cannot differ: raise
    ``PermissionDenied`` unless ``user`` has ``capability`` in ``organization``.

    ``user=None`` is the operator (management commands, workers); a superuser who belongs to no
    organization acts as the operator too."""
    if user is None:
        return
    if getattr(user, "is_superuser", False) and not Membership.objects.filter(user=user).exists():
        return
    require_member(user=user, organization=organization, capability=capability)


def require_member(*, user, organization, capability: str) -> Membership:
    """``user``'s membership of ``organization`` if it has ``capability``; else ``PermissionDenied``
    (no shortcut for the operator or a superuser: see ``require``)."""
    membership = Membership.objects.filter(user=user, organization=organization).first()
    if membership is None:
        raise PermissionDenied("You are not a member of this organization.")
    if not membership.is_active:
        raise PermissionDenied("Your membership of this organization is deactivated; ask its admin.")
    if not membership_allows(membership, capability):
        raise PermissionDenied(f"Your role ({membership.get_role_display()}) cannot do this.")
    return membership


def org_required(capability: str = "member"):
    """View decorator: a logged-in member of an organization with the capability.

    Selectors raise the model's ``DoesNotExist`` for an object the organization does not hold
    (or that does not exist); the page answers it as a 404, like any other "not found"."""

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if request.membership is None:
                raise PermissionDenied("You are not a member of any organization.")
            if not membership_allows(request.membership, capability):
                raise PermissionDenied(f"Your role ({request.membership.get_role_display()}) cannot do this.")
            try:
                return view(request, *args, **kwargs)
            except ObjectDoesNotExist:
                raise Http404("Not found in your organization.") from None

        return wrapper

    return decorator


def request_membership(request):
    """The membership of a DRF request; token-authenticated users are resolved here,
    because the middleware ran before DRF authenticated them."""
    django_request = request._request
    if getattr(django_request, "membership", None) is None and request.user and request.user.is_authenticated:
        membership = membership_for_request(user=request.user, session=django_request.session)
        django_request.membership = membership
        django_request.organization = membership.organization if membership else None
    return getattr(django_request, "membership", None)


def request_organization(request):
    """The organization every API query of this request is scoped to."""
    return request_membership(request).organization


class OrgMember(BasePermission):
    """DRF: the user is a member of an organization; ``required_capability`` on the view narrows it."""

    message = "You are not a member of any organization."

    def has_permission(self, request, view) -> bool:
        membership = request_membership(request)
        capability = getattr(view, "required_capability", "member")
        if membership is None:
            return False
        if not membership_allows(membership, capability):
            self.message = f"Your role ({membership.get_role_display()}) cannot do this."
            return False
        return True
