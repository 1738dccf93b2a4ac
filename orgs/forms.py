from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from orgs import ratelimit
from orgs.models import Role


class LoginForm(AuthenticationForm):
    error_messages = {
        "invalid_login": "That username and password do not match an account. Both are case-sensitive.",
        "inactive": "This account is disabled. Ask your organization's admin.",
    }

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        address = ratelimit.client_address(self.request) if self.request else ""
        if ratelimit.login_blocked(username, address):
            minutes = max(1, settings.LOGIN_LOCKOUT_SECONDS // 60)
            raise ValidationError(
                f"Too many failed attempts for this account from your address. Try again in {minutes} minutes.",
                code="throttled",
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            ratelimit.login_failed(username, address)
            raise
        ratelimit.login_succeeded(username, address)
        return cleaned


class InviteForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANALYST)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class ReviewPolicyForm(forms.Form):
    four_eyes = forms.BooleanField(
        required=False, label="Four-eyes review",
        help_text="On: a memory leaves recall only when a second person approves its proposal; the proposer, "
                  "and accounts the proposer invited recently, cannot approve it. Off: one person may propose and "
                  "approve, and stores that leave suspects out of recall do so on the proposal alone.")
