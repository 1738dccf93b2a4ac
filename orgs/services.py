from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from orgs.models import ActivityEvent, Membership, Organization, Role

User = get_user_model()


def organization_create(*, name: str, slug: str | None = None) -> Organization:
    organization = Organization(name=name, slug=slug or slugify(name))
    organization.full_clean()
    organization.save()
    return organization


@transaction.atomic
def member_invite(*, organization: Organization, username: str, email: str, role: str,
                  invited_by=None) -> tuple[Membership, str | None]:
    """Add a user to the organization. A new user gets a one-time password, returned once
    so the admin can hand it over; an existing user keeps theirs (``None``). ``invited_by``
    is recorded: the review rules refuse an approval through an account the proposer made."""
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}; use one of {', '.join(Role.values)}."})
    username = username.strip()
    if not username:
        raise ValidationError({"username": "A username is required."})
    password = None
    user = User.objects.filter(username=username).first()
    if user is None:
        password = secrets.token_urlsafe(12)
        user = User(username=username, email=email.strip())
        user.set_password(password)
        user.full_clean()
        user.save()
    if Membership.objects.filter(organization=organization, user=user).exists():
        raise ValidationError({"username": f"{username} is already a member of {organization.name}."})
    membership = Membership.objects.create(organization=organization, user=user, role=role,
                                           invited_by=invited_by if getattr(invited_by, "pk", None) else None)
    return membership, password


@transaction.atomic
def member_set_role(*, organization: Organization, membership_id: int, role: str) -> Membership:
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}; use one of {', '.join(Role.values)}."})
    membership = Membership.objects.select_for_update().get(organization=organization, pk=membership_id)
    if membership.role == Role.ADMIN and role != Role.ADMIN:
        admins = Membership.objects.filter(organization=organization, role=Role.ADMIN).count()
        if admins <= 1:
            raise ValidationError({"role": "An organization keeps at least one org admin."})
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


def activity_record(*, organization: Organization, verb: str, actor=None, actor_label: str = "",
                    target: str = "", detail: dict | None = None, request=None,
                    ledger_ref: str = "") -> ActivityEvent:
    """Append one row to the organization's activity trail (the only writer of ActivityEvent).

    ``actor`` is a user (or None for the system); ``actor_label`` overrides how it is shown
    (``"housekeeper"``, ``"agent-token:<name>"``). ``request`` supplies the client address.
    """
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor = None
    if request is not None and actor is None and getattr(request, "user", None) is not None \
            and request.user.is_authenticated:
        actor = request.user
    label = actor_label or (f"user:{actor.get_username()}" if actor is not None else "system")
    ip = request.META.get("REMOTE_ADDR") if request is not None else None
    return ActivityEvent.objects.create(organization=organization, actor=actor, actor_label=label[:200],
                                        verb=verb[:64], target=str(target)[:300], detail=detail or {},
                                        ip=ip or None, ledger_ref=ledger_ref[:200])


@transaction.atomic
def organization_review_policy_set(*, organization: Organization, four_eyes: bool, user=None,
                                   request=None) -> Organization:
    """Set the organization's review policy (org admins; the views check the role). Four-eyes
    on: nothing leaves recall on one person's word. Recorded in the activity trail."""
    if not isinstance(four_eyes, bool):
        raise ValidationError({"four_eyes": "true or false"})
    org = Organization.objects.select_for_update().get(pk=organization.pk)
    if org.four_eyes != four_eyes:
        Organization.objects.filter(pk=org.pk).update(four_eyes=four_eyes)
        activity_record(organization=org, verb="review_policy.changed", actor=user, request=request,
                        target="four_eyes", detail={"four_eyes": four_eyes})
    organization.four_eyes = four_eyes
    return organization
