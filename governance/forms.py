"""Forms for the core pages."""

from django import forms

from governance.models import Role


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=[(role.label, role.label.title()) for role in Role])


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, required=False, help_text="What the token is for, e.g. 'CI uploader'."
    )
    run_id = forms.CharField(
        max_length=200,
        required=False,
        label="Run scope",
        help_text="Optional: limit the token to reading this run's artifacts.",
    )
