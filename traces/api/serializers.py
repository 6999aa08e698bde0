"""Serializers for the traces API."""

from rest_framework import serializers

from governance.api.serializers import JobSerializer
from traces.models import (
    Agent,
    Call,
    Compaction,
    Harness,
    IdentityHandling,
    PreCompactAction,
    Run,
    Session,
)


class TokensSerializer(serializers.Serializer):
    input = serializers.IntegerField(source="input_tokens")
    cache_creation = serializers.IntegerField(source="cache_creation_tokens")
    cache_read = serializers.IntegerField(source="cache_read_tokens")
    output = serializers.IntegerField(source="output_tokens")


class SessionSerializer(serializers.ModelSerializer):
    agents = serializers.IntegerField(source="agent_count")
    calls = serializers.IntegerField(source="call_count")
    compactions = serializers.IntegerField(source="compaction_count")
    tokens = TokensSerializer(source="*")
    models = serializers.ListField(source="model_names", child=serializers.CharField())

    class Meta:
        model = Session
        fields = [
            "id", "external_id", "harness", "title", "project", "git_branch", "harness_version", "models",
            "started_at", "ended_at", "agents", "calls", "compactions", "tokens", "max_context",
            "created_at", "last_ingested_at",
        ]  # fmt: skip


class CallSerializer(serializers.ModelSerializer):
    call_index = serializers.IntegerField(source="session_index")
    agent = serializers.IntegerField(source="agent_id")
    tokens = TokensSerializer(source="*")
    tools = serializers.SerializerMethodField()

    class Meta:
        model = Call
        fields = [
            "id", "call_index", "agent", "agent_index", "key", "timestamp", "model", "tokens",
            "reasoning_tokens", "context_tokens", "is_sidechain", "tools",
        ]  # fmt: skip

    def get_tools(self, call) -> list[str]:
        return call.tool_names.split()


class CompactionSerializer(serializers.ModelSerializer):
    agent = serializers.IntegerField(source="agent_id")

    class Meta:
        model = Compaction
        fields = [
            "id", "agent", "kind", "timestamp", "trigger", "pre_tokens", "post_tokens", "summary_tokens",
            "summary_estimated", "duration_ms", "before_call_index", "after_call_index", "success",
            "error", "sources",
        ]  # fmt: skip


class AgentSerializer(serializers.ModelSerializer):
    parent = serializers.IntegerField(source="parent_id", allow_null=True)

    class Meta:
        model = Agent
        fields = [
            "id", "external_id", "kind", "parent", "start_kind", "agent_type", "description",
            "spawn_tool_call_id", "initial_context", "call_count", "max_context", "total_tokens",
            "started_at", "ended_at",
        ]  # fmt: skip


class RunSerializer(serializers.ModelSerializer):
    agent = serializers.IntegerField(source="agent_id")

    class Meta:
        model = Run
        fields = [
            "id", "agent", "index", "first_call_index", "last_call_index", "call_count", "max_context",
            "median_context", "task_type", "task_type_reason", "started_at", "ended_at",
        ]  # fmt: skip


class TraceUploadSerializer(serializers.Serializer):
    files = serializers.ListField(
        child=serializers.FileField(),
        help_text="One or more transcript files or archives (repeat the `files` field).",
    )
    format = serializers.ChoiceField(
        choices=["auto", "claude-code", "codex", "otlp-json"], default="auto", required=False
    )


class TraceUploadAcceptedSerializer(serializers.Serializer):
    job = JobSerializer()
    job_url = serializers.URLField()


class TelemetryPolicySerializer(serializers.Serializer):
    identity = serializers.ChoiceField(
        choices=IdentityHandling.choices,
        help_text="What happens to user.email, user.account_uuid, user.account_id, user.id and "
        "organization.id in OTLP requests before anything is stored: `keep` them, `hash` them "
        "with the workspace's secret key (HMAC-SHA256, the default), or `drop` them.",
    )
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)


# --- harness hook events ---------------------------------------------------------------------

MAX_HOOK_EVENTS = 200
# The harnesses that run hooks; named once in the schema (settings.ENUM_NAME_OVERRIDES).
HOOK_HARNESSES = [Harness.CLAUDE_CODE, Harness.CODEX]


class HookEventInputSerializer(serializers.Serializer):
    event_id = serializers.CharField(
        max_length=64, help_text="The client's unique id: a resent event is stored once."
    )
    event = serializers.CharField(max_length=40, help_text="e.g. SessionStart, PreCompact.")
    harness = serializers.ChoiceField(choices=HOOK_HARNESSES, default=Harness.CLAUDE_CODE)
    occurred_at = serializers.DateTimeField(help_text="When the hook ran (ISO 8601).")
    context_tokens = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    model = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="The model of the session's last main-agent call, read by the client from "
        "the transcript (Claude Code's PreCompact input does not name it).",
    )
    payload = serializers.DictField(help_text="The hook's stdin JSON, unchanged.")


class HookBatchInputSerializer(serializers.Serializer):
    events = HookEventInputSerializer(many=True, allow_empty=False)

    def validate_events(self, events):
        if len(events) > MAX_HOOK_EVENTS:
            raise serializers.ValidationError(
                f"{len(events):,} events; send at most {MAX_HOOK_EVENTS} in one request."
            )
        return events


class HookBatchResultSerializer(serializers.Serializer):
    received = serializers.IntegerField()
    stored = serializers.IntegerField()
    duplicates = serializers.IntegerField(help_text="Events already stored (by event_id).")
    summaries_stored = serializers.IntegerField(
        help_text="PostCompact summaries put on an ingested compaction."
    )


