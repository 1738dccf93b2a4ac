"""Forms of the audit pages: shapes only. ``audits.services`` validates meaning (incident files,
audit settings, review rules) and its errors are shown next to the fields they name."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from audits.engine.scenario import CONNECTORS
from audits.models import Incident
from ledger.models import Store

CONNECTOR_CHOICES = [
    ("builtin-vote", "Built-in vote (majority of the retrieved)"),
    ("builtin-reader", "Built-in reader (incident's candidates)"),
    ("openai-chat", "OpenAI-compatible chat"),
    ("webhook", "Webhook (your agent)"),
]
assert [c for c, _ in CONNECTOR_CHOICES] == list(CONNECTORS)
# What an analyst picks when starting an audit: a simulation, the deployment's own LLM, or an
# endpoint an org admin registered ("endpoint:<name>"). Never a URL or a secret.
AGENT_CHOICES = [
    ("builtin-vote", CONNECTOR_CHOICES[0][1]),
    ("builtin-reader", CONNECTOR_CHOICES[1][1]),
    ("openai-chat", "This server's LLM (OpenAI-compatible chat)"),
]
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
    incidents = forms.ModelMultipleChoiceField(queryset=Incident.objects.none(), widget=forms.CheckboxSelectMultiple,
                                               label="Incidents")
    connector = forms.ChoiceField(choices=AGENT_CHOICES, initial="builtin-vote", label="Agent",
                                  help_text="A simulation, this server's LLM, or an agent endpoint your "
                                            "organization's admin registered.")
    model = forms.CharField(required=False, label="Model", help_text="This server's LLM: model name.")
    top_k = forms.IntegerField(min_value=1, max_value=100, initial=5, label="Retrieval k")
    alpha = forms.FloatField(min_value=0, max_value=1, initial=0.6, label="α (CMIS weight in DS)",
                             widget=forms.NumberInput(attrs={"step": "0.05"}))
    budget = forms.IntegerField(required=False, min_value=1, label="Replay budget",
                                help_text="Most agent calls the counterfactual replays may use; empty = no limit.")
    top_n = forms.IntegerField(required=False, min_value=1, label="Batch size (top N)",
                               help_text="Empty = every suspect with DS ≥ the threshold.")
    harm_target = forms.CharField(required=False, label="Default harm: answer contains",
                                  help_text="For incidents without their own harm spec.")

    def __init__(self, *args, incidents, endpoints=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["incidents"].queryset = incidents
        self.fields["incidents"].label_from_instance = lambda i: f"{i.external_id} — {i.query[:90]}"
        self.fields["connector"].choices = AGENT_CHOICES + [
            (ENDPOINT_PREFIX + ep.name, f"{ep.name} — registered {ep.get_connector_display()} endpoint")
            for ep in endpoints]

    def clean(self):
        data = super().clean()
        if data.get("connector") == "openai-chat" and not data.get("model"):
            self.add_error("model", "required for this server's LLM")
        return data

    def audit_settings(self) -> dict[str, Any]:
        """The raw settings for ``services.audit_settings_clean`` (which fills in the rest)."""
        d = self.cleaned_data
        if d["connector"].startswith(ENDPOINT_PREFIX):
            agent: dict[str, Any] = {"endpoint": d["connector"][len(ENDPOINT_PREFIX):], "top_k": d["top_k"]}
        else:
            agent = {"connector": d["connector"], "top_k": d["top_k"]}
        if d["connector"] == "openai-chat":
            agent["model"] = d["model"]
        raw: dict[str, Any] = {"agent": agent, "alpha": d["alpha"], "budget": d.get("budget"),
                               "top_n": d.get("top_n")}
        if d.get("harm_target"):
            raw["harm"] = {"type": "contains", "target": d["harm_target"]}
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
    connector = forms.ChoiceField(choices=[c for c in CONNECTOR_CHOICES if c[0] in ("openai-chat", "webhook")])
    base_url = forms.CharField(max_length=500, label="URL",
                               help_text="openai-chat: the API root (…/v1). webhook: the URL replays are POSTed to.")
    model = forms.CharField(max_length=200, required=False, help_text="openai-chat: the model name.")
    options = forms.JSONField(required=False, initial=dict, label="Options (JSON)",
                              help_text="Not secret: temperature, max_tokens, timeout, retries, ...")
    secret = forms.CharField(required=False, max_length=4096, label="Secret",
                             widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
                             help_text="API key or bearer token; stored encrypted, never shown again.")
    clear_secret = forms.BooleanField(required=False, label="Remove the stored secret")
