"""Audit settings: the defaults, and the one cleaner every way of starting an audit goes through
(page, API, command). Connectors and harm types are checked by their registries
(``audits.engine.agents.CONNECTORS``, ``audits.engine.harm.HARMS``)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings as conf
from django.core.exceptions import ValidationError as DjangoValidationError

from audits.endpoints import agent_settings_clean
from audits.engine.agents import CONNECTORS, AgentConfig
from audits.engine.scenario import parse_agent_config, parse_harm_spec
from interchange.issues import ValidationError
from orgs.models import Organization

CONSISTENCY_BACKENDS = ("rules", "cross-encoder", "onnx-conflict")

DEFAULT_AUDIT_SETTINGS: dict[str, Any] = {
    "agent": {"connector": "builtin-vote", "top_k": 5},
    "alpha": 0.6,  # CMIS's weight in DS; with fit_alpha the least it gets (CAS at most 1 - alpha)
    "fit_alpha": True,  # fit alpha to the store's own evidence (audits.engine.fusion.fit_alpha)
    "harm": None,  # default harm spec for incidents without their own
    "budget": None,  # most agent calls the whole audit may make; None = max(600, 120 per incident)
    "top_n": None,  # batch = top-N suspects; None = every suspect with DS >= threshold
    "threshold": 0.7,
    "combine": "max",
    "consistency": "rules",
    "group_ablation": True,
    "group_thresholds": [0.9, 0.8],
    "baselines": True,
}


def audit_settings_clean(raw: dict[str, Any] | None, *, organization: Organization | None = None) -> dict[str, Any]:
    """Defaults filled in and every field checked; raise Django ``ValidationError`` by field.

    The agent is a built-in simulation, the deployment's LLM (``openai-chat``), or an endpoint
    the organization's admin registered (``{"endpoint": "<name>"}``); a URL, secret or
    environment variable from the analyst is refused (``audits.endpoints``)."""
    raw = dict(raw or {})
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(raw) - set(DEFAULT_AUDIT_SETTINGS))
    if unknown:
        errors.setdefault("settings", []).append(f"unknown setting(s): {', '.join(unknown)}")
    s = {**json.loads(json.dumps(DEFAULT_AUDIT_SETTINGS)), **{k: v for k, v in raw.items() if k not in unknown}}

    agent = s["agent"]
    if not isinstance(agent, dict) or not (agent.get("connector") in CONNECTORS or "endpoint" in agent):
        errors.setdefault("agent", []).append(f"an object with a connector, one of {', '.join(CONNECTORS)}, "
                                              'or a registered endpoint: {"endpoint": "<name>"}')
    elif (agent := agent_settings_clean(dict(agent), organization=organization, errors=errors)) is not None:
        checked = agent
        url_setting = CONNECTORS[agent["connector"]].url_setting
        if url_setting and "endpoint_id" not in agent:
            agent.setdefault(url_setting, conf.LLM_BASE_URL)  # the deployment's own LLM
        elif url_setting:  # the URL is the endpoint's, never stored with the run
            checked = {**agent, url_setting: "endpoint"}
        # The connector's own checks (top_k...), with the same messages as agent.json.
        try:
            parse_agent_config(checked, filename="agent")
            s["agent"] = AgentConfig.from_dict(agent).to_dict()
        except ValidationError as exc:
            errors.setdefault("agent", []).extend(f"{i.field}: {i.message}" if i.field else i.message
                                                  for i in exc.issues)

    def number(key: str, lo: float, hi: float, *, integer: bool = False, nullable: bool = False) -> None:
        v = s[key]
        if v is None and nullable:
            return
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi
        if integer:
            ok = ok and float(v).is_integer()
        if not ok:
            kind = "an integer" if integer else "a number"
            errors.setdefault(key, []).append(f"{kind} between {lo:g} and {hi:g}" + (", or null" if nullable else ""))
        elif integer:
            s[key] = int(v)
        else:
            s[key] = float(v)

    number("alpha", 0.0, 1.0)
    number("threshold", 0.0, 1.0)
    number("budget", 1, 10_000_000, integer=True, nullable=True)
    number("top_n", 1, 100_000, integer=True, nullable=True)
    if s["combine"] not in ("max", "sum"):
        errors.setdefault("combine", []).append("'max' or 'sum'")
    if s["consistency"] not in CONSISTENCY_BACKENDS:
        errors.setdefault("consistency", []).append(f"one of {', '.join(CONSISTENCY_BACKENDS)}")
    for key in ("group_ablation", "baselines", "fit_alpha"):
        if not isinstance(s[key], bool):
            errors.setdefault(key, []).append("true or false")
    gt = s["group_thresholds"]
    if not isinstance(gt, list) or not gt or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= 1 for x in gt):
        errors.setdefault("group_thresholds", []).append("a non-empty list of numbers in (0, 1]")
    if isinstance(s["harm"], dict):
        for k in ("url", "base_url", "api_key", "api_key_env", "headers"):
            if k in s["harm"]:
                errors.setdefault("harm", []).append(
                    f"{k}: not accepted in audit settings; the llm-judge harm uses the deployment's LLM "
                    'or a registered openai-chat endpoint: {"endpoint": "<name>"}')
        judge = s["harm"].get("endpoint")
        if judge is not None and not (isinstance(judge, str) and organization is not None and
                                      organization.agent_endpoints.filter(name=judge, connector="openai-chat").exists()):
            errors.setdefault("harm", []).append(f"endpoint: no openai-chat agent endpoint named {judge!r} "
                                                 "in this organization")
    if s["harm"] is not None and not errors.get("harm"):
        try:
            s["harm"] = parse_harm_spec(s["harm"], filename="settings").to_dict()
        except ValidationError as exc:
            errors.setdefault("harm", []).extend(i.message for i in exc.issues)
    if errors:
        raise DjangoValidationError(errors)
    return s
