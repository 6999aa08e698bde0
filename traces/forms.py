"""Forms for trace pages."""

from django import forms

from traces.formats import FORMATS
from traces.models import IdentityHandling, PreCompactAction


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


class HookPolicyForm(forms.Form):
    pre_compact_action = forms.ChoiceField(
        choices=PreCompactAction.choices,
        widget=forms.RadioSelect,
        label="Before a compaction above the qualified ECL",
        help_text="Claude Code's PreCompact hook, when the context is above the qualified "
        "effective context length of the session's model. A manual /compact is never blocked: "
        "it gets the suggestion.",
    )
    session_start_context = forms.BooleanField(
        required=False,
        label="Give the agent the operating limit and the specification's key at session start",
        help_text="Claude Code's SessionStart hook, as additional context: a few lines, sent at "
        "startup, resume, /clear and after each compaction.",
    )
    spec = forms.ChoiceField(
        required=False,
        label="Authoritative specification to restart from",
        help_text="Named in the suggestion, the additional context and the prefilled restart "
        "package. Empty: the one governing the session's project, else the workspace's only "
        "one with an authoritative version.",
    )

    def __init__(self, *args, specs=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["spec"].choices = [
            ("", "— the project's, else the only authoritative one —")
        ] + [(spec.slug, f"{spec.title} ({spec.slug})") for spec in specs]