class HookAnswerSerializer(serializers.Serializer):
    event_id = serializers.CharField(help_text="The event answered: the batch's last.")
    event = serializers.CharField()
    action = serializers.CharField(
        help_text="One of `none`, `suggest`, `block`, `context`. `none`: say nothing. `suggest`: show `message` to the user. `block`: refuse "
        "the compaction with `message` as the reason (PreCompact, automatic only). `context`: "
        "give the agent `additional_context` (SessionStart), and show `message` if set.",
    )
    message = serializers.CharField(allow_blank=True, help_text="For the user.")
    additional_context = serializers.CharField(allow_blank=True, help_text="For the agent.")
    restart_url = serializers.CharField(
        allow_blank=True, help_text="The restart-package builder, prefilled for the session."
    )
    reason = serializers.CharField(allow_blank=True, help_text="Why this action.")


class HookBatchResponseSerializer(HookBatchResultSerializer):
    answer = HookAnswerSerializer(help_text="What the harness should be told for the last event.")


class TranscriptLinesInputSerializer(serializers.Serializer):
    path = serializers.CharField(
        max_length=990,
        help_text="The transcript's path on the client (the hook's `transcript_path`): it names "
        "the stream of lines.",
    )
    harness = serializers.ChoiceField(
        choices=HOOK_HARNESSES,
        default=Harness.CLAUDE_CODE,
        help_text="`claude-code` (a session transcript) or `codex` (a rollout file).",
    )
    offset = serializers.IntegerField(
        min_value=0, help_text="The byte of the transcript where `data` starts; 0 starts again."
    )
    end = serializers.IntegerField(
        min_value=0,
        required=False,
        help_text="The byte where the chunk ends (default: offset + the bytes of data). Larger "
        "when a line too long to send was left out.",
    )
    data = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="The bytes, base64: whole lines, ending in a newline.",
    )
    restart = serializers.BooleanField(
        default=False,
        help_text="With offset 0: the client found the file truncated or replaced, so the "
        "server reads it again from the start even if its first bytes are the same.",
    )
    head_size = serializers.IntegerField(min_value=0, max_value=64 * 1024)
    head_sha256 = serializers.RegexField(
        r"^[0-9a-f]{64}$",
        help_text="sha256 of the transcript's first `head_size` bytes (at most 64 KiB).",
    )

    def validate(self, attrs):
        import base64
        import binascii

        try:
            attrs["data"] = base64.b64decode(attrs["data"], validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError({"data": "Not valid base64."}) from None
        attrs.setdefault("end", attrs["offset"] + len(attrs["data"]))
        return attrs


class TranscriptLinesResultSerializer(serializers.Serializer):
    offset = serializers.IntegerField(
        help_text="The bytes of the transcript now ingested: where the next chunk starts."
    )
    lines = serializers.IntegerField()
    calls = serializers.IntegerField(help_text="New calls (a line resent adds none).")
    compactions = serializers.IntegerField()
    duplicates_dropped = serializers.IntegerField()
    malformed_lines = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.DictField())


class HookPolicySerializer(serializers.Serializer):
    pre_compact_action = serializers.ChoiceField(
        choices=PreCompactAction.choices,
        help_text="At PreCompact, when the context is above the qualified ECL of the session's "
        "model: `off`, `suggest` a restart, or `block` an automatic compaction (a manual "
        "/compact is never blocked; it gets the suggestion).",
    )
    session_start_context = serializers.BooleanField(
        help_text="At SessionStart, give the agent the operating limit and the key of the "
        "authoritative specification as additional context."
    )
    spec = serializers.CharField(
        allow_blank=True,
        required=False,
        default="",
        help_text="The key (slug) of the specification sessions restart from; empty: the "
        "specification governing the session's project (`project` on the specification), else "
        "the workspace's only specification with an authoritative version, if there is one.",
    )
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["spec"] = instance.spec.slug if instance.spec_id else ""
        return data


# --- reconciliation ---------------------------------------------------------------------


class SourceTotalsSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField(help_text="Uncached input.")
    cache_creation_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()


class DisagreementSerializer(serializers.Serializer):
    call_id = serializers.IntegerField()
    key = serializers.CharField(help_text="The call's key (message id:request id, response id).")
    session_index = serializers.IntegerField(allow_null=True)
    timestamp = serializers.DateTimeField(allow_null=True)
    field = serializers.CharField(
        help_text="input_tokens, cache_creation_tokens, cache_read_tokens or output_tokens."
    )
    values = serializers.DictField(
        child=serializers.IntegerField(), help_text="Each source's value: transcript, span, event."
    )


class SingleSourceSerializer(serializers.Serializer):
    call_id = serializers.IntegerField(
        allow_null=True, help_text="Null for an event that names no stored call."
    )
    key = serializers.CharField()
    session_index = serializers.IntegerField(allow_null=True)
    timestamp = serializers.DateTimeField(allow_null=True)
    source = serializers.CharField(help_text="transcript, span or event.")


class ReconciliationSerializer(serializers.Serializer):
    calls = serializers.IntegerField(help_text="Calls, plus events that name no stored call.")
    by_source = serializers.DictField(
        child=serializers.IntegerField(), help_text="How many of them each source saw."
    )
    joined = serializers.IntegerField(help_text="Calls seen by two sources or more.")
    disagreeing_calls = serializers.IntegerField()
    disagreements = DisagreementSerializer(many=True)
    single_source = SingleSourceSerializer(many=True)
    single_source_total = serializers.IntegerField()
    totals = serializers.DictField(
        child=SourceTotalsSerializer(), help_text="Token sums by source."
    )
    cost_usd = serializers.DictField(
        child=serializers.DecimalField(max_digits=20, decimal_places=8),
        help_text="cost_usd summed by source, where the source gives it (events).",
    )
    truncated = serializers.BooleanField(help_text="A list was cut at 500 rows.")
