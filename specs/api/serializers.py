"""API input and output shapes for specifications, versions, reviews and restart packages."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.api.serializers import NamedChoiceField
from specs.analysis.content import (
    KEY_HELP,
    KEY_MAX_LENGTH,
    MAX_TEXT_LENGTH,
    Alternative,
    Item,
    check_items,
    normalize_item,
)
from specs.formats.restart import INDICATORS, Indicator
from specs.models import (
    Consequence,
    ItemKind,
    ItemStatus,
    RestartPackage,
    Spec,
    SpecVersion,
    VersionStatus,
)
from specs.validators import validate_commit, validate_output_size
from traces.annotations.models import Divergence
from traces.models import Run, Session


class WorkspaceObjectField(serializers.PrimaryKeyRelatedField):
    """A primary key resolved inside the request's workspace only (others do not exist)."""

    def __init__(self, model, **kwargs):
        self.model = model
        kwargs.setdefault("queryset", model.objects.all())
        super().__init__(**kwargs)

    def get_queryset(self):
        return self.model.objects.filter(workspace=self.context["request"].workspace)


# --- items -------------------------------------------------------------------


class AlternativeSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=MAX_TEXT_LENGTH, trim_whitespace=False)
    evidence = serializers.CharField(
        max_length=MAX_TEXT_LENGTH,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        help_text="What supports this alternative. Required for open questions at submission.",
    )


class ItemSerializer(serializers.Serializer):
    key = serializers.CharField(
        max_length=KEY_MAX_LENGTH, help_text=f"Stable across versions. {KEY_HELP}"
    )
    kind = NamedChoiceField(choices=ItemKind.choices, enum_name="SpecItemKindEnum")
    text = serializers.CharField(max_length=MAX_TEXT_LENGTH, trim_whitespace=False)
    rationale = serializers.CharField(
        max_length=MAX_TEXT_LENGTH,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        help_text="Why; keep it where removing it would invite reversal.",
    )
    status = NamedChoiceField(
        choices=ItemStatus.choices,
        enum_name="SpecItemStatusEnum",
        required=False,
        default=ItemStatus.SETTLED,
    )
    alternatives = AlternativeSerializer(many=True, required=False, default=list)


def items_from_data(data: list[dict]) -> list[Item]:
    return [
        normalize_item(
            Item(
                key=entry["key"],
                kind=entry["kind"],
                text=entry["text"],
                rationale=entry.get("rationale", ""),
                status=entry.get("status", ItemStatus.SETTLED),
                alternatives=tuple(
                    Alternative(text=a["text"], evidence=a.get("evidence", ""))
                    for a in entry.get("alternatives", [])
                ),
            )
        )
        for entry in data
    ]


def item_errors(items: list[Item], *, for_submission: bool = False) -> dict | None:
    """Field errors keyed by item index (DRF's shape for nested lists), or None when valid."""
    problems = check_items(items, for_submission=for_submission).problems
    if not problems:
        return None
    errors: dict[str, dict] = {}
    for problem in problems:
        if problem.index is None:
            raise serializers.ValidationError(problem.message)
        target = errors.setdefault(str(problem.index), {})
        if problem.alternative is not None:
            target = target.setdefault("alternatives", {}).setdefault(str(problem.alternative), {})
        target.setdefault(problem.field, []).append(problem.message)
    return errors


class SourceSerializer(serializers.Serializer):
    trace_session = WorkspaceObjectField(Session, required=False, allow_null=True)
    run = WorkspaceObjectField(Run, required=False, allow_null=True)
    divergence = WorkspaceObjectField(
        Divergence,
        required=False,
        allow_null=True,
        help_text="A first-divergence mark (GET /api/v1/divergences/) this version answers.",
    )
    url = serializers.URLField(max_length=1000, required=False, allow_blank=True)
    label = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")

    def validate(self, attrs):
        given = [name for name in ("trace_session", "run", "divergence", "url") if attrs.get(name)]
        if len(given) != 1:
            raise serializers.ValidationError(
                "Give exactly one of trace_session, run, divergence or url for each source."
            )
        return attrs


class VersionContentSerializer(serializers.Serializer):
    note = serializers.CharField(
        max_length=10_000,
        required=False,
        allow_blank=True,
        default="",
        help_text="What changed and why.",
    )
    items = ItemSerializer(many=True)
    sources = SourceSerializer(many=True, required=False, default=list)

    def validate_items(self, value):
        items = items_from_data(value)
        errors = item_errors(items)
        if errors:
            raise serializers.ValidationError(errors)
        return items


