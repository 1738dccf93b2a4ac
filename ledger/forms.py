"""Forms of the ledger pages: they check shapes only; the services decide everything else."""

from __future__ import annotations

from django import forms

from interchange.importers import MEMORIES, formats
from ledger.models import EpistemicLabel, Store
from ledger.store_selectors import MEMORY_STATES
from ledger.ui_selectors import LEAF_KINDS


class StoreCreateForm(forms.ModelForm):
    class Meta:
        model = Store
        # No four-eyes here: it is the organization's review policy, set by an org admin.
        fields = ["name", "slug", "description", "exclude_suspect"]
        labels = {"exclude_suspect": "Leave poison suspects out of recall"}
        help_texts = {"slug": "Optional; made from the name when empty.",
                      "exclude_suspect": "Applies only where the organization has four-eyes review off; with it "
                                         "on, a suspect stays in recall until a second person approves."}
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["slug"].required = False


def _format_choices() -> list[tuple[str, str]]:
    return [("", "Detect from the file")] + [(f.name, f.title) for f in formats(MEMORIES)]


class UploadForm(forms.Form):
    file = forms.FileField(label="File", help_text="Any listed format: MemAudit JSONL/JSON/CSV, mem0, LangGraph, Letta.")
    format = forms.ChoiceField(label="Format", required=False, choices=_format_choices,
                               help_text="Leave on detect unless the file is recognised wrongly.")


STATE_CHOICES = [("", "Any state")] + [(s, "Unlabelled" if s == "none" else s.replace("_", " ").capitalize())
                                       for s in MEMORY_STATES]
LABEL_CHOICES = [("", "Any label")] + list(EpistemicLabel.Label.choices)


class MemoryFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", widget=forms.TextInput(
        attrs={"type": "search", "placeholder": "Text or id"}))
    state = forms.ChoiceField(required=False, choices=STATE_CHOICES, label="State")
    label = forms.ChoiceField(required=False, choices=LABEL_CHOICES, label="Ever labelled")
    weight_min = forms.FloatField(required=False, min_value=0, label="Weight ≥",
                                  widget=forms.NumberInput(attrs={"step": "0.01"}))
    weight_max = forms.FloatField(required=False, min_value=0, label="Weight ≤",
                                  widget=forms.NumberInput(attrs={"step": "0.01"}))

    def clean(self):
        data = super().clean()
        lo, hi = data.get("weight_min"), data.get("weight_max")
        if lo is not None and hi is not None and lo > hi:
            self.add_error("weight_max", "must be at least the minimum weight")
        return data


class TokenCreateForm(forms.Form):
    store = forms.TypedChoiceField(coerce=int, choices=())
    name = forms.CharField(max_length=100)
    expires_in_days = forms.TypedChoiceField(
        coerce=int, label="Expires in", initial=90,
        choices=[(7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year")])

    def __init__(self, *args, stores=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["store"].choices = [(s.pk, s.name) for s in stores]


class LedgerFilterForm(forms.Form):
    """The ledger page's log filters (issue 15)."""

    kind = forms.ChoiceField(required=False, label="Entry", choices=[("", "Any entry")] + [
        (k, k.replace("_", " ")) for k in LEAF_KINDS])
    memory = forms.CharField(required=False, max_length=300, label="Memory", widget=forms.TextInput(
        attrs={"type": "search", "placeholder": "id or store/id"}))
