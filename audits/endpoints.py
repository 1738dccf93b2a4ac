"""Agent endpoints: services, selectors and the secret box (issue 11, "agent egress policy").

An org admin registers each agent the organization's audits may call (``AgentEndpoint``: name,
connector, base URL, model, options, secret); analysts pick one by name in the audit settings
(``{"agent": {"endpoint": "<name>"}}``) and never supply a URL or a secret themselves.

Secrets are write-only. They are encrypted by ``orgs.secret_box`` (Fernet under
``AGENT_SECRETS_KEY``). The plaintext exists only in the worker that builds the connector
(``agent_config_resolve``); nothing returns it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as conf
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction

from audits.engine.agents import CONNECTORS, endpoint_connectors
from audits.models import AgentEndpoint
from egress.client import EgressPolicy
from orgs.models import Organization
from orgs.permissions import require_member
from orgs.secret_box import secret_decrypt, secret_encrypt
from orgs.services import activity_record

# Settings an endpoint may carry besides its URL, model and secret (none of them secret), and
# those an analyst may add to a registered endpoint's per run: from the connectors' schemas.
OPTION_KEYS = {name: {st.name for st in CONNECTORS[name].settings if st.endpoint_option}
               for name in endpoint_connectors()}
TEXT_OPTIONS = {st.name for name in endpoint_connectors() for st in CONNECTORS[name].settings if st.type == "text"}
RUN_OPTION_KEYS = {name: {st.name for st in CONNECTORS[name].settings if st.endpoint_option and st.analyst}
                   for name in endpoint_connectors()}
# Never accepted from an analyst: where requests go and what credentials they carry.
FORBIDDEN_AGENT_KEYS = ("url", "base_url", "api_key", "api_key_env", "headers")
MAX_SECRET_CHARS = 4096


# ============================================================================ egress policy


def egress_policy() -> EgressPolicy:
    """The deployment's policy (``AGENT_EGRESS_ALLOW``, ``AGENT_MAX_RESPONSE_BYTES``)."""
    return EgressPolicy.from_setting(conf.AGENT_EGRESS_ALLOW, max_bytes=conf.AGENT_MAX_RESPONSE_BYTES)


# ============================================================================ selectors


def agent_endpoint_list(*, organization: Organization):
    return AgentEndpoint.objects.filter(organization=organization).order_by("name")


def agent_endpoint_get(*, organization: Organization, endpoint_id: int) -> AgentEndpoint:
    return AgentEndpoint.objects.get(organization=organization, pk=endpoint_id)


# ============================================================================ services


def _require_admin(*, user, organization: Organization) -> None:
    if user is None:  # management commands act as the operator
        return
    require_member(user=user, organization=organization, capability="admin")


def _clean(*, connector: str, name: str, base_url: str, model: str, options: Any) -> dict[str, Any]:
    errors: dict[str, list[str]] = {}
    if connector not in OPTION_KEYS:
        errors["connector"] = [f"one of {', '.join(OPTION_KEYS)}"]
    name = (name or "").strip()
    if not name or len(name) > 64 or not all(c.isalnum() or c in "-_" for c in name):
        errors["name"] = ["letters, digits, '-' or '_' (at most 64)"]
    base_url = (base_url or "").strip()
    try:
        URLValidator(schemes=["http", "https"])(base_url)
    except DjangoValidationError:
        errors["base_url"] = ["an http:// or https:// URL"]
    else:
        if "@" in base_url.split("//", 1)[1].split("/", 1)[0]:
            errors["base_url"] = ["no user or password in the URL: put the credential in the secret"]
    model = (model or "").strip()
    if connector in OPTION_KEYS and any(st.name == "model" for st in CONNECTORS[connector].settings) and not model:
        errors["model"] = [f"required for the {connector} connector"]
    if options in (None, ""):
        options = {}
    if not isinstance(options, dict):
        errors["options"] = ["a JSON object"]
    elif connector in OPTION_KEYS:
        bad = sorted(set(options) - OPTION_KEYS[connector])
        if bad:
            errors["options"] = [f"not an option of {connector}: {', '.join(bad)} "
                                 f"(allowed: {', '.join(sorted(OPTION_KEYS[connector]))}; the secret has its own field)"]
        else:
            wrong = sorted(k for k, v in options.items()
                           if not (isinstance(v, str) and "\x00" not in v if k in TEXT_OPTIONS
                                   else isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1e6))
            if wrong:
                errors["options"] = [f"{k}: {'text' if k in TEXT_OPTIONS else 'a number ≥ 0'}" for k in wrong]
    if errors:
        raise DjangoValidationError(errors)
    return {"connector": connector, "name": name, "base_url": base_url, "model": model, "options": options}


