"""Query-string filters of the case-work lists (review queue, audits, suspects, incidents) and
the note / assignment forms. A bad value is a form error shown above the list, never a 500."""

from __future__ import annotations

from django import forms

from audits.models import AuditRun
from ledger.models import EpistemicLabel

MEMORY_STATE_CHOICES = [("", "Any state"), ("none", "Unlabelled")] + list(EpistemicLabel.Label.choices)


class _ScoreRange(forms.Form):
    ds_min = forms.FloatField(required=False, min_value=0, max_value=1, label="DS ≥",
                              widget=forms.NumberInput(attrs={"step": "0.01"}))
    ds_max = forms.FloatField(required=False, min_value=0, max_value=1, label="DS ≤",
                              widget=forms.NumberInput(attrs={"step": "0.01"}))

    def clean(self):
        data = super().clean()
        lo, hi = data.get("ds_min"), data.get("ds_max")
        if lo is not None and hi is not None and lo > hi:
            self.add_error("ds_max", "must be at least the minimum DS")
        return data


def _store_field(stores) -> forms.TypedChoiceField:
    return forms.TypedChoiceField(required=False, coerce=int, empty_value=None, label="Store",
                                  choices=[("", "Any store")] + [(s.pk, s.name) for s in stores])


class QueueFilterForm(_ScoreRange):
    state = forms.ChoiceField(required=False, label="Proposals", initial="open", choices=[
        ("open", "Open"), ("applying", "Applying"), ("approved", "Approved"), ("refuted", "Refuted"), ("all", "All")])
    audit = forms.IntegerField(required=False, min_value=1, label="Audit #")
    assignee = forms.ChoiceField(required=False, label="Assignee")
    memory_state = forms.ChoiceField(required=False, choices=MEMORY_STATE_CHOICES, label="Memory state")

    def __init__(self, *args, stores=(), reviewers=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["store"] = _store_field(stores)
        self.fields["assignee"].choices = [("", "Anyone"), ("me", "My queue"), ("none", "Unassigned")] + [
            (str(m.user_id), m.user.get_username()) for m in reviewers]
        self.order_fields(["state", "assignee", "store", "audit", "memory_state", "ds_min", "ds_max"])


class AuditFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, label="Status",
                               choices=[("", "Any status")] + list(AuditRun.Status.choices))

    def __init__(self, *args, stores=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["store"] = _store_field(stores)


class IncidentFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search",
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "Id or question"}))

    def __init__(self, *args, stores=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["store"] = _store_field(stores)


class SuspectFilterForm(_ScoreRange):
    q = forms.CharField(required=False, max_length=200, label="Search",
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "Id or text"}))
    memory_state = forms.ChoiceField(required=False, choices=MEMORY_STATE_CHOICES, label="Memory state")
    in_batch = forms.ChoiceField(required=False, label="Batch",
                                 choices=[("", "In or out"), ("yes", "In the batch"), ("no", "Not in the batch")])


class NoteForm(forms.Form):
    body = forms.CharField(label="Note", max_length=10_000, widget=forms.Textarea(attrs={
        "rows": 3, "placeholder": "What you checked and found (markdown: *emphasis*, `code`, - lists, [links](https://…))"}))


class AssignForm(forms.Form):
    """``assignee``: a user id, "me", or empty to unassign."""

    assignee = forms.CharField(required=False, max_length=20)

    def clean_assignee(self) -> str:
        v = (self.cleaned_data.get("assignee") or "").strip()
        if v and v != "me" and not v.isdigit():
            raise forms.ValidationError("Choose a reviewer (an id), “me”, or nobody.")
        return v

