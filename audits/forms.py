"""Forms of the audit pages: shapes only, the agent's and harm's settings from the engine's
registries. ``audits.services`` validates meaning (incident files,
audit settings, review rules) and its errors are shown next to the fields they name."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from audits.engine.agents import CONNECTORS, Setting
from audits.engine.harm import HARMS
from audits.models import Incident
from ledger.models import Store


def agent_choices() -> list[tuple[str, str]]:
    """What an analyst picks when starting an audit without an endpoint: the registered
    connectors that offer themselves (simulations, the deployment's own LLM). Never a URL or a
    secret; an endpoint an org admin registered is added as "endpoint:<name>"."""
    return [(name, cls.analyst_title) for name, cls in CONNECTORS.items() if cls.analyst_title]


def endpoint_connector_choices() -> list[tuple[str, str]]:
    """Connectors an org admin registers endpoints for: those that reach an agent over HTTP."""
    return [(name, cls.title) for name, cls in CONNECTORS.items() if cls.url_setting]


def _form_field(st: Setting) -> forms.Field:
    """A form field for a registered setting (never required here: the form's ``clean`` asks
    for what the chosen connector or harm needs)."""
    kw: dict[str, Any] = {"required": False, "label": st.name.replace("_", " ").capitalize(), "help_text": st.help}
    if st.choices is not None:
        return forms.ChoiceField(choices=[("", "—")] + [(c, c) for c in st.choices], **kw)
    if st.type == "int":
        return forms.IntegerField(min_value=st.min, max_value=st.max, **kw)
    if st.type == "float":
        return forms.FloatField(min_value=st.min, max_value=st.max, **kw)
    if st.type == "bool":
        return forms.BooleanField(**kw)
    widget = forms.Textarea(attrs={"rows": 2}) if st.type == "text" else None
    return forms.CharField(widget=widget, **kw)


ENDPOINT_PREFIX = "endpoint:"


class _StoreField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Store) -> str:
        return obj.name


class _OrgForm(forms.Form):
    store = _StoreField(queryset=Store.objects.none(), empty_label=None)

    def __init__(self, *args, organization, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["store"].queryset = Store.objects.filter(organization=organization).order_by("name")


class IncidentUploadForm(_OrgForm):
    file = forms.FileField(label="Incidents file")


class IncidentForm(_OrgForm):
    external_id = forms.CharField(required=False, max_length=255, label="Incident id",
                                  help_text="Optional; generated when empty.")
    query = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), label="Harmful query (q*)")
    output = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), label="Harmful output (y*)")
    retrieved = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), label="Retrieved memory ids (R*)",
                                help_text="In rank order, separated by commas, spaces or new lines.")
    harm_target = forms.CharField(required=False, label="Harmful if the answer contains",
                                  help_text="Optional harm spec: a string whose presence in an answer is the harm.")

    def clean_retrieved(self) -> list[str]:
        ids = [x for x in re.split(r"[\s,]+", self.cleaned_data["retrieved"]) if x]
        if not ids:
            raise forms.ValidationError("list at least one memory id")
        return ids

    def harm(self) -> dict[str, Any] | None:
        target = self.cleaned_data.get("harm_target")
        return {"type": "contains", "target": target} if target else None


class AuditStartForm(forms.Form):
    """Start an audit. The agent's and the default harm's settings are rendered from the
    registries (``engine.agents.CONNECTORS``, ``engine.harm.HARMS``): a connector's on-form
    settings are fields named after the setting, a harm's ``harm_<setting>``."""

    incidents = forms.ModelMultipleChoiceField(queryset=Incident.objects.none(), widget=forms.CheckboxSelectMultiple,
                                               label="Incidents")
    connector = forms.ChoiceField(choices=(), initial="builtin-vote", label="Agent",
                                  help_text="A simulation, this server's LLM, or an agent endpoint your "
                                            "organization's admin registered.")
    top_k = forms.IntegerField(min_value=1, max_value=100, initial=5, label="Retrieval k")
    alpha = forms.FloatField(min_value=0, max_value=1, initial=0.6, label="α (CMIS weight in DS)",
                             widget=forms.NumberInput(attrs={"step": "0.05"}))
    fit_alpha = forms.BooleanField(required=False, initial=True, label="Fit α to this store",
                                   help_text="Weigh CAS by how well it separates this store's causal memories "
                                             "from clean ones (at most 1 − α; none when no better than chance).")
    budget = forms.IntegerField(required=False, min_value=1, label="Agent-call budget",
                                help_text="Most agent calls the whole audit may make (replays, verification, "
                                          "collateral check); empty = 600, or 120 per incident when more. "
                                          "Stages it cuts short are named in the results.")
    top_n = forms.IntegerField(required=False, min_value=1, label="Batch size (top N)",
                               help_text="Empty = every suspect with DS ≥ the threshold.")
    harm_type = forms.ChoiceField(choices=(), required=False, initial="contains", label="Default harm",
                                  help_text="For incidents without their own harm spec.")

    def __init__(self, *args, incidents, endpoints=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["incidents"].queryset = incidents
        self.fields["incidents"].label_from_instance = lambda i: f"{i.external_id} — {i.query[:90]}"
        self.fields["connector"].choices = agent_choices() + [
            (ENDPOINT_PREFIX + ep.name, f"{ep.name} — registered {ep.get_connector_display()} endpoint")
            for ep in endpoints]
        self.agent_settings = {name: [st for st in cls.settings if st.form and st.analyst]
                               for name, _ in agent_choices() for cls in [CONNECTORS[name]]}
        for name, settings in self.agent_settings.items():
            for st in settings:
                if st.name in self.fields:
                    raise ValueError(f"connector {name!r}: setting {st.name!r} clashes with a form field")
                self.fields[st.name] = _form_field(st)
        self.harm_settings = {t: [st for st in cls.settings if st.form] for t, cls in HARMS.items()}
        self.fields["harm_type"].choices = [(t, cls.title) for t, cls in HARMS.items()]
        for settings in self.harm_settings.values():
            for st in settings:
                self.fields.setdefault(f"harm_{st.name}", _form_field(st))

    def connector_fields(self) -> list[tuple[str, list]]:
        """(connector, its bound fields) for the page: shown when that connector is picked."""
        return [(name, [self[st.name] for st in settings]) for name, settings in self.agent_settings.items()
                if settings]

    def harm_fields(self) -> list[tuple[str, list]]:
        return [(HARMS[t].title, [self[f"harm_{st.name}"] for st in settings])
                for t, settings in self.harm_settings.items() if settings]

    def clean(self):
        data = super().clean()
        cls = CONNECTORS.get(data.get("connector"))
        for st in self.agent_settings.get(data.get("connector"), []):
            # A connector picked without an endpoint needs its URL from the deployment, and what
            # the deployment cannot know (the model) from the analyst.
            if (st.required or cls.url_setting) and data.get(st.name) in (None, ""):
                self.add_error(st.name, f"required for {cls.analyst_noun or cls.title}")
        return data

    def _harm(self, d: dict[str, Any]) -> dict[str, Any] | None:
        t = d.get("harm_type") or "contains"
        given = {st.name: d[f"harm_{st.name}"] for st in self.harm_settings.get(t, [])
                 if d.get(f"harm_{st.name}") not in (None, "")}
        return {"type": t, **given} if given else None

    def audit_settings(self) -> dict[str, Any]:
        """The raw settings for ``services.audit_settings_clean`` (which fills in the rest)."""
        d = self.cleaned_data
        if d["connector"].startswith(ENDPOINT_PREFIX):
            agent: dict[str, Any] = {"endpoint": d["connector"][len(ENDPOINT_PREFIX):], "top_k": d["top_k"]}
        else:
            agent = {"connector": d["connector"], "top_k": d["top_k"]}
            agent.update({st.name: d[st.name] for st in self.agent_settings.get(d["connector"], [])
                          if d.get(st.name) not in (None, "")})
        raw: dict[str, Any] = {"agent": agent, "alpha": d["alpha"], "fit_alpha": bool(d.get("fit_alpha")),
                               "budget": d.get("budget"),
                               "top_n": d.get("top_n")}
        harm = self._harm(d)
        if harm is not None:
            raw["harm"] = harm
        return raw


DECISIONS = [("approve", "Approve"), ("refute", "Refute")]


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=DECISIONS)
    reason = forms.CharField(max_length=2000, strip=True,
                             error_messages={"required": "a reason is required"})


class BulkDecisionForm(DecisionForm):
    proposals = forms.TypedMultipleChoiceField(coerce=int, choices=(), error_messages={
        "required": "select at least one proposal"})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Any integers pass here; the service answers per id (another org's ids are "not found").
        self.fields["proposals"].valid_value = lambda v: str(v).isdigit()


class AgentEndpointForm(forms.Form):
    """Register or edit an agent endpoint (org admins). The secret is write-only: the field is
    never filled in again, and leaving it empty on an edit keeps the stored one."""

    name = forms.SlugField(max_length=64, help_text="What analysts pick when they start an audit.")
    connector = forms.ChoiceField(choices=endpoint_connector_choices)
    base_url = forms.CharField(max_length=500, label="URL",
                               help_text="openai-chat: the API root (…/v1). webhook: the URL replays are POSTed to.")
    model = forms.CharField(max_length=200, required=False, help_text="openai-chat: the model name.")
    options = forms.JSONField(required=False, initial=dict, label="Options (JSON)",
                              help_text="Not secret: temperature, max_tokens, timeout, retries, ...")
    secret = forms.CharField(required=False, max_length=4096, label="Secret",
                             widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
                             help_text="API key or bearer token; stored encrypted, never shown again.")
    clear_secret = forms.BooleanField(required=False, label="Remove the stored secret")
