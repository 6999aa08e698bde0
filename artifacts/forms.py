"""Forms for the artifact pages: the reading controls and the workspace policy."""

from __future__ import annotations

from django import forms
from django.template.defaultfilters import filesizeformat

from artifacts.content.redaction import DEFAULT_RULES
from artifacts.models import ArtifactPolicy


class TailForm(forms.Form):
    lines = forms.IntegerField(min_value=1, initial=50, label="Last lines")


class SearchForm(forms.Form):
    q = forms.CharField(max_length=1000, strip=False, label="Search")
    regex = forms.BooleanField(required=False, label="Regular expression")
    ignore_case = forms.BooleanField(required=False, label="Ignore case")
    context = forms.IntegerField(min_value=0, initial=2, required=False, label="Context lines")


class RangeForm(forms.Form):
    start_line = forms.IntegerField(min_value=1, label="From line")
    end_line = forms.IntegerField(min_value=1, label="To line")

    def clean(self):
        data = super().clean()
        start, end = data.get("start_line"), data.get("end_line")
        if start and end and end < start:
            self.add_error("end_line", "Must be at or after the first line.")
        return data


class DeleteForm(forms.Form):
    reason = forms.CharField(max_length=500, required=False, label="Reason (kept on the tombstone)")


class PolicyForm(forms.ModelForm):
    enabled_rules = forms.MultipleChoiceField(
        choices=[(rule.name, f"{rule.name} — {rule.description}") for rule in DEFAULT_RULES],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Built-in redaction rules",
        help_text="Each is replaced by [REDACTED:<rule>] before anything is stored.",
    )
    custom_rules_text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        label="Custom redaction rules",
        help_text="One per line: name: RE2 pattern. Bound every repetition ({1,200}, not + or *); "
        "a (?P<secret>…) group limits what is replaced.",
    )

    class Meta:
        model = ArtifactPolicy
        fields = [
            "retention_days",
            "max_artifact_bytes",
            "max_read_lines",
            "max_read_bytes",
            "max_search_matches",
            "max_search_context",
            "search_timeout_ms",
            "max_content_bytes",
        ]

    BYTE_FIELDS = ("max_artifact_bytes", "max_read_bytes", "max_content_bytes")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        policy = self.instance
        for name in self.BYTE_FIELDS:
            field = self.fields[name]
            field.help_text = f"{field.help_text} Now {filesizeformat(getattr(policy, name))}."
        disabled = set(policy.disabled_rules or [])
        self.fields["enabled_rules"].initial = [
            rule.name for rule in DEFAULT_RULES if rule.name not in disabled
        ]
        self.fields["custom_rules_text"].initial = "\n".join(
            f"{rule['name']}: {rule['pattern']}" for rule in policy.custom_rules or []
        )

    def clean_custom_rules_text(self):
        rules = []
        for number, line in enumerate(self.cleaned_data["custom_rules_text"].splitlines(), 1):
            if not line.strip():
                continue
            name, sep, pattern = line.partition(":")
            if not sep or not pattern.strip():
                raise forms.ValidationError(f"Line {number}: write it as name: pattern.")
            rules.append({"name": name.strip(), "pattern": pattern.strip()})
        return rules

    def changes(self) -> dict:
        data = {name: self.cleaned_data[name] for name in self.Meta.fields}
        enabled = set(self.cleaned_data["enabled_rules"])
        data["disabled_rules"] = [rule.name for rule in DEFAULT_RULES if rule.name not in enabled]
        data["custom_rules"] = self.cleaned_data["custom_rules_text"]
        return data
