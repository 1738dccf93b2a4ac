from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from orgs.models import ActivityEvent, Invitation, Membership, Organization, Role

User = get_user_model()


def organization_create(*, name: str, slug: str | None = None) -> Organization:
    organization = Organization(name=name, slug=slug or slugify(name))
    organization.full_clean()
    organization.save()
    return organization


INVITE_SALT = "orgs.invitation"


def _nonce_hash(nonce: str) -> str:
    return hashlib.sha256(nonce.encode("utf-8")).hexdigest()


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}; use one of {', '.join(Role.values)}."})


def invitation_create(*, organization: Organization, invited_by, role: str, username: str = "", email: str = "",
                      request=None, now: datetime | None = None) -> tuple[Invitation, str]:
    """An invitation and its one-time link token (returned once; only a hash of it is kept).

    Nothing here looks the username up: the answer is the same whether or not an account of that
    name exists, so the form cannot be used to find out (the invitee's side sorts it out).
    """
    _check_role(role)
    username, email = username.strip(), email.strip()
    if not username and not email:
        raise ValidationError({"username": "Give the invitee's username or email address (or both)."})
    now = now or timezone.now()
    nonce = secrets.token_urlsafe(24)
    invitation = Invitation(organization=organization, invited_by=invited_by, role=role, username=username,
                            email=email, nonce_hash=_nonce_hash(nonce),
                            expires_at=now + timedelta(seconds=settings.INVITATION_MAX_AGE_SECONDS))
    invitation.full_clean()
    invitation.save()
    token = signing.dumps({"i": invitation.pk, "n": nonce}, salt=INVITE_SALT, compress=True)
    activity_record(organization=organization, verb="member.invited", actor=invited_by, request=request,
                    target=invitation.invitee, detail={"role": role, "invitation": invitation.pk})
    return invitation, token


def invitation_for_token(*, token: str, now: datetime | None = None, for_update: bool = False) -> Invitation:
    """The pending invitation a link names, or a ValidationError that says why not."""
    try:
        data = signing.loads(token, salt=INVITE_SALT, max_age=settings.INVITATION_MAX_AGE_SECONDS)
        pk, nonce = int(data["i"]), str(data["n"])
    except signing.SignatureExpired:
        raise ValidationError("This invitation link has expired. Ask your admin for a new one.",
                              code="expired") from None
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        raise ValidationError("This invitation link is not valid. Check that it was copied whole.",
                              code="invalid") from None
    rows = Invitation.objects.select_related("organization", "invited_by")
    if for_update:
        rows = rows.select_for_update(of=("self",))  # invited_by is a nullable (outer) join
    invitation = rows.filter(pk=pk, nonce_hash=_nonce_hash(nonce)).first()
    if invitation is None:
        raise ValidationError("This invitation link is not valid. Check that it was copied whole.", code="invalid")
    state = invitation.state(now or timezone.now())
    if state != "pending":
        messages = {"accepted": "This invitation has already been used.",
                    "revoked": "This invitation was withdrawn by an admin.",
                    "expired": "This invitation link has expired. Ask your admin for a new one."}
        raise ValidationError(messages[state], code=state)
    return invitation


def _join(*, invitation: Invitation, user, request=None) -> Membership:
    organization = invitation.organization
    existing = Membership.objects.filter(organization=organization, user=user).first()
    if existing is not None and existing.is_active:
        raise ValidationError(f"You are already a member of {organization.name}.", code="member")
    if existing is not None:
        # A deactivated member is not let back in by a link: an admin reactivates them.
        raise ValidationError(f"Your membership of {organization.name} is deactivated; ask its admin.",
                              code="deactivated")
    membership = Membership.objects.create(organization=organization, user=user, role=invitation.role,
                                           invited_by=invitation.invited_by)
    now = timezone.now()
    claimed = Invitation.objects.filter(pk=invitation.pk, accepted_at__isnull=True, revoked_at__isnull=True) \
        .update(accepted_at=now, accepted_by=user)
    if claimed != 1:  # another request used the link first
        raise ValidationError("This invitation has already been used.", code="accepted")
    activity_record(organization=organization, verb="member.joined", actor=user, request=request,
                    target=f"user:{user.get_username()}",
                    detail={"role": invitation.role, "invitation": invitation.pk,
                            "invited_by": invitation.invited_by.get_username() if invitation.invited_by else None})
    return membership


@transaction.atomic
def invitation_accept(*, token: str, user, request=None) -> Membership:
    """A logged-in user accepts: they join with the invitation's role (their consent is this call)."""
    invitation = invitation_for_token(token=token, for_update=True)
    if invitation.username and invitation.username != user.get_username():
        raise ValidationError("This invitation was made out to another account. Log out and open the link "
                              "again, or ask your admin to invite this account.", code="other-account")
    return _join(invitation=invitation, user=user, request=request)


