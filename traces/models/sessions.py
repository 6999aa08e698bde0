"""Sessions, agents, deduplicated calls with their text and sources, compactions, runs and file
touches.

Calls are the table that grows with traffic. It has no foreign keys pointing into it
except from per-call text, and every read filters by session or by workspace and time,
so it can be partitioned by time without changing the code that reads it.
"""

from __future__ import annotations

from django.db import models

from governance.models import Workspace, WorkspaceOwned
from traces.models.uploads import Harness, IngestedFile


class Session(WorkspaceOwned):
    """One agent session as the harness saw it (a Claude session id, a Codex rollout, an OTel conversation)."""

    harness = models.CharField(max_length=16, choices=Harness.choices)
    external_id = models.CharField(max_length=200)
    project = models.CharField(
        max_length=1000, blank=True, help_text="Project or working directory."
    )
    git_branch = models.CharField(max_length=300, blank=True)
    harness_version = models.CharField(max_length=64, blank=True)
    title = models.CharField(max_length=500, blank=True)
    model_names = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Totals, refreshed whenever the session's calls change.
    agent_count = models.PositiveIntegerField(default=0)
    call_count = models.PositiveIntegerField(default=0)
    compaction_count = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    max_context = models.PositiveBigIntegerField(default=0)
    context_window = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Context window the harness reported (Codex telemetry)."
    )
    auto_compact_token_limit = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Auto-compaction threshold the harness reported (Codex)."
    )
    needs_derive = models.BooleanField(
        default=False, help_text="New calls arrived (OTLP) since runs and totals were last derived."
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was first ingested.")
    updated_at = models.DateTimeField(auto_now=True)
    last_ingested_at = models.DateTimeField(
        null=True, blank=True, help_text="When an ingest last loaded calls or compactions of it."
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "harness", "external_id"], name="session_unique_external_id"
            )
        ]
        indexes = [
            models.Index(fields=["workspace", "-started_at"]),
            models.Index(fields=["workspace", "-last_ingested_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.get_harness_display()} {self.external_id[:12]}"

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.cache_creation_tokens
            + self.cache_read_tokens
            + self.output_tokens
        )


class AgentKind(models.TextChoices):
    MAIN = "main"
    SUBAGENT = "subagent"
    COMPACTION = "compaction", "compaction summariser"


class StartKind(models.TextChoices):
    FRESH = "fresh"
    FORK = "fork"
    UNKNOWN = "unknown"


class Agent(WorkspaceOwned):
    """One context window lineage: the main thread or a subagent, with its own calls."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="agents")
    external_id = models.CharField(max_length=200, help_text="'main' or the harness's agent id.")
    kind = models.CharField(max_length=16, choices=AgentKind.choices, default=AgentKind.MAIN)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    start_kind = models.CharField(
        max_length=8, choices=StartKind.choices, default=StartKind.UNKNOWN
    )
    agent_type = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    spawn_tool_call_id = models.CharField(max_length=200, blank=True)
    initial_context = models.PositiveBigIntegerField(null=True, blank=True)
    call_count = models.PositiveIntegerField(default=0)
    max_context = models.PositiveBigIntegerField(default=0)
    total_tokens = models.PositiveBigIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session_id", "started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "external_id"], name="agent_unique_in_session"
            )
        ]

    def __str__(self) -> str:
        return "main" if self.kind == AgentKind.MAIN else f"subagent {self.external_id[:16]}"


class Call(WorkspaceOwned):
    """One deduplicated model API call with its token usage and the context it carried."""

    # Single-column indexes on these would duplicate the composite ones below; every
    # index costs on each of millions of inserts. Only the session link is a database
    # foreign key: PostgreSQL checks each one per inserted row, and the other two follow
    # from it (the loader writes a call with its session's workspace and an agent of that
    # session). Deletes still cascade, through the ORM, as for every model here.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="calls", db_index=False
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="calls", db_index=False, db_constraint=False
    )
    key = models.CharField(
        max_length=300, help_text="Dedup key: message id + request id, response id, span id."
    )
    session_index = models.PositiveIntegerField(
        default=0, help_text="0-based position among the session's calls, ordered by time."
    )
    agent_index = models.PositiveIntegerField(default=0)
    timestamp = models.DateTimeField()
    model = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0, help_text="Uncached input.")
    cache_creation_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0, help_text="Includes reasoning.")
    reasoning_tokens = models.PositiveBigIntegerField(default=0)
    context_tokens = models.PositiveBigIntegerField(
        default=0, help_text="Prompt size of the call, by the harness's own semantics."
    )
    is_sidechain = models.BooleanField(default=False)
    tool_names = models.TextField(
        blank=True, help_text="Space-separated tool signature tokens, e.g. 'Read Edit Bash:pytest'."
    )
    touches = models.TextField(blank=True, help_text="File touches, one 'mode<TAB>path' per line.")
    source_line = models.PositiveIntegerField(null=True, blank=True)
    source_file = models.ForeignKey(
        IngestedFile,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
        help_text="Where the call was read from (informational; not enforced).",
    )
    # Facts of the stored text (`traces.analysis.post_compaction.text_facts`), written with
    # it, so that behaviour after compaction reads no text. Database defaults keep raw
    # COPYs that name only the other columns valid.
    prompt_kind = models.CharField(
        max_length=16,
        blank=True,
        default="",
        db_default="",
        help_text="Kind of the prompt that started the call ('' without one): operator, "
        "command, meta, summary or interrupt.",
    )
    tool_results = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Tool results returned for the call's tool uses."
    )
    tool_errors = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Of those, results flagged is_error."
    )
    # The operator prompt's correction match, stored with it under the workspace's phrase
    # list then current; null where no prompt was matched yet (the section matches those).
    correction_phrase = models.SmallIntegerField(
        null=True,
        blank=True,
        help_text="Index of the correction phrase the operator prompt matched (-1: none), "
        "in the phrase list correction_key names.",
    )
    correction_key = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Names the phrase list and matcher revision of correction_phrase "
        "(`matcher_key`); under any other the match is stale.",
    )
    # Cost inputs. Database defaults, as above, keep raw COPYs naming other columns valid.
    cache_creation_1h_tokens = models.PositiveBigIntegerField(
        default=0,
        db_default=0,
        help_text="Of cache_creation_tokens, those written to the 1-hour cache (the rest are "
        "5-minute writes); priced at the 1-hour rate.",
    )
    cost_usd = models.DecimalField(
        max_digits=16,
        decimal_places=8,
        null=True,
        blank=True,
        help_text="The harness's own cost of the call (telemetry api_request cost_usd); "
        "when set it is the call's cost, else the price table prices its tokens.",
    )

    class Meta:
        ordering = ["session_id", "session_index"]
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="call_unique_key_in_session")
        ]
        indexes = [
            models.Index(fields=["session", "session_index"]),
            # Covering the facts behaviour after compaction groups by step (the runs' first
            # calls, read index-only: `post_compaction_grouped`). Key columns rather than
            # INCLUDE, which SQLite lacks (its system check warns).
            models.Index(
                fields=[
                    "agent",
                    "agent_index",
                    "id",
                    "session_index",
                    "prompt_kind",
                    "tool_results",
                    "tool_errors",
                    "correction_phrase",
                    "correction_key",
                ],
                name="call_agent_position_facts",
            ),
            models.Index(fields=["workspace", "timestamp"]),
        ]

    def __str__(self) -> str:
        return f"call {self.session_index} ({self.context_tokens} ctx)"

    @property
    def billed_tokens(self) -> int:
        return (
            self.input_tokens
            + self.cache_creation_tokens
            + self.cache_read_tokens
            + self.output_tokens
        )


class CallText(models.Model):
    """The call's messages, tool calls and tool results: zstd-compressed JSON, keyed by call."""

    # Written in the same transaction as its call; no per-row foreign-key check (see Call).
    call = models.OneToOneField(
        Call, primary_key=True, on_delete=models.CASCADE, related_name="text", db_constraint=False
    )
    data = models.BinaryField()

    def __str__(self) -> str:
        return f"text of call {self.call_id}"


class OperatorPrompt(models.Model):
    """The prompt of a call when a person typed it to the agent (`prompt_kind` operator),
    copied from its text: correction phrases are matched on these rows alone."""

    # Written with its call's text; no per-row foreign-key check (see Call).
    call = models.OneToOneField(
        Call,
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="operator_prompt",
        db_constraint=False,
    )
    text = models.TextField()

    def __str__(self) -> str:
        return f"operator prompt of call {self.call_id}"


class CompactionTrigger(models.TextChoices):
    AUTO = "auto"
    MANUAL = "manual"
    UNKNOWN = "unknown"


class Compaction(WorkspaceOwned):
    """A compaction boundary: what the window held before, what survived, and what it cost."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compactions")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="compactions")
    key = models.CharField(max_length=300)
    kind = models.CharField(max_length=16, default="full", help_text="full or micro.")
    timestamp = models.DateTimeField(null=True, blank=True)
    trigger = models.CharField(
        max_length=8, choices=CompactionTrigger.choices, default=CompactionTrigger.UNKNOWN
    )
    before_call_index = models.IntegerField(
        null=True, blank=True, help_text="Session index of the last call before the boundary."
    )
    after_call_index = models.IntegerField(
        null=True, blank=True, help_text="Session index of the first call after the boundary."
    )
    pre_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    post_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    summary_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    summary_estimated = models.BooleanField(
        default=False,
        help_text="True when the summary size is estimated from its text (≈4 chars/token).",
    )
    duration_ms = models.PositiveBigIntegerField(null=True, blank=True)
    source_line = models.PositiveIntegerField(null=True, blank=True)
    compact_summary = models.TextField(
        blank=True, help_text="The summary text, as Claude Code's PostCompact hook reported it."
    )
    success = models.BooleanField(
        null=True, blank=True, help_text="Whether it succeeded (the claude_code.compaction event)."
    )
    error = models.TextField(
        blank=True, default="", db_default="", help_text="The compaction event's error, if any."
    )
    sources = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="Space-separated sources joined into it: transcript, event, span ('' before "
        "any join: the source its key names).",
    )

    class Meta:
        ordering = ["session_id", "timestamp", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "key"], name="compaction_unique_key_in_session"
            )
        ]

    def __str__(self) -> str:
        return f"compaction {self.pre_tokens}→{self.post_tokens}"


class CallSourceKind(models.TextChoices):
    TRANSCRIPT = "transcript"
    SPAN = "span"
    EVENT = "event"


class CallSource(WorkspaceOwned):
    """An OTLP span's own counts for a call. A call read from a transcript keeps the
    transcript's counts on the Call row, and an `api_request` event its own on the
    TelemetryEvent (linked by `call`); a span that describes a call seen elsewhere adds no
    Call, only this row, so each source's counts stay side by side (the reconciliation)."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="call_sources", db_index=False
    )
    call = models.ForeignKey(
        Call, on_delete=models.CASCADE, related_name="sources", db_constraint=False
    )
    source = models.CharField(
        max_length=12, choices=CallSourceKind.choices, default=CallSourceKind.SPAN
    )
    key = models.CharField(max_length=300, help_text="The source's own id (response id).")
    timestamp = models.DateTimeField()
    model = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0, help_text="Uncached input.")
    cache_creation_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=8, null=True, blank=True)

    class Meta:
        ordering = ["session_id", "timestamp", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "source", "key"], name="call_source_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.source} {self.key} of call {self.call_id}"


