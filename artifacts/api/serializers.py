"""Artifact API shapes: the write metadata, the pointer, excerpts and search results."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from artifacts.content.tokens import ASCII_BYTES_PER_TOKEN, NON_ASCII_BYTES_PER_TOKEN
from artifacts.models import Artifact, ArtifactRead, ArtifactState, ArtifactWriteFailure

ESTIMATOR = (
    f"estimated: ASCII bytes / {ASCII_BYTES_PER_TOKEN:g} + non-ASCII bytes / "
    f"{NON_ASCII_BYTES_PER_TOKEN:g}"
)


class AwareDateTimeField(serializers.DateTimeField):
    default_error_messages = {
        "naive": "Include a timezone offset, e.g. 2025-01-31T12:00:00Z.",
    }

    def to_internal_value(self, value):
        if isinstance(value, str) and value.strip():
            from django.utils.dateparse import parse_datetime

            try:
                parsed = parse_datetime(value.strip())
            except ValueError:
                parsed = None
            if parsed is not None and parsed.tzinfo is None:
                self.fail("naive")
        return super().to_internal_value(value)


class WriteInputSerializer(serializers.Serializer):
    """The metadata of a write: headers for a raw body, form fields for multipart."""

    run_id = serializers.CharField(max_length=200, help_text="The run this output belongs to.")
    tool_call_id = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="",
        help_text="The tool call that produced it; with run_id and the content it makes "
        "retries idempotent.",
    )  # fmt: skip
    command = serializers.CharField(max_length=4000, help_text="Command line or tool name.")
    exit_status = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=-(2**31), max_value=2**31 - 1
    )
    complete = serializers.BooleanField(
        required=False, default=True, help_text="false when the output was truncated."
    )
    dropped_bytes = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=0,
        help_text="With complete=false: how many bytes were dropped before sending.",
    )  # fmt: skip
    dropped_lines = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=0,
        help_text="With complete=false: how many lines were dropped before sending.",
    )  # fmt: skip
    started_at = AwareDateTimeField(required=False, allow_null=True, default=None)
    finished_at = AwareDateTimeField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        if attrs.get("complete", True) and (
            attrs.get("dropped_bytes") is not None or attrs.get("dropped_lines") is not None
        ):
            raise serializers.ValidationError(
                {"dropped_bytes": "Only for truncated output: send complete=false as well."}
            )
        started, finished = attrs.get("started_at"), attrs.get("finished_at")
        if started and finished and finished < started:
            raise serializers.ValidationError({"finished_at": "Is before started_at."})
        return attrs


class MultipartWriteSerializer(WriteInputSerializer):
    file = serializers.FileField(help_text="The output to store.")


class ArtifactSerializer(serializers.ModelSerializer):
    """The pointer: enough to decide whether loading more is worth its cost."""

    url = serializers.SerializerMethodField()
    page_url = serializers.SerializerMethodField()
    bytes = serializers.IntegerField(source="size_bytes")
    lines = serializers.IntegerField(source="line_count")
    estimated_tokens = serializers.IntegerField(help_text=ESTIMATOR)
    token_estimator = serializers.SerializerMethodField()
    redactions = serializers.IntegerField(
        source="redaction_count", help_text="How many secrets were replaced before storing."
    )
    redactions_by_rule = serializers.DictField(child=serializers.IntegerField())
    state = serializers.ChoiceField(
        choices=ArtifactState.choices,
        source="current_state",
        read_only=True,
        help_text="available, expired or deleted, as of this response: expired from expires_at "
        "on, even before the purge has run.",
    )
    status = serializers.CharField(help_text="available, truncated, expired or deleted.")
    gone_at = serializers.DateTimeField(
        source="gone_since", allow_null=True, help_text="When it expired or was deleted."
    )
    links = serializers.SerializerMethodField()

    class Meta:
        model = Artifact
        fields = [
            "id", "url", "page_url", "run_id", "tool_call_id", "command", "exit_status",
            "started_at", "finished_at", "bytes", "lines", "estimated_tokens",
            "token_estimator", "sha256", "complete", "dropped_bytes", "dropped_lines",
            "redactions", "redactions_by_rule", "expires_at", "created_at", "state", "status",
            "gone_at", "delete_reason", "links",
        ]  # fmt: skip

    def _absolute(self, path: str) -> str:
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    def get_url(self, artifact) -> str:
        return self._absolute(reverse("artifact-detail", args=[artifact.pk]))

    def get_page_url(self, artifact) -> str:
        return self._absolute(
            reverse("artifacts:detail", args=[artifact.workspace.slug, artifact.pk])
        )

    def get_token_estimator(self, artifact) -> str:
        return ESTIMATOR

    def get_links(self, artifact) -> dict[str, str]:
        if artifact.current_state != "available":
            return {}
        return {
            name: self._absolute(reverse(f"artifact-{name}", args=[artifact.pk]))
            for name in ("tail", "head", "range", "search", "content")
        }


class ExcerptSerializer(serializers.Serializer):
    """Bytes start_byte..end_byte (end exclusive) = lines start_line..end_line (inclusive)."""

    artifact_id = serializers.UUIDField()
    artifact_sha256 = serializers.CharField()
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    start_byte = serializers.IntegerField()
    end_byte = serializers.IntegerField(help_text="Exclusive.")
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField(help_text="sha256 of exactly these bytes.")
    clipped = serializers.BooleanField(
        help_text="True when a very long line was cut to a window around the match."
    )
    text = serializers.CharField(help_text="The bytes as UTF-8 (invalid bytes replaced).")


def excerpt_data(artifact: Artifact, excerpt) -> dict:
    return {
        "artifact_id": artifact.pk,
        "artifact_sha256": artifact.sha256,
        "start_line": excerpt.start_line,
        "end_line": excerpt.end_line,
        "start_byte": excerpt.start_byte,
        "end_byte": excerpt.end_byte,
        "bytes": excerpt.bytes,
        "sha256": excerpt.sha256,
        "clipped": excerpt.clipped,
        "text": excerpt.text,
    }


class ReadSerializer(ExcerptSerializer):
    mode = serializers.CharField()
    artifact_lines = serializers.IntegerField()
    artifact_bytes = serializers.IntegerField()


class SearchMatchSerializer(serializers.Serializer):
    line = serializers.IntegerField(help_text="1-based line where the match starts.")
    start_byte = serializers.IntegerField()
    end_byte = serializers.IntegerField(help_text="Exclusive.")
    excerpt = ExcerptSerializer()


class SearchSerializer(serializers.Serializer):
    artifact_id = serializers.UUIDField()
    artifact_sha256 = serializers.CharField()
    q = serializers.CharField()
    regex = serializers.BooleanField()
    ignore_case = serializers.BooleanField()
    match_count = serializers.IntegerField()
    truncated = serializers.BooleanField(help_text="More matches exist than were returned.")
    stopped_by = serializers.CharField(
        allow_null=True, help_text="max_matches or max_read_bytes when truncated."
    )
    bytes_returned = serializers.IntegerField()
    matches = SearchMatchSerializer(many=True)


class LinesQuerySerializer(serializers.Serializer):
    lines = serializers.IntegerField(default=50, help_text="How many lines (default 50).")


class RangeQuerySerializer(serializers.Serializer):
    start_line = serializers.IntegerField(required=False, help_text="1-based, inclusive.")
    end_line = serializers.IntegerField(required=False, help_text="1-based, inclusive.")
    start_byte = serializers.IntegerField(required=False, help_text="0-based, inclusive.")
    end_byte = serializers.IntegerField(required=False, help_text="0-based, exclusive.")


class SearchQuerySerializer(serializers.Serializer):
    q = serializers.CharField(max_length=1000, trim_whitespace=False)
    regex = serializers.BooleanField(required=False, default=False)
    ignore_case = serializers.BooleanField(required=False, default=False)
    context = serializers.IntegerField(required=False, default=0, help_text="Lines each side.")
    max_matches = serializers.IntegerField(required=False, default=None, allow_null=True)


class ContentQuerySerializer(serializers.Serializer):
    pass


class DeleteInputSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class GoneSerializer(serializers.Serializer):
    detail = serializers.CharField()
    reason = serializers.CharField(help_text="expired or deleted")
    gone_at = serializers.DateTimeField()
    artifact = ArtifactSerializer(help_text="The tombstone: the pointer's metadata stays.")


class ReadLimitSerializer(serializers.Serializer):
    detail = serializers.CharField()
    limit = serializers.CharField(help_text="The workspace limit the read is over.")
    allowed = serializers.IntegerField(help_text="That limit's value.")


class ArtifactReadSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None)
    token = serializers.CharField(source="token.prefix", default=None)

    class Meta:
        model = ArtifactRead
        fields = [
            "id", "actor", "token", "via", "mode", "params", "start_line", "end_line",
            "start_byte", "end_byte", "ranges", "bytes_returned", "created_at",
        ]  # fmt: skip


class WriteFailureSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None)

    class Meta:
        model = ArtifactWriteFailure
        fields = [
            "id", "run_id", "tool_call_id", "command", "reason", "bytes_received", "actor",
            "created_at",
        ]  # fmt: skip
