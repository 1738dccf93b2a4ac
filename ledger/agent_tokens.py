"""Per-store agent tokens: created by an org admin, shown once, kept only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from ledger.models import AgentToken, Store

PREFIX = "mat_"


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def agent_token_create(*, store: Store, name: str) -> tuple[AgentToken, str]:
    """Return the token row and the raw token; the raw value is never stored or shown again."""
    raw = PREFIX + secrets.token_urlsafe(32)
    token = AgentToken.objects.create(organization_id=store.organization_id, store=store, name=name[:100],
                                      token_hash=token_hash(raw))
    return token, raw


def agent_token_revoke(*, token: AgentToken) -> None:
    AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def agent_token_get(*, raw: str) -> AgentToken | None:
    return (AgentToken.objects.select_related("store", "store__organization")
            .filter(token_hash=token_hash(raw), revoked_at__isnull=True).first())


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
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return AgentPrincipal(token), token

    def authenticate_header(self, request) -> str:
        return self.keyword


class AgentTokenScheme(OpenApiAuthenticationExtension):
    """Describes the agent bearer token in the OpenAPI schema."""

    target_class = "ledger.agent_tokens.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "Per-store agent token (mat_...)."}
