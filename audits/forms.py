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
    connector = forms.ChoiceField(choices=CONNECTOR_CHOICES, initial="builtin-vote", label="Agent connector")
    base_url = forms.URLField(required=False, label="Base URL", assume_scheme="http",
                              help_text="openai-chat: the endpoint's /v1 URL (empty = the server's LLM_BASE_URL).")
    model = forms.CharField(required=False, label="Model", help_text="openai-chat: model name.")
    url = forms.URLField(required=False, label="Webhook URL", assume_scheme="http")
    top_k = forms.IntegerField(min_value=1, max_value=100, initial=5, label="Retrieval k")
    alpha = forms.FloatField(min_value=0, max_value=1, initial=0.6, label="α (CMIS weight in DS)",
                             widget=forms.NumberInput(attrs={"step": "0.05"}))
    budget = forms.IntegerField(required=False, min_value=1, label="Replay budget",
                                help_text="Most agent calls the counterfactual replays may use; empty = no limit.")
    top_n = forms.IntegerField(required=False, min_value=1, label="Batch size (top N)",
                               help_text="Empty = every suspect with DS ≥ the threshold.")
    harm_target = forms.CharField(required=False, label="Default harm: answer contains",
                                  help_text="For incidents without their own harm spec.")

    def __init__(self, *args, incidents, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["incidents"].queryset = incidents
        self.fields["incidents"].label_from_instance = lambda i: f"{i.external_id} — {i.query[:90]}"

    def clean(self):
        data = super().clean()
        connector = data.get("connector")
        if connector == "webhook" and not data.get("url"):
            self.add_error("url", "required for the webhook connector")
        if connector == "openai-chat" and not data.get("model"):
            self.add_error("model", "required for the openai-chat connector")
        return data

    def audit_settings(self) -> dict[str, Any]:
        """The raw settings for ``services.audit_settings_clean`` (which fills in the rest)."""
        d = self.cleaned_data
        agent: dict[str, Any] = {"connector": d["connector"], "top_k": d["top_k"]}
        if d["connector"] == "openai-chat":
            if d.get("base_url"):
                agent["base_url"] = d["base_url"]
            agent["model"] = d["model"]
        if d["connector"] == "webhook":
            agent["url"] = d["url"]
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
