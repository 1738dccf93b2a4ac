"""Per-store agent tokens: created by an org admin, shown once, kept only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from ledger.models import AgentToken, Store
from orgs.models import Membership
from orgs.services import activity_record

PREFIX = "mat_"


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


# last_used_at is written at most this often per token, so recall does not write on every call.
TOUCH_EVERY = timedelta(seconds=60)


def agent_token_create(*, store: Store, name: str, created_by=None, expires_at: datetime | None = None,
                       request=None) -> tuple[AgentToken, str]:
    """Return the token row and the raw token; the raw value is never stored or shown again.

    ``expires_at`` defaults to AGENT_TOKEN_DEFAULT_DAYS from now; it must lie in the future.
    """
    now = timezone.now()
    if expires_at is None:
        expires_at = now + timedelta(days=settings.AGENT_TOKEN_DEFAULT_DAYS)
    if expires_at <= now:
        raise ValidationError({"expires_at": "An agent token's expiry must lie in the future."})
    name = name.strip()[:100]
    if not name:
        raise ValidationError({"name": "Give the token a name (which agent uses it)."})
    raw = PREFIX + secrets.token_urlsafe(32)
    token = AgentToken.objects.create(organization_id=store.organization_id, store=store, name=name,
                                      token_hash=token_hash(raw), expires_at=expires_at,
                                      created_by=created_by if getattr(created_by, "pk", None) else None)
    activity_record(organization=store.organization, verb="token.created", actor=created_by, request=request,
                    target=f"agent-token:{token.pk} {token.name}",
                    detail={"store": store.slug, "expires_at": expires_at.isoformat()})
    return token, raw


def agent_token_revoke(*, token: AgentToken, actor=None, request=None) -> bool:
    """Revoke a token (effective on its next request). False when it was already revoked."""

    revoked = AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    if revoked:
        activity_record(organization=token.organization, verb="token.revoked", actor=actor, request=request,
                        target=f"agent-token:{token.pk} {token.name}", detail={"store": token.store.slug})
    return bool(revoked)


def _with_creator_state(rows):
    """Annotate ``creator_active``: the token's creator is still an active member of its
    organization with an active account. A token outlives neither: its creator saw the raw value
    once, and a member who left must not keep reaching the organization's memories with it
    (``AgentToken.state`` says "suspended"; reactivating the member restores it). Tokens with no
    creator recorded are not suspended."""
    return rows.annotate(creator_active=Exists(Membership.objects.filter(
        organization_id=OuterRef("organization_id"), user_id=OuterRef("created_by_id"), is_active=True,
        user__is_active=True)))


def agent_token_list(*, organization, store_id: int | None = None):
    rows = _with_creator_state(AgentToken.objects.select_related("store", "created_by").filter(organization=organization))
    if store_id is not None:
        rows = rows.filter(store_id=store_id)
    return rows.order_by("-created_at", "-pk")


def agent_token_get_for_org(*, organization, token_id: int) -> AgentToken:
    return _with_creator_state(AgentToken.objects.select_related("store", "organization")).get(
        organization=organization, pk=token_id)


def agent_token_get(*, raw: str) -> AgentToken | None:
    """The token a raw value names, revoked or expired ones included (the caller says which)."""
    return (_with_creator_state(AgentToken.objects.select_related("store", "store__organization"))
            .filter(token_hash=token_hash(raw)).first())


def agent_token_touch(*, token: AgentToken, now: datetime) -> None:
    if token.last_used_at is None or now - token.last_used_at >= TOUCH_EVERY:
        AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


class AgentPrincipal:
    """The ``request.user`` of an agent-token request: authenticated, but no org member."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, token: AgentToken) -> None:
        self.token = token
        self.username = f"agent:{token.name}"

    def __str__(self) -> str:
        return self.username


class AgentTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer mat_...``; ``request.auth`` is the AgentToken (scoped to one store)."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid bearer header: give exactly one token.")
        try:
            raw = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = agent_token_get(raw=raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        now = timezone.now()
        state = token.state(now)
        if state == "revoked":
            raise exceptions.AuthenticationFailed("This agent token was revoked; ask an org admin for a new one.")
        if state == "expired":
            raise exceptions.AuthenticationFailed(
                f"This agent token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; ask an org admin for a new one.")
        if state == "suspended":
            raise exceptions.AuthenticationFailed(
                "The member who created this agent token is no longer an active member of the organization; "
                "ask an org admin for a new one.")
        agent_token_touch(token=token, now=now)
        return AgentPrincipal(token), token

    def authenticate_header(self, request) -> str:
        return self.keyword


class AgentTokenScheme(OpenApiAuthenticationExtension):
    """Describes the agent bearer token in the OpenAPI schema."""

    target_class = "ledger.agent_tokens.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "Per-store agent token (mat_...)."}
