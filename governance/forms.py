"""Forms for the core pages."""

from django import forms

from governance.models import Role

ROLE_CHOICES = [(role.label, role.label.title()) for role in Role]


class InvitationForm(forms.Form):
    invitee = forms.CharField(max_length=254, label="Username or e-mail")
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class MemberRoleForm(forms.Form):
    member = forms.IntegerField(widget=forms.HiddenInput)
    role = forms.ChoiceField(choices=ROLE_CHOICES)


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