class VersionCreateSerializer(VersionContentSerializer):
    supersedes = serializers.PrimaryKeyRelatedField(
        queryset=SpecVersion.objects.none(),
        allow_null=True,
        help_text="The current authoritative version's id, or null for a spec's first version.",
    )

    def __init__(self, *args, spec: Spec | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if spec is not None:
            self.fields["supersedes"].queryset = spec.versions.all()


class MarkdownImportSerializer(serializers.Serializer):
    markdown = serializers.CharField(
        trim_whitespace=False,
        max_length=2_000_000,
        help_text="See docs/specs.md for the structure.",
    )
    supersedes = serializers.PrimaryKeyRelatedField(
        queryset=SpecVersion.objects.none(), allow_null=True
    )
    note = serializers.CharField(max_length=10_000, required=False, allow_blank=True, default="")

    def __init__(self, *args, spec: Spec | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if spec is not None:
            self.fields["supersedes"].queryset = spec.versions.all()


class SubmitSerializer(serializers.Serializer):
    acknowledged_resolutions = serializers.ListField(
        child=serializers.CharField(max_length=KEY_MAX_LENGTH),
        required=False,
        default=list,
        help_text="Low consequence only: keys of the open questions this version resolves.",
    )


class ApproveSerializer(serializers.Serializer):
    acknowledged_resolutions = serializers.ListField(
        child=serializers.CharField(max_length=KEY_MAX_LENGTH),
        required=False,
        default=list,
        help_text="Every key this version resolves (unresolved → settled, or removed), exactly.",
    )
    comment = serializers.CharField(max_length=10_000, required=False, allow_blank=True, default="")


class RejectSerializer(serializers.Serializer):
    comment = serializers.CharField(
        max_length=10_000,
        error_messages={
            "required": "A rejection needs a comment: say what must change.",
            "blank": "A rejection needs a comment: say what must change.",
        },
    )


# --- output ------------------------------------------------------------------


class AlternativeOutputSerializer(serializers.Serializer):
    text = serializers.CharField()
    evidence = serializers.CharField()


class ItemOutputSerializer(serializers.Serializer):
    key = serializers.CharField()
    kind = NamedChoiceField(choices=ItemKind.choices, enum_name="SpecItemKindEnum")
    text = serializers.CharField()
    rationale = serializers.CharField()
    status = NamedChoiceField(choices=ItemStatus.choices, enum_name="SpecItemStatusEnum")
    alternatives = AlternativeOutputSerializer(many=True)


class SourceOutputSerializer(serializers.Serializer):
    kind = serializers.CharField()
    trace_session = serializers.IntegerField(source="trace_session_id", allow_null=True)
    run = serializers.IntegerField(source="run_id", allow_null=True)
    divergence = serializers.IntegerField(source="divergence_id", allow_null=True)
    url = serializers.CharField()
    label = serializers.CharField()


def _username(user) -> str | None:
    return user.get_username() if user is not None else None


class VersionSummarySerializer(serializers.ModelSerializer):
    spec_slug = serializers.CharField(source="spec.slug", read_only=True)
    supersedes_number = serializers.IntegerField(
        source="supersedes.number", default=None, read_only=True
    )
    status = NamedChoiceField(
        choices=VersionStatus.choices, enum_name="SpecVersionStatusEnum", read_only=True
    )
    author = serializers.SerializerMethodField()
    submitted_by = serializers.SerializerMethodField()
    reviewer = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = SpecVersion
        fields = [
            "id", "spec", "spec_slug", "number", "status", "supersedes", "supersedes_number",
            "fingerprint", "note", "author", "created_at", "updated_at", "submitted_by",
            "submitted_at", "reviewer", "decided_at", "review_comment",
            "acknowledged_resolutions", "superseded_at", "url",
        ]  # fmt: skip

    def get_author(self, version) -> str | None:
        return _username(version.author)

    def get_submitted_by(self, version) -> str | None:
        return _username(version.submitted_by)

    def get_reviewer(self, version) -> str | None:
        return _username(version.reviewer)

    def get_url(self, version) -> str:
        path = reverse("specs:version_detail", args=[version.workspace.slug, version.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class VersionSerializer(VersionSummarySerializer):
    items = serializers.SerializerMethodField()
    sources = SourceOutputSerializer(many=True, read_only=True)

    class Meta(VersionSummarySerializer.Meta):
        fields = [*VersionSummarySerializer.Meta.fields, "items", "sources"]

    @extend_schema_field(ItemOutputSerializer(many=True))
    def get_items(self, version) -> list[dict]:
        from specs.selectors import version_items

        return [item.as_dict() for item in version_items(version=version)]


class AuthoritativeRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    number = serializers.IntegerField()
    fingerprint = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)


class SpecSerializer(serializers.ModelSerializer):
    consequence = NamedChoiceField(
        choices=Consequence.choices, enum_name="SpecConsequenceEnum", read_only=True
    )
    owner = serializers.SerializerMethodField()
    authoritative_version = serializers.SerializerMethodField()
    version_count = serializers.IntegerField(read_only=True)
    in_review_count = serializers.IntegerField(read_only=True)
    draft_count = serializers.IntegerField(read_only=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = Spec
        fields = [
            "id", "title", "slug", "summary", "project", "consequence", "owner",
            "authoritative_version",
            "version_count", "in_review_count", "draft_count", "created_at", "updated_at", "url",
        ]  # fmt: skip

    def get_owner(self, spec) -> str | None:
        return _username(spec.owner)

    @extend_schema_field(AuthoritativeRefSerializer(allow_null=True))
    def get_authoritative_version(self, spec) -> dict | None:
        if getattr(spec, "authoritative_id", None) is None:
            return None
        return {
            "id": spec.authoritative_id,
            "number": spec.authoritative_number,
            "fingerprint": spec.authoritative_fingerprint,
            "decided_at": spec.authoritative_at,
        }

    def get_url(self, spec) -> str:
        path = reverse("specs:spec_detail", args=[spec.workspace.slug, spec.slug])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class UsernameField(serializers.CharField):
    """A workspace member named by username."""

    def to_internal_value(self, data):
        from django.contrib.auth import get_user_model

        username = super().to_internal_value(data)
        user = (
            get_user_model()
            .objects.filter(
                username=username, memberships__workspace=self.context["request"].workspace
            )
            .first()
        )
        if user is None:
            raise serializers.ValidationError(f"'{username}' is not a member of this workspace.")
        return user


class SpecCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    slug = serializers.SlugField(
        max_length=80,
        required=False,
        allow_blank=True,
        help_text="Defaults to the title, slugified.",
    )
    consequence = NamedChoiceField(
        choices=Consequence.choices,
        enum_name="SpecConsequenceEnum",
        help_text="high: a reviewer who is not the author approves each version; "
        "low: a version becomes authoritative when an editor submits it.",
    )
    summary = serializers.CharField(max_length=10_000, required=False, allow_blank=True, default="")
    owner = UsernameField(required=False, help_text="A member's username; defaults to you.")
    project = serializers.CharField(
        max_length=1000,
        required=False,
        allow_blank=True,
        default="",
        help_text="The working directory it governs; compactions of sessions there are audited.",
    )


class SpecUpdateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False)
    consequence = NamedChoiceField(
        choices=Consequence.choices, enum_name="SpecConsequenceEnum", required=False
    )
    summary = serializers.CharField(max_length=10_000, required=False, allow_blank=True)
    owner = UsernameField(required=False)
    project = serializers.CharField(max_length=1000, required=False, allow_blank=True)


class DiffChangeSerializer(serializers.Serializer):
    key = serializers.CharField()
    before = ItemOutputSerializer()
    after = ItemOutputSerializer()
    fields = serializers.ListField(child=serializers.CharField())


class DiffSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    against = serializers.IntegerField(allow_null=True)
    retained = serializers.ListField(child=serializers.CharField())
    changed = DiffChangeSerializer(many=True)
    omitted = serializers.ListField(child=serializers.CharField())
    added = serializers.ListField(child=serializers.CharField())
    marked_unresolved = serializers.ListField(child=serializers.CharField())
    resolved = serializers.ListField(child=serializers.CharField())


# --- restart packages ----------------------------------------------------------


class RepositorySerializer(serializers.Serializer):
    remote = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    branch = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    commit = serializers.CharField(max_length=64, validators=[validate_commit])


class VerificationSerializer(serializers.Serializer):
    command = serializers.CharField(max_length=10_000)
    exit_status = serializers.IntegerField(min_value=-(2**31), max_value=2**31 - 1)
    commit = serializers.CharField(
        max_length=64,
        validators=[validate_commit],
        help_text="The commit the command ran against.",
    )
    output = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        validators=[validate_output_size],
        help_text="The raw output, verbatim (stored with its sha256; not a paraphrase).",
    )
    ran_at = serializers.DateTimeField(required=False, allow_null=True, default=None)


class DiscrepancySerializer(serializers.Serializer):
    claim = serializers.CharField(max_length=10_000, help_text="What an earlier summary claimed.")
    repository_state = serializers.CharField(
        max_length=10_000, help_text="What the repository shows. The repository wins."
    )
    source = serializers.CharField(
        max_length=1000, required=False, allow_blank=True, default="", help_text="Who claimed it."
    )


class HandoffSerializer(serializers.Serializer):
    repository = RepositorySerializer()
    completed_changes = serializers.ListField(
        child=serializers.CharField(max_length=10_000), required=False, default=list
    )
    changed_files = serializers.ListField(
        child=serializers.CharField(max_length=1000), required=False, default=list
    )
    current_failures = serializers.ListField(
        child=serializers.CharField(max_length=10_000), required=False, default=list
    )
    verifications = VerificationSerializer(many=True, required=False, default=list)
    discrepancies = DiscrepancySerializer(many=True, required=False, default=list)


class InstructionSerializer(serializers.Serializer):
    authoritative_sources = serializers.ListField(
        child=serializers.CharField(max_length=1000), required=False, default=list
    )
    next_action = serializers.CharField(max_length=10_000)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": [slug for slug in INDICATORS if slug != "other"]},
            {
                "type": "object",
                "properties": {
                    "slug": {"type": "string", "enum": list(INDICATORS)},
                    "note": {"type": "string"},
                },
                "required": ["slug"],
            },
        ]
    }
)
class IndicatorField(serializers.Field):
    """A slug, or {"slug", "note"}; "other" needs a note describing what was observed."""

    def to_internal_value(self, data):
        choices = ", ".join(INDICATORS)
        if isinstance(data, str):
            slug, note = data.strip(), ""
        elif isinstance(data, dict) and isinstance(data.get("slug"), str):
            slug, note = data["slug"].strip(), data.get("note") or ""
            if not isinstance(note, str):
                raise serializers.ValidationError("note must be text.")
        else:
            raise serializers.ValidationError(
                'Give an indicator slug, or {"slug": "other", "note": "what you observed"}.'
            )
        if slug not in INDICATORS:
            raise serializers.ValidationError(
                f"'{slug}' is not an indicator; use one of {choices}."
            )
        if slug == "other" and not note.strip():
            raise serializers.ValidationError(
                "An 'other' indicator needs a note saying what was observed."
            )
        return Indicator(slug=slug, note=note.strip())

    def to_representation(self, value):
        return {"slug": value.slug, "note": value.note}


class PackageCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    spec_version = WorkspaceObjectField(
        SpecVersion, help_text="An authoritative version's id; the package pins it."
    )
    handoff = HandoffSerializer()
    instruction = InstructionSerializer()
    indicators = serializers.ListField(child=IndicatorField(), required=False, default=list)
    trace_session = WorkspaceObjectField(
        Session, required=False, allow_null=True, default=None, help_text="The session it restarts."
    )


class PackageSummarySerializer(serializers.ModelSerializer):
    spec = serializers.CharField(source="spec_version.spec.slug", read_only=True)
    spec_version_number = serializers.IntegerField(source="spec_version.number", read_only=True)
    spec_fingerprint = serializers.CharField(source="spec_version.fingerprint", read_only=True)
    superseded = serializers.BooleanField(source="is_superseded", read_only=True)
    created_by = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = RestartPackage
        fields = [
            "id", "title", "spec", "spec_version", "spec_version_number", "spec_fingerprint",
            "superseded", "trace_session", "branch", "commit", "indicators", "created_by",
            "created_at", "url",
        ]  # fmt: skip

    def get_created_by(self, package) -> str | None:
        return _username(package.created_by)

    def get_url(self, package) -> str:
        path = reverse("specs:package_detail", args=[package.workspace.slug, package.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path