def _check_secret(secret: str | None) -> None:
    if secret is not None and len(secret) > MAX_SECRET_CHARS:
        raise DjangoValidationError({"secret": [f"at most {MAX_SECRET_CHARS} characters"]})


def agent_endpoint_create(*, organization: Organization, user, name: str, connector: str, base_url: str,
                          model: str = "", options: dict[str, Any] | None = None, secret: str | None = None,
                          request=None) -> AgentEndpoint:
    _require_admin(user=user, organization=organization)
    data = _clean(connector=connector, name=name, base_url=base_url, model=model, options=options)
    _check_secret(secret)
    try:
        with transaction.atomic():
            ep = AgentEndpoint.objects.create(
                organization=organization, created_by=user, **data,
                secret_encrypted=secret_encrypt(secret) if secret else None)
    except IntegrityError:
        raise DjangoValidationError({"name": ["an endpoint with this name exists"]}) from None
    activity_record(organization=organization, verb="agent_endpoint.create", actor=user, target=ep.name,
                    detail={"connector": ep.connector, "base_url": ep.base_url, "model": ep.model,
                            "secret_set": ep.has_secret}, request=request)
    return ep


def agent_endpoint_update(*, endpoint: AgentEndpoint, user, name: str | None = None, connector: str | None = None,
                          base_url: str | None = None, model: str | None = None,
                          options: dict[str, Any] | None = None, secret: str | None = None,
                          clear_secret: bool = False, request=None) -> AgentEndpoint:
    """Change what is given; ``secret=None`` keeps the stored one, ``clear_secret`` removes it."""
    _require_admin(user=user, organization=endpoint.organization)
    data = _clean(connector=connector if connector is not None else endpoint.connector,
                  name=name if name is not None else endpoint.name,
                  base_url=base_url if base_url is not None else endpoint.base_url,
                  model=model if model is not None else endpoint.model,
                  options=options if options is not None else endpoint.options)
    _check_secret(secret)
    changed = sorted(k for k, v in data.items() if getattr(endpoint, k) != v)
    for k, v in data.items():
        setattr(endpoint, k, v)
    if clear_secret:
        endpoint.secret_encrypted = None
        changed.append("secret")
    elif secret:
        endpoint.secret_encrypted = secret_encrypt(secret)
        changed.append("secret")
    try:
        with transaction.atomic():
            endpoint.save()
    except IntegrityError:
        raise DjangoValidationError({"name": ["an endpoint with this name exists"]}) from None
    activity_record(organization=endpoint.organization, verb="agent_endpoint.update", actor=user,
                    target=endpoint.name, detail={"changed": changed, "base_url": endpoint.base_url,
                                                  "secret_set": endpoint.has_secret}, request=request)
    return endpoint


def agent_endpoint_delete(*, endpoint: AgentEndpoint, user, request=None) -> None:
    _require_admin(user=user, organization=endpoint.organization)
    name, org = endpoint.name, endpoint.organization
    endpoint.delete()
    activity_record(organization=org, verb="agent_endpoint.delete", actor=user, target=name, request=request)


# ============================================================================ audit settings


