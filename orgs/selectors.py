from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from orgs.models import Membership, Organization

SESSION_ORG_KEY = "memaudit_org_id"


def membership_for_request(*, user: AbstractBaseUser, session) -> Membership | None:
    memberships = Membership.objects.select_related("organization").filter(user=user)
    chosen = session.get(SESSION_ORG_KEY)
    if chosen is not None:
        membership = memberships.filter(organization_id=chosen).first()
        if membership is not None:
            return membership
    return memberships.order_by("organization__name").first()


def membership_list(*, organization: Organization) -> QuerySet[Membership]:
    return Membership.objects.select_related("user").filter(organization=organization).order_by("user__username")


def organization_list_for_user(*, user: AbstractBaseUser) -> QuerySet[Organization]:
    return Organization.objects.filter(memberships__user=user).order_by("name")
