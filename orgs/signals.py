"""Logins go to the activity trail of every organization the user is an active member of
(who, when, from where). A signal because Django's login view is not ours to edit; the write
itself is the one service, activity_record. New review proposals notify the organization
(post_save on audits.ReviewProposal, whose services are not ours to edit)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import post_save
from django.dispatch import receiver

from orgs.models import Membership
from orgs.notifications import notification_emit, site_url
from orgs.services import activity_record


@receiver(user_logged_in, dispatch_uid="orgs_activity_login")
def record_login(sender, request, user, **kwargs) -> None:
    if request is None or "REMOTE_ADDR" not in request.META:  # force_login in tests and scripts: no HTTP request
        return
    for membership in Membership.objects.select_related("organization").filter(user=user, is_active=True):
        activity_record(organization=membership.organization, verb="user.login", actor=user, request=request,
                        target=f"user:{user.get_username()}",
                        detail={"via": "admin" if request.path.startswith("/admin/") else "login"})


@receiver(user_login_failed, dispatch_uid="orgs_activity_login_failed")
def record_login_failure(sender, credentials, request=None, **kwargs) -> None:
    """A wrong password for an existing account shows in that account's organizations (an admin
    sees guessing); throttled attempts never get this far (orgs.forms.ThrottledLoginMixin)."""


    username = (credentials or {}).get("username")
    if request is None or "REMOTE_ADDR" not in request.META or not username:
        return
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        return
    for membership in Membership.objects.select_related("organization").filter(user=user, is_active=True):
        activity_record(organization=membership.organization, verb="user.login_failed", actor=None,
                        actor_label="anonymous", request=request, target=f"user:{username}",
                        detail={"via": "admin" if request.path.startswith("/admin/") else "login"})


@receiver(post_save, sender="audits.ReviewProposal", dispatch_uid="orgs_notify_proposal_waiting")
def notify_proposal_waiting(sender, instance, created, **kwargs) -> None:
    """A new open proposal: notify the organization (webhooks, email) after the commit."""
    if not created or instance.status != "open":
        return

    notification_emit(organization_id=instance.organization_id, event="proposal.waiting", payload={
        "proposal": instance.pk, "store": instance.store_id, "memory": instance.memory_id,
        "proposed_by": instance.proposed_by_actor, "url": site_url("/review/")})
