"""Writes for artifacts: storing output, bounded reads (which write the read log), deletion,
expiry and policy changes.

Other apps store bulk output with `artifact_write(...)`; it returns the pointer only once
the content is fully stored, and raises (storing nothing) otherwise.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import BinaryIO

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from artifacts.content import reads
from artifacts.content.lines import LimitExceeded, LineIndex, LineIndexBuilder
from artifacts.content.redaction import (
    DEFAULT_RULE_NAMES,
    RedactionPatternError,
    validate_custom_rule,
)
from artifacts.content.search import Matcher, SearchError, scan
from artifacts.content.tokens import TokenEstimator
from artifacts.models import (
    Artifact,
    ArtifactPolicy,
    ArtifactRead,
    ArtifactReadMode,
    ArtifactState,
    ArtifactWriteFailure,
)
from artifacts.storage import (
    StagedBlob,
    StorageFailed,
    blob_delete,
    blob_open,
    stale_staging_remove,
    storage_name_for,
)
from governance.errors import Gone
from governance.models import ApiToken, Workspace
from governance.services import InputError, audit_record

logger = logging.getLogger(__name__)

CHUNK = 1024 * 1024
MAX_ID = 200
MAX_COMMAND = 4000
EXIT_STATUS_RANGE = (-(2**31), 2**31 - 1)


class ArtifactTooLarge(InputError):
    """The body is larger than the workspace allows (413)."""


class WriteInterrupted(InputError):
    """The body ended early or could not be read; nothing was stored."""


class ReadLimitExceeded(InputError):
    """A read asks for more than a workspace limit; `limit` names it."""

    def __init__(self, message: str, *, limit: str, allowed: int):
        super().__init__(message)
        self.limit, self.allowed = limit, allowed


class ArtifactGone(Gone):
    """The artifact expired or was deleted: its content can no longer be read (410)."""

    def __init__(self, artifact: Artifact):
        self.artifact = artifact
        self.reason = artifact.state
        self.at = artifact.gone_at or artifact.expires_at
        if artifact.state == ArtifactState.DELETED:
            who = f" by {artifact.deleted_by.get_username()}" if artifact.deleted_by else ""
            why = f": {artifact.delete_reason.rstrip('.')}" if artifact.delete_reason else ""
            message = f"This artifact was deleted on {self.at:%Y-%m-%d %H:%M} UTC{who}{why}."
        else:
            message = (
                f"This artifact expired on {self.at:%Y-%m-%d %H:%M} UTC under the workspace's "
                "retention policy; its content has been or will be purged."
            )
        super().__init__(message)


# --- policy ------------------------------------------------------------------


def artifact_policy_for(*, workspace: Workspace) -> ArtifactPolicy:
    """The workspace's policy, created with the defaults on first use."""
    policy = ArtifactPolicy.objects.filter(workspace=workspace).first()
    if policy is not None:
        return policy
    try:
        with transaction.atomic():
            return ArtifactPolicy.objects.create(workspace=workspace)
    except IntegrityError:
        return ArtifactPolicy.objects.get(workspace=workspace)


POLICY_FIELDS = (
    "retention_days",
    "max_artifact_bytes",
    "max_read_lines",
    "max_read_bytes",
    "max_search_matches",
    "max_search_context",
    "search_timeout_ms",
    "max_content_bytes",
    "disabled_rules",
    "custom_rules",
)


