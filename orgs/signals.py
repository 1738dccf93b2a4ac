"""Logins go to the activity trail of every organization the user is an active member of
(who, when, from where). A signal because Django's login view is not ours to edit; the write
itself is the one service, activity_record."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver


@receiver(user_logged_in, dispatch_uid="orgs_activity_login")
def record_login(sender, request, user, **kwargs) -> None:
    from orgs.models import Membership
    from orgs.services import activity_record

    if request is None or "REMOTE_ADDR" not in request.META:  # force_login in tests and scripts: no HTTP request
        return
    for membership in Membership.objects.select_related("organization").filter(user=user, is_active=True):
        activity_record(organization=membership.organization, verb="user.login", actor=user, request=request,
                        target=f"user:{user.get_username()}",
                        detail={"via": "admin" if request.path.startswith("/admin/") else "login"})
