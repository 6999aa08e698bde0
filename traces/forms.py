"""Forms for trace pages."""

from django import forms

from traces.formats import FORMATS
from traces.models import IdentityHandling


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Django's documented pattern for a multiple-file field."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if not data:
            single(None, initial)  # raises "This field is required." when it is
            return []
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)]


class UploadForm(forms.Form):
    files = MultipleFileField(
        label="Transcript files or archives",
        help_text=(
            "Claude Code session .jsonl files (with subagents/ and .meta.json sidecars), Codex "
            "rollout-*.jsonl files, OTLP/JSON files, or a .zip / .tar.gz of a whole "
            "~/.claude/projects or ~/.codex/sessions folder."
        ),
    )
    format = forms.ChoiceField(
        choices=[("auto", "Detect automatically"), *[(f, f) for f in FORMATS]],
        initial="auto",
        help_text="Leave on automatic unless detection picks the wrong format.",
    )


class TelemetryPolicyForm(forms.Form):
    identity = forms.ChoiceField(
        choices=IdentityHandling.choices,
        widget=forms.RadioSelect,
        label="Identity attributes",
        help_text="user.email, user.account_uuid, user.account_id, user.id and organization.id, "
        "wherever an OTLP request carries them (resource, record, data point or span).",
    )
