from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from orgs.models import ActivityEvent, Invitation, Membership, Organization

SESSION_ORG_KEY = "memaudit_org_id"


def membership_for_request(*, user: AbstractBaseUser, session) -> Membership | None:
    """The active membership this request works in.

    The organization chosen in the session (the switcher) when it is still an active membership;
    otherwise the user's *oldest* active membership. Joining another organization therefore never
    moves someone's next login there: switching is always the user's explicit choice.
    """
    memberships = Membership.objects.select_related("organization").filter(user=user, is_active=True)
    chosen = session.get(SESSION_ORG_KEY)
    if chosen is not None:
        membership = memberships.filter(organization_id=chosen).first()
        if membership is not None:
            return membership
    return memberships.order_by("created_at", "pk").first()


def membership_list(*, organization: Organization) -> QuerySet[Membership]:
    return Membership.objects.select_related("user", "invited_by").filter(organization=organization) \
        .order_by("-is_active", "user__username")


def invitation_list(*, organization: Organization) -> QuerySet[Invitation]:
    return Invitation.objects.select_related("invited_by", "accepted_by").filter(organization=organization)


def activity_list(*, organization: Organization, verb: str = "", actor: str = "", since=None,
                  until=None) -> QuerySet[ActivityEvent]:
    """The organization's activity trail, newest first; ``verb`` matches a prefix (``member.``),
    ``actor`` a substring of the actor label."""
    rows = ActivityEvent.objects.filter(organization=organization)
    if verb:
        rows = rows.filter(verb__startswith=verb)
    if actor:
        rows = rows.filter(actor_label__icontains=actor)
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if until is not None:
        rows = rows.filter(created_at__lt=until)
    return rows.order_by("-created_at", "-pk")


def organization_list_for_user(*, user: AbstractBaseUser) -> QuerySet[Organization]:
    return Organization.objects.filter(memberships__user=user, memberships__is_active=True).order_by("name")