def artifact_policy_update(*, workspace: Workspace, actor, **changes) -> ArtifactPolicy:
    """Change limits, retention or redaction rules; audited with before and after values."""
    unknown = set(changes) - set(POLICY_FIELDS)
    if unknown:
        raise InputError(f"unknown policy fields: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        policy = artifact_policy_for(workspace=workspace)
        policy = ArtifactPolicy.objects.select_for_update().get(pk=policy.pk)
        before = {name: getattr(policy, name) for name in changes}
        for name, value in changes.items():
            setattr(policy, name, value)
        _validate_rules(policy)
        policy.updated_by = actor if getattr(actor, "pk", None) else None
        policy.full_clean()
        policy.save()
        changed = {
            name: {"from": before[name], "to": getattr(policy, name)}
            for name in changes
            if before[name] != getattr(policy, name)
        }
        if changed:
            audit_record(
                workspace=workspace,
                actor=actor,
                action="artifact_policy.update",
                obj=policy,
                data={"changed": changed},
            )
    return policy


def _validate_rules(policy: ArtifactPolicy) -> None:
    disabled = policy.disabled_rules or []
    if not isinstance(disabled, list) or any(name not in DEFAULT_RULE_NAMES for name in disabled):
        raise ValidationError(
            {"disabled_rules": f"name built-in rules only: {', '.join(DEFAULT_RULE_NAMES)}"}
        )
    seen = set()
    for rule in policy.custom_rules or []:
        if not isinstance(rule, dict) or not {"name", "pattern"} <= set(rule):
            raise ValidationError({"custom_rules": "each rule needs a name and a pattern"})
        if rule["name"] in seen:
            raise ValidationError({"custom_rules": f"{rule['name']}: the name is used twice"})
        seen.add(rule["name"])
        try:
            validate_custom_rule(rule["name"], rule["pattern"])
        except RedactionPatternError as exc:
            raise ValidationError({"custom_rules": str(exc)}) from None


# --- writes ------------------------------------------------------------------


@dataclass(frozen=True)
class WriteMetadata:
    run_id: str
    command: str
    tool_call_id: str = ""
    exit_status: int | None = None
    complete: bool = True
    dropped_bytes: int | None = None
    dropped_lines: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def validate(self) -> None:
        for name in ("run_id", "tool_call_id"):
            value = getattr(self, name)
            if len(value) > MAX_ID:
                raise InputError(f"{name}: at most {MAX_ID} characters")
            if any(ord(c) < 32 or ord(c) == 127 for c in value):
                raise InputError(f"{name}: control characters are not allowed")
        if not self.run_id.strip():
            raise InputError("run_id: required; name the run this output belongs to")
        if not self.command.strip():
            raise InputError("command: required; name the command or tool that produced it")
        if len(self.command) > MAX_COMMAND:
            raise InputError(f"command: at most {MAX_COMMAND} characters")
        if self.exit_status is not None and not (
            EXIT_STATUS_RANGE[0] <= self.exit_status <= EXIT_STATUS_RANGE[1]
        ):
            raise InputError("exit_status: must fit in a signed 32-bit integer")
        if self.complete and (self.dropped_bytes is not None or self.dropped_lines is not None):
            raise InputError(
                "dropped_bytes/dropped_lines: only for truncated output (complete=false)"
            )
        for name in ("dropped_bytes", "dropped_lines"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InputError(f"{name}: must be 0 or more")
        for name in ("started_at", "finished_at"):
            value = getattr(self, name)
            if value is not None and timezone.is_naive(value):
                raise InputError(f"{name}: include a timezone, e.g. 2025-01-31T12:00:00Z")
        if self.started_at and self.finished_at and self.finished_at < self.started_at:
            raise InputError("finished_at: is before started_at")


@dataclass(frozen=True)
class StoredArtifact:
    artifact: Artifact
    created: bool


def check_run_scope(*, token: ApiToken | None, run_id: str) -> None:
    """A run-scoped token writes and reads only its own run."""
    if token is not None and token.run_id and token.run_id != run_id:
        raise PermissionDenied(
            f"This token is scoped to run {token.run_id!r}; it cannot write to run {run_id!r}."
        )


class ArtifactWriter:
    """One write: each chunk is redacted, fingerprinted, counted and staged as it arrives.

    Nothing is visible until `publish()`, which creates the pointer and moves the staged
    bytes into place in one step; `discard()` removes them.
    """

    def __init__(self, *, workspace: Workspace, policy: ArtifactPolicy | None = None):
        self.workspace = workspace
        self.policy = policy or artifact_policy_for(workspace=workspace)
        self.redaction = self.policy.redactor().stream()
        self.sha256 = hashlib.sha256()
        self.index = LineIndexBuilder()
        self.tokens = TokenEstimator()
        self.received = 0
        self.finished = False
        self.blob = StagedBlob()

    def write(self, chunk: bytes) -> None:
        self.received += len(chunk)
        limit = self.policy.max_artifact_bytes
        if self.received > limit:
            raise ArtifactTooLarge(
                f"the body is larger than this workspace's max_artifact_bytes limit ({limit:,} bytes)"
            )
        self._store(self.redaction.feed(chunk))

    def finish(self) -> None:
        if not self.finished:
            self._store(self.redaction.finish())
            self.finished = True

    def _store(self, data: bytes) -> None:
        if data:
            self.sha256.update(data)
            self.index.update(data)
            self.tokens.update(data)
            self.blob.write(data)

    def discard(self) -> None:
        self.blob.discard()

    def publish(self, *, meta: WriteMetadata, actor=None, token: ApiToken | None = None):
        meta.validate()
        check_run_scope(token=token, run_id=meta.run_id)
        self.finish()
        index = self.index.finish()
        command, command_counts = self.policy.redactor().redact(meta.command.encode())
        counts = Counter(self.redaction.counts) + command_counts
        now = timezone.now()
        artifact_id = uuid.uuid4()
        artifact = Artifact(
            id=artifact_id,
            workspace=self.workspace,
            run_id=meta.run_id,
            tool_call_id=meta.tool_call_id,
            command=command.decode("utf-8", errors="replace"),
            exit_status=meta.exit_status,
            started_at=meta.started_at,
            finished_at=meta.finished_at,
            complete=meta.complete,
            dropped_bytes=meta.dropped_bytes,
            dropped_lines=meta.dropped_lines,
            size_bytes=index.size,
            line_count=index.lines,
            estimated_tokens=self.tokens.tokens,
            sha256=self.sha256.hexdigest(),
            redaction_count=sum(counts.values()),
            redactions_by_rule=dict(sorted(counts.items())),
            storage_name=storage_name_for(workspace_id=self.workspace.pk, artifact_id=artifact_id),
            line_index=index.to_bytes(),
            expires_at=now + timedelta(days=self.policy.retention_days),
            created_by=actor if getattr(actor, "pk", None) else None,
            created_by_token=token,
        )
        try:
            with transaction.atomic():
                existing = _live_copy(artifact)
                if existing is not None and existing.expires_at > now:
                    self.discard()
                    return StoredArtifact(existing, created=False)
                if existing is not None:
                    _mark_gone(existing, state=ArtifactState.EXPIRED, at=existing.expires_at)
                try:
                    with transaction.atomic():
                        artifact.save(force_insert=True)
                except IntegrityError:
                    # A concurrent retry of the same output won the race: use its pointer.
                    existing = _live_copy(artifact)
                    if existing is None:
                        raise
                    self.discard()
                    return StoredArtifact(existing, created=False)
                self.blob.publish(artifact.storage_name)
                audit_record(
                    workspace=self.workspace,
                    actor=actor,
                    action="artifact.create",
                    obj=artifact,
                    data={
                        "run_id": artifact.run_id,
                        "tool_call_id": artifact.tool_call_id,
                        "bytes": artifact.size_bytes,
                        "sha256": artifact.sha256,
                        "complete": artifact.complete,
                        "redactions": artifact.redaction_count,
                        "token": token.prefix if token else None,
                    },
                )
        except BaseException:
            self.blob.unpublish()
            self.discard()
            raise
        return StoredArtifact(artifact, created=True)


def _live_copy(artifact: Artifact) -> Artifact | None:
    return (
        Artifact.objects.select_for_update()
        .filter(
            workspace=artifact.workspace,
            run_id=artifact.run_id,
            tool_call_id=artifact.tool_call_id,
            sha256=artifact.sha256,
            state=ArtifactState.AVAILABLE,
        )
        .first()
    )


def artifact_store(
    *,
    workspace: Workspace,
    source: bytes | BinaryIO | Iterable[bytes],
    run_id: str,
    command: str,
    tool_call_id: str = "",
    exit_status: int | None = None,
    complete: bool = True,
    dropped_bytes: int | None = None,
    dropped_lines: int | None = None,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
    actor=None,
    token: ApiToken | None = None,
    expected_bytes: int | None = None,
    staged: ArtifactWriter | None = None,
) -> StoredArtifact:
    """Stream `source` into a new artifact (or find the identical one already stored).

    `staged` is a writer that has already been fed (a multipart upload streams into one
    while it is parsed); then `source` is ignored. Raises InputError (bad metadata, too
    large, interrupted), PermissionDenied (run scope) or StorageFailed; in every such case
    nothing is stored and the failure is recorded.
    """
    meta = WriteMetadata(
        run_id=run_id,
        command=command,
        tool_call_id=tool_call_id,
        exit_status=exit_status,
        complete=complete,
        dropped_bytes=dropped_bytes,
        dropped_lines=dropped_lines,
        started_at=started_at,
        finished_at=finished_at,
    )
    writer = staged
    try:
        meta.validate()
        check_run_scope(token=token, run_id=run_id)
        if writer is None:
            writer = ArtifactWriter(workspace=workspace)
            for chunk in _chunks(source, writer):
                writer.write(chunk)
        if expected_bytes is not None and writer.received != expected_bytes:
            raise WriteInterrupted(
                f"the body ended after {writer.received:,} of {expected_bytes:,} bytes "
                "(Content-Length); nothing was stored"
            )
        return writer.publish(meta=meta, actor=actor, token=token)
    except Exception as exc:
        if writer is not None:
            writer.discard()
        artifact_write_failure_record(
            workspace=workspace,
            run_id=run_id,
            tool_call_id=tool_call_id,
            command=command,
            reason=str(exc),
            bytes_received=writer.received if writer else 0,
            actor=actor,
            token=token,
        )
        raise


def artifact_write(
    *,
    workspace: Workspace,
    source: bytes | BinaryIO | Iterable[bytes],
    run_id: str,
    command: str,
    tool_call_id: str = "",
    exit_status: int | None = None,
    complete: bool = True,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
    actor=None,
    dropped_bytes: int | None = None,
    dropped_lines: int | None = None,
) -> Artifact:
    """Store bulk output from code (for example a restart package's verification output).

    `source` is bytes, a binary file-like object or an iterable of byte chunks. Returns the
    pointer; a retry with the same run, tool-call id and bytes returns the same one.
    """
    return artifact_store(
        workspace=workspace,
        source=source,
        run_id=run_id,
        command=command,
        tool_call_id=tool_call_id,
        exit_status=exit_status,
        complete=complete,
        dropped_bytes=dropped_bytes,
        dropped_lines=dropped_lines,
        started_at=started_at,
        finished_at=finished_at,
        actor=actor,
    ).artifact


def _chunks(source, writer: ArtifactWriter) -> Iterator[bytes]:
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source)
        for start in range(0, len(view), CHUNK):
            yield bytes(view[start : start + CHUNK])
        return
    read = getattr(source, "read", None)
    try:
        if read is not None:
            while chunk := read(CHUNK):
                yield chunk
        else:
            yield from source
    except OSError as exc:  # includes UnreadablePostError and connection resets
        raise WriteInterrupted(
            f"reading the body failed after {writer.received:,} bytes ({exc}); nothing was stored"
        ) from exc


def artifact_write_failure_record(
    *,
    workspace: Workspace,
    reason: str,
    run_id: str = "",
    tool_call_id: str = "",
    command: str = "",
    bytes_received: int = 0,
    actor=None,
    token: ApiToken | None = None,
) -> ArtifactWriteFailure | None:
    """Keep a failed write visible. Metadata is redacted; nothing of the body is kept."""
    try:
        redactor = artifact_policy_for(workspace=workspace).redactor()
        command_clean = redactor.redact(command[:MAX_COMMAND].encode())[0].decode(errors="replace")
        return ArtifactWriteFailure.objects.create(
            workspace=workspace,
            run_id=run_id[:MAX_ID],
            tool_call_id=tool_call_id[:MAX_ID],
            command=command_clean,
            reason=reason[:2000],
            bytes_received=bytes_received,
            actor=actor if getattr(actor, "pk", None) else None,
            token=token,
        )
    except Exception:
        logger.exception("could not record a failed artifact write")
        return None


# --- retention ---------------------------------------------------------------


def _mark_gone(artifact: Artifact, *, state: str, at: datetime, actor=None, reason: str = ""):
    artifact.state = state
    artifact.gone_at = at
    artifact.line_index = b""
    if state == ArtifactState.DELETED:
        artifact.deleted_by = actor if getattr(actor, "pk", None) else None
        artifact.delete_reason = reason[:500]
    artifact.save(update_fields=["state", "gone_at", "line_index", "deleted_by", "delete_reason"])
    audit_record(
        workspace=artifact.workspace,
        actor=actor,
        action=f"artifact.{'delete' if state == ArtifactState.DELETED else 'expire'}",
        obj=artifact,
        data={"run_id": artifact.run_id, "sha256": artifact.sha256, "reason": reason},
    )
    name = artifact.storage_name
    transaction.on_commit(lambda: _purge_content(artifact.pk, name))


def _purge_content(artifact_id, name: str) -> None:
    try:
        blob_delete(name)
    except StorageFailed:
        logger.exception("purge of %s failed; the scheduled purge retries it", name)
        return
    Artifact.objects.filter(pk=artifact_id, purged_at__isnull=True).update(purged_at=timezone.now())


def artifact_delete(*, artifact: Artifact, actor, reason: str = "") -> Artifact:
    """Delete early: the content goes, the tombstone stays, every pointer now answers 410."""
    with transaction.atomic():
        locked = Artifact.objects.select_for_update().get(pk=artifact.pk)
        if locked.state != ArtifactState.AVAILABLE:
            raise ArtifactGone(locked)
        _mark_gone(
            locked, state=ArtifactState.DELETED, at=timezone.now(), actor=actor, reason=reason
        )
    return locked


@dataclass
class PurgeReport:
    expired: int = 0
    purged: int = 0
    stale_staging: int = 0
    failed: list[str] = field(default_factory=list)


def artifacts_purge(*, now: datetime | None = None, batch: int = 500) -> PurgeReport:
    """Expire what is past its date and remove the content of everything gone."""
    now = now or timezone.now()
    report = PurgeReport()
    while True:
        with transaction.atomic():
            due = list(
                Artifact.objects.select_for_update(skip_locked=True)
                .filter(state=ArtifactState.AVAILABLE, expires_at__lte=now)
                .select_related("workspace")
                .order_by("expires_at")[:batch]
            )
            for artifact in due:
                _mark_gone(artifact, state=ArtifactState.EXPIRED, at=artifact.expires_at)
        report.expired += len(due)
        if len(due) < batch:
            break
    leftovers = Artifact.objects.filter(purged_at__isnull=True).exclude(
        state=ArtifactState.AVAILABLE
    )
    for artifact_id, name in leftovers.values_list("pk", "storage_name").iterator():
        try:
            blob_delete(name)
        except StorageFailed as exc:
            report.failed.append(str(exc))
            continue
        report.purged += Artifact.objects.filter(pk=artifact_id, purged_at__isnull=True).update(
            purged_at=timezone.now()
        )
    report.stale_staging = stale_staging_remove()
    return report


# --- reads -------------------------------------------------------------------


@dataclass(frozen=True)
class Reader:
    """Who reads, for the read log: a user, optionally through a token, via api or page."""

    actor: object = None
    token: ApiToken | None = None
    via: str = "api"


def ensure_readable(artifact: Artifact, *, now: datetime | None = None) -> None:
    """Raise ArtifactGone unless the content can still be read (expiry is exact)."""
    now = now or timezone.now()
    if artifact.state == ArtifactState.AVAILABLE and artifact.expires_at <= now:
        with transaction.atomic():
            locked = Artifact.objects.select_for_update().get(pk=artifact.pk)
            if locked.state == ArtifactState.AVAILABLE:
                _mark_gone(locked, state=ArtifactState.EXPIRED, at=locked.expires_at)
        artifact.refresh_from_db()
    if artifact.state != ArtifactState.AVAILABLE:
        raise ArtifactGone(artifact)


@contextmanager
def _opened(artifact: Artifact):
    ensure_readable(artifact)
    index = LineIndex.from_bytes(artifact.line_index)
    handle = blob_open(artifact.storage_name)
    try:
        yield handle, index
    except LimitExceeded as exc:
        raise ReadLimitExceeded(str(exc), limit=exc.limit, allowed=exc.allowed) from None
    except (reads.RangeError, SearchError) as exc:
        raise InputError(str(exc)) from None
    finally:
        handle.close()


def _log(artifact: Artifact, reader: Reader, mode: str, params: dict, spans, first_line, last_line):
    spans = [(int(start), int(end)) for start, end in spans]
    return ArtifactRead.objects.create(
        workspace_id=artifact.workspace_id,
        artifact=artifact,
        actor=reader.actor if getattr(reader.actor, "pk", None) else None,
        token=reader.token,
        via=reader.via,
        mode=mode,
        params=params,
        start_line=first_line,
        end_line=last_line,
        start_byte=min((s for s, _ in spans), default=None),
        end_byte=max((e for _, e in spans), default=None),
        ranges=[list(span) for span in spans[:1000]],
        bytes_returned=sum(end - start for start, end in spans),
    )


def _excerpt_read(artifact: Artifact, reader: Reader, mode: str, params: dict, excerpt):
    _log(
        artifact,
        reader,
        mode,
        params,
        [(excerpt.start_byte, excerpt.end_byte)] if excerpt.bytes else [],
        excerpt.start_line if excerpt.bytes else None,
        excerpt.end_line if excerpt.bytes else None,
    )
    return excerpt


def _line_limit(policy: ArtifactPolicy, lines: int, what: str = "lines") -> None:
    if lines > policy.max_read_lines:
        raise ReadLimitExceeded(
            f"{what}={lines:,} is over this workspace's max_read_lines limit "
            f"({policy.max_read_lines:,})",
            limit="max_read_lines",
            allowed=policy.max_read_lines,
        )


def artifact_read_tail(*, artifact: Artifact, lines: int, reader: Reader) -> reads.Excerpt:
    return _read_lines(artifact, lines, reader, ArtifactReadMode.TAIL, reads.tail)


def artifact_read_head(*, artifact: Artifact, lines: int, reader: Reader) -> reads.Excerpt:
    return _read_lines(artifact, lines, reader, ArtifactReadMode.HEAD, reads.head)


def _read_lines(artifact: Artifact, lines: int, reader: Reader, mode, read) -> reads.Excerpt:
    policy = artifact_policy_for(workspace=artifact.workspace)
    _line_limit(policy, lines)
    with _opened(artifact) as (handle, index):
        excerpt = read(
            handle,
            index,
            lines=lines,
            max_lines=policy.max_read_lines,
            max_bytes=policy.max_read_bytes,
        )
    return _excerpt_read(artifact, reader, mode, {"lines": lines}, excerpt)


def artifact_read_range(
    *,
    artifact: Artifact,
    reader: Reader,
    start_line: int | None = None,
    end_line: int | None = None,
    start_byte: int | None = None,
    end_byte: int | None = None,
) -> reads.Excerpt:
    """Lines start_line..end_line (1-based, inclusive) or bytes [start_byte, end_byte)."""
    policy = artifact_policy_for(workspace=artifact.workspace)
    by_lines = start_line is not None or end_line is not None
    by_bytes = start_byte is not None or end_byte is not None
    if by_lines == by_bytes:
        raise InputError(
            "give either start_line and end_line, or start_byte and end_byte (not both)"
        )
    if by_lines and (start_line is None or end_line is None):
        raise InputError("start_line and end_line: give both")
    if by_bytes and (start_byte is None or end_byte is None):
        raise InputError("start_byte and end_byte: give both")
    with _opened(artifact) as (handle, index):
        if by_lines:
            if end_line >= start_line:
                _line_limit(
                    policy, min(end_line, index.lines) - start_line + 1, "end_line - start_line + 1"
                )
            excerpt = reads.line_range(
                handle,
                index,
                start_line=start_line,
                end_line=end_line,
                max_lines=policy.max_read_lines,
                max_bytes=policy.max_read_bytes,
            )
            params = {"start_line": start_line, "end_line": end_line}
        else:
            excerpt = reads.byte_range(
                handle,
                index,
                start_byte=start_byte,
                end_byte=end_byte,
                max_bytes=policy.max_read_bytes,
            )
            params = {"start_byte": start_byte, "end_byte": end_byte}
    return _excerpt_read(artifact, reader, ArtifactReadMode.RANGE, params, excerpt)


@dataclass(frozen=True)
class SearchMatch:
    line: int
    start_byte: int
    end_byte: int
    excerpt: reads.Excerpt


@dataclass
class SearchResult:
    matches: list[SearchMatch]
    truncated: bool
    stopped_by: str | None
    bytes_returned: int


def artifact_search(
    *,
    artifact: Artifact,
    reader: Reader,
    q: str,
    is_regex: bool = False,
    ignore_case: bool = False,
    context: int = 0,
    max_matches: int | None = None,
) -> SearchResult:
    """Matches with their 1-based lines, each with an excerpt of `context` lines around it."""
    policy = artifact_policy_for(workspace=artifact.workspace)
    max_matches = policy.max_search_matches if max_matches is None else max_matches
    if max_matches < 1:
        raise InputError("max_matches: must be at least 1")
    if max_matches > policy.max_search_matches:
        raise ReadLimitExceeded(
            f"max_matches={max_matches:,} is over this workspace's max_search_matches limit "
            f"({policy.max_search_matches:,})",
            limit="max_search_matches",
            allowed=policy.max_search_matches,
        )
    if context < 0:
        raise InputError("context: must be 0 or more")
    if context > policy.max_search_context:
        raise ReadLimitExceeded(
            f"context={context:,} is over this workspace's max_search_context limit "
            f"({policy.max_search_context:,})",
            limit="max_search_context",
            allowed=policy.max_search_context,
        )
    try:
        matcher = Matcher(
            q,
            is_regex=is_regex,
            ignore_case=ignore_case,
            timeout=policy.search_timeout_ms / 1000,
        )
    except SearchError as exc:
        raise InputError(str(exc)) from None
    matches: list[SearchMatch] = []
    spans: list[tuple[int, int]] = []
    used = 0
    stopped_by = None
    with _opened(artifact) as (handle, index):
        result = scan(handle, size=artifact.size_bytes, matcher=matcher, max_hits=max_matches)
        if result.more:
            stopped_by = "max_matches"
        previous = None
        for hit in result.hits:
            if (
                previous is not None
                and previous.start_byte <= hit.line_start
                and (hit.line_end <= previous.end_byte and not previous.clipped)
            ):
                excerpt = previous
            else:
                remaining = policy.max_read_bytes - used
                if remaining <= 0:
                    stopped_by = "max_read_bytes"
                    break
                excerpt = reads.context_excerpt(
                    handle,
                    index,
                    line=hit.line,
                    line_start=hit.line_start,
                    line_end=hit.line_end,
                    context=context,
                    max_bytes=remaining,
                    match_start=hit.start_byte,
                    match_end=hit.end_byte,
                )
                used += excerpt.bytes
                spans.append((excerpt.start_byte, excerpt.end_byte))
            matches.append(SearchMatch(hit.line, hit.start_byte, hit.end_byte, excerpt))
            previous = excerpt
    params = {"q": q[:200]}
    params |= {"regex": True} if is_regex else {}
    params |= {"ignore_case": True} if ignore_case else {}
    params |= {"context": context} if context else {}
    params |= {"max_matches": max_matches, "matches": len(matches)}
    _log(
        artifact,
        reader,
        ArtifactReadMode.SEARCH,
        params,
        spans,
        min((m.excerpt.start_line for m in matches), default=None),
        max((m.excerpt.end_line for m in matches), default=None),
    )
    return SearchResult(matches, stopped_by is not None, stopped_by, used)


def artifact_open_content(*, artifact: Artifact, reader: Reader) -> BinaryIO:
    """The whole content as an open binary file (the caller streams and closes it)."""
    policy = artifact_policy_for(workspace=artifact.workspace)
    ensure_readable(artifact)
    if artifact.size_bytes > policy.max_content_bytes:
        raise ReadLimitExceeded(
            f"this artifact is {artifact.size_bytes:,} bytes, over this workspace's "
            f"max_content_bytes limit ({policy.max_content_bytes:,}); read it with tail, "
            "search or range instead",
            limit="max_content_bytes",
            allowed=policy.max_content_bytes,
        )
    handle = blob_open(artifact.storage_name)
    _log(
        artifact,
        reader,
        ArtifactReadMode.CONTENT,
        {},
        [(0, artifact.size_bytes)] if artifact.size_bytes else [],
        1 if artifact.line_count else None,
        artifact.line_count or None,
    )
    return handle