@transaction.atomic
def invitation_accept_new_user(*, token: str, username: str, password: str, email: str = "",
                               request=None) -> Membership:
    """The invitee creates their own account (their own password) and joins."""
    invitation = invitation_for_token(token=token, for_update=True)
    username = (invitation.username or username).strip()
    if not username:
        raise ValidationError({"username": "Choose a username."})
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": "That username cannot be used for a new account. If it is yours, "
                                           "log in and accept the invitation instead."})
    user = User(username=username, email=(email or invitation.email).strip())
    password_validation.validate_password(password, user)
    user.set_password(password)
    user.full_clean()
    user.save()
    return _join(invitation=invitation, user=user, request=request)


@transaction.atomic
def invitation_revoke(*, organization: Organization, invitation_id: int, actor=None, request=None) -> Invitation:
    invitation = Invitation.objects.select_for_update().get(organization=organization, pk=invitation_id)
    if invitation.accepted_at is None and invitation.revoked_at is None:
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        activity_record(organization=organization, verb="invitation.revoked", actor=actor, request=request,
                        target=invitation.invitee, detail={"invitation": invitation.pk})
    return invitation


def invitation_send(*, invitation: Invitation, link: str) -> bool:
    """Email the link to the invitee when an address is known (console backend by default)."""
    if not invitation.email:
        return False
    inviter = invitation.invited_by.get_username() if invitation.invited_by else "An admin"
    send_mail(
        subject=f"You are invited to {invitation.organization.name} on MemAudit",
        message=(f"{inviter} invited you to join {invitation.organization.name} on MemAudit as "
                 f"{invitation.get_role_display()}.\n\nOpen this link to accept (it works once and expires "
                 f"{invitation.expires_at:%Y-%m-%d %H:%M} UTC):\n{link}\n\n"
                 "If you did not expect this, ignore this message: nothing happens unless you accept."),
        from_email=None, recipient_list=[invitation.email])
    return True


def _active_admins(organization: Organization):
    return Membership.objects.filter(organization=organization, role=Role.ADMIN, is_active=True,
                                     user__is_active=True)


def _keeps_an_admin(membership: Membership) -> None:
    if membership.role == Role.ADMIN and membership.is_active \
            and not _active_admins(membership.organization).exclude(pk=membership.pk).exists():
        raise ValidationError("An organization keeps at least one active org admin.", code="last-admin")


@transaction.atomic
def member_set_role(*, organization: Organization, membership_id: int, role: str, actor=None,
                    request=None) -> Membership:
    _check_role(role)
    membership = Membership.objects.select_for_update().select_related("user").get(
        organization=organization, pk=membership_id)
    if membership.role == Role.ADMIN and role != Role.ADMIN:
        _keeps_an_admin(membership)
    previous = membership.role
    if previous == role:
        return membership
    membership.role = role
    membership.save(update_fields=["role"])
    activity_record(organization=organization, verb="member.role_changed", actor=actor, request=request,
                    target=f"user:{membership.user.get_username()}", detail={"from": previous, "to": role})
    return membership


@transaction.atomic
def member_set_active(*, organization: Organization, membership_id: int, active: bool, actor=None,
                      request=None) -> Membership:
    """Deactivate (the member keeps their history but reaches nothing of this organization; their
    API tokens stop working here, and so do the agent tokens they created: ``ledger.agent_tokens``
    reads them as suspended) or reactivate a member."""
    membership = Membership.objects.select_for_update().select_related("user").get(
        organization=organization, pk=membership_id)
    if membership.is_active == active:
        return membership
    if not active:
        _keeps_an_admin(membership)
    membership.is_active = active
    membership.save(update_fields=["is_active"])
    activity_record(organization=organization, verb="member.reactivated" if active else "member.deactivated",
                    actor=actor, request=request, target=f"user:{membership.user.get_username()}",
                    detail={"role": membership.role})
    return membership


@transaction.atomic
def member_remove(*, organization: Organization, membership_id: int, actor=None, request=None) -> str:
    """Remove a member from the organization (their account stays; their past actions stay
    attributed in the ledger and the activity trail). Returns the username."""
    membership = Membership.objects.select_for_update().select_related("user").get(
        organization=organization, pk=membership_id)
    _keeps_an_admin(membership)
    username = membership.user.get_username()
    membership.delete()
    activity_record(organization=organization, verb="member.removed", actor=actor, request=request,
                    target=f"user:{username}", detail={"role": membership.role})
    return username


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
