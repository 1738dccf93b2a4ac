from django import forms
from django.contrib.auth.forms import AuthenticationForm

from orgs.models import Role


class LoginForm(AuthenticationForm):
    error_messages = {
        "invalid_login": "That username and password do not match an account. Both are case-sensitive.",
        "inactive": "This account is disabled. Ask your organization's admin.",
    }


class InviteForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANALYST)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
