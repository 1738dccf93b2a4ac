from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from orgs import ratelimit
from orgs.models import NotificationEvent, Role


class ThrottledLoginMixin:
    """Refuses a login attempt while its (username, address) or its password is throttled
    (orgs.ratelimit); counts failures. Used by our login page and Django admin's."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        password = self.cleaned_data.get("password") or ""
        address = ratelimit.client_address(self.request) if self.request else ""
        if ratelimit.login_blocked(username, address) or ratelimit.password_blocked(password):
            minutes = max(1, settings.LOGIN_LOCKOUT_SECONDS // 60)
            raise ValidationError(
                f"Too many failed attempts. Try again in {minutes} minutes.",
                code="throttled",
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            ratelimit.login_failed(username, address)
            ratelimit.password_failed(password)
            raise
        ratelimit.login_succeeded(username, address)
        return cleaned


class LoginForm(ThrottledLoginMixin, AuthenticationForm):
    error_messages = {
        "invalid_login": "That username and password do not match an account. Both are case-sensitive.",
        "inactive": "This account is disabled. Ask your organization's admin.",
    }


class AdminLoginForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass


class InviteForm(forms.Form):
    username = forms.CharField(max_length=150, required=False,
                               help_text="An existing account's username, or the one a new person will get.")
    email = forms.EmailField(required=False, help_text="The link is also emailed here.")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANALYST)

    def clean(self):
        cleaned = super().clean()
        if not (cleaned.get("username") or "").strip() and not (cleaned.get("email") or "").strip():
            raise ValidationError("Give the invitee's username or email address (or both).")
        return cleaned


class InviteSignupForm(forms.Form):
    """A new account from an invitation: the invitee picks their own password."""

    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))
    password2 = forms.CharField(label="Password again",
                                widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("password1") and cleaned.get("password1") != cleaned.get("password2"):
            self.add_error("password2", "The two passwords differ.")
        return cleaned


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class ReviewPolicyForm(forms.Form):
    four_eyes = forms.BooleanField(
        required=False, label="Four-eyes review",
        help_text="On: a memory leaves recall only when a second person approves its proposal; the proposer, "
                  "and accounts the proposer invited recently, cannot approve it. Off: one person may propose and "
                  "approve, and stores that leave suspects out of recall do so on the proposal alone.")
class WebhookForm(forms.Form):
    url = forms.URLField(max_length=500, label="Receiver URL", assume_scheme="https",
                         help_text="http(s) only. Each POST carries X-MemAudit-Signature (HMAC-SHA256).")
    events = forms.MultipleChoiceField(choices=NotificationEvent.choices, widget=forms.CheckboxSelectMultiple,
                                       initial=NotificationEvent.values)


class EmailNotificationsForm(forms.Form):
    email_recipients = forms.CharField(required=False, label="Email to", widget=forms.Textarea(attrs={"rows": 2}),
                                       help_text="Addresses, one per line or comma-separated.")
    email_events = forms.MultipleChoiceField(required=False, choices=NotificationEvent.choices,
                                             widget=forms.CheckboxSelectMultiple, label="Events")


def add_validation_errors(form, exc: ValidationError) -> None:
    """Put a service's ValidationError on the form: per field where it names one, else on the form."""
    if hasattr(exc, "error_dict"):
        for field, errs in exc.message_dict.items():
            for err in errs:
                form.add_error(field if field in form.fields else None, err)
    else:
        for err in exc.messages:
            form.add_error(None, err)