class TaskType(models.TextChoices):
    CODE_UNDERSTANDING = "code_understanding", "code understanding"
    RESEARCH = "research"
    BUILDING = "building"
    QA = "qa", "QA / dogfooding"
    PR_TO_MERGE = "pr_to_merge", "driving a PR to merge"
    UNCLASSIFIED = "unclassified"


class Run(WorkspaceOwned):
    """A context window as it was experienced: from a start or boundary to the next boundary."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    index = models.PositiveIntegerField(help_text="0-based position among the agent's runs.")
    started_by = models.ForeignKey(
        Compaction, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    first_call_index = models.PositiveIntegerField()
    last_call_index = models.PositiveIntegerField()
    call_count = models.PositiveIntegerField()
    first_agent_index = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The agent_index of the run's first call: a call's step in the run is its "
        "agent_index minus this, plus 1 (the run's calls are consecutive in its agent). Set "
        "at derive time; null on a run stored before it was (read from the call instead).",
    )
    max_context = models.PositiveBigIntegerField()
    median_context = models.PositiveBigIntegerField()
    task_type = models.CharField(
        max_length=24, choices=TaskType.choices, default=TaskType.UNCLASSIFIED
    )
    task_type_reason = models.CharField(max_length=500, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session_id", "agent_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "index"], name="run_unique_index_in_agent")
        ]
        indexes = [models.Index(fields=["workspace", "max_context"])]

    def __str__(self) -> str:
        return f"run {self.index} of {self.agent}"


class TouchMode(models.TextChoices):
    READ = "read"
    EDIT = "edit"


class FileTouch(WorkspaceOwned):
    """A file path read or edited by a call, with its token position for reference distances."""

    # As for Call: the session link is enforced by the database, the others follow from it.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_constraint=False
    )
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="file_touches")
    agent = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        related_name="file_touches",
        db_constraint=False,
        db_index=False,  # the (agent, path) index below serves lookups by agent
    )
    run_index = models.PositiveIntegerField(default=0)
    call_index = models.PositiveIntegerField()
    path = models.CharField(max_length=1000)
    mode = models.CharField(max_length=8, choices=TouchMode.choices)
    token_position = models.PositiveBigIntegerField(
        help_text="Cumulative tokens the agent had ingested when it touched the file."
    )

    class Meta:
        ordering = ["session_id", "call_index"]
        indexes = [models.Index(fields=["agent", "path"])]

    def __str__(self) -> str:
        return f"{self.mode} {self.path}"


# --- OTLP logs and metrics ------------------------------------------------------------------