def agent_settings_clean(agent: dict[str, Any], *, organization: Organization | None,
                         errors: dict[str, list[str]]) -> dict[str, Any] | None:
    """An analyst's ``settings.agent`` -> what the run stores (no URL, no secret).

    Returns None when it added errors. ``{"endpoint": name}`` picks a registered endpoint; the
    built-in simulations need none; ``openai-chat`` without one uses the deployment's LLM."""
    bad = [k for k in FORBIDDEN_AGENT_KEYS if k in agent]
    if bad:
        for k in bad:
            errors.setdefault("agent", []).append(
                f"{k}: not accepted in audit settings; an org admin registers the agent's URL and secret "
                f"as an agent endpoint (Agent endpoints page, /api/v1/agent-endpoints/) and the audit names "
                f'it: {{"endpoint": "<name>"}}')
        return None
    name = agent.get("endpoint")
    if name is None:
        cls = CONNECTORS.get(agent.get("connector"))
        if cls is not None and cls.url_setting and cls.analyst_title is None:
            errors.setdefault("agent", []).append(
                f"endpoint: required for the {cls.connector} connector; pick a registered agent endpoint: "
                '{"endpoint": "<name>"}')
            return None
        return agent
    if not isinstance(name, str) or organization is None:
        errors.setdefault("agent", []).append("endpoint: the name of a registered agent endpoint")
        return None
    ep = AgentEndpoint.objects.filter(organization=organization, name=name).first()
    if ep is None:
        errors.setdefault("agent", []).append(f"endpoint: no agent endpoint named {name!r} in this organization")
        return None
    if agent.get("connector") not in (None, ep.connector):
        errors.setdefault("agent", []).append(f"connector: endpoint {name!r} is a {ep.connector} endpoint")
        return None
    extra = sorted(set(agent) - {"connector", "top_k", "endpoint"} - RUN_OPTION_KEYS[ep.connector])
    if extra:
        errors.setdefault("agent", []).append(f"not a setting of a {ep.connector} endpoint: {', '.join(extra)}")
        return None
    out = {k: v for k, v in agent.items() if k not in ("connector", "endpoint")}
    # endpoint_rev makes an edited endpoint a different input (runs' fingerprints differ).
    return {"connector": ep.connector, "endpoint": ep.name, "endpoint_id": ep.pk,
            "endpoint_rev": ep.updated_at.isoformat(), **out}


def agent_config_resolve(agent: dict[str, Any], *, organization: Organization) -> dict[str, Any]:
    """A run's stored agent settings -> the connector's config, URL and secret included."""
    if "endpoint_id" not in agent:
        return dict(agent)
    ep = AgentEndpoint.objects.filter(organization=organization, pk=agent["endpoint_id"]).first()
    if ep is None:
        raise ValueError(f"the agent endpoint {agent.get('endpoint')!r} was deleted; start a new audit")
    cfg: dict[str, Any] = {**ep.options, **agent, "connector": ep.connector}
    secret = secret_decrypt(ep.secret_encrypted) if ep.secret_encrypted else None
    cfg.update(CONNECTORS[ep.connector].endpoint_config(url=ep.base_url, model=ep.model, secret=secret))
    return cfg


def judge_spec_resolve(spec: dict[str, Any], *, organization: Organization) -> dict[str, Any]:
    """An ``llm-judge`` harm spec (from the run's settings or an uploaded incident) -> one whose
    judge is a registered ``openai-chat`` endpoint (``"endpoint": "<name>"``) or the deployment's
    LLM (``LLM_BASE_URL``); a URL, key or header in the spec itself is dropped, never used."""
    d = {k: v for k, v in spec.items() if k not in FORBIDDEN_AGENT_KEYS}
    name = d.get("endpoint")
    if name is None:
        d["base_url"] = conf.LLM_BASE_URL
        return d
    ep = AgentEndpoint.objects.filter(organization=organization, name=name, connector="openai-chat").first()
    if ep is None:
        raise ValueError(f"the llm-judge harm names no openai-chat agent endpoint {name!r} of this organization")
    d.update({**{k: v for k, v in ep.options.items() if k not in d}, "base_url": ep.base_url, "model": ep.model})
    if ep.secret_encrypted:
        d["api_key"] = secret_decrypt(ep.secret_encrypted)
    return d
