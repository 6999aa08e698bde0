"""Storing output: `artifact_write(...)` returns the pointer only once the content is
fully stored, and raises (storing nothing) otherwise."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import BinaryIO

from django.db import IntegrityError, transaction
from django.utils import timezone

from artifacts.content.lines import LineIndexBuilder
from artifacts.content.tokens import TokenEstimator
from artifacts.models import Artifact, ArtifactPolicy, ArtifactState, ArtifactWriteFailure
from artifacts.services.policy import artifact_policy_for
from artifacts.services.retention import _mark_gone
from artifacts.storage import StagedBlob, storage_name_for
from governance.errors import Forbidden
from governance.models import ApiToken, Workspace
from governance.services import InputError, audit_record

logger = logging.getLogger("artifacts.services")

CHUNK = 1024 * 1024
MAX_ID = 200
MAX_COMMAND = 4000
EXIT_STATUS_RANGE = (-(2**31), 2**31 - 1)


class ArtifactTooLarge(InputError):
    """The body is larger than the workspace allows (413)."""


class WriteInterrupted(InputError):
    """The body ended early or could not be read; nothing was stored."""


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
        """Each field's rule, in field order; the first broken one raises `InputError`."""
        self._validate_ids()
        self._validate_command()
        if self.exit_status is not None and not (
            EXIT_STATUS_RANGE[0] <= self.exit_status <= EXIT_STATUS_RANGE[1]
        ):
            raise InputError("exit_status: must fit in a signed 32-bit integer")
        self._validate_dropped()
        self._validate_times()

    def _validate_ids(self) -> None:
        for name in ("run_id", "tool_call_id"):
            value = getattr(self, name)
            if len(value) > MAX_ID:
                raise InputError(f"{name}: at most {MAX_ID} characters")
            if any(ord(c) < 32 or ord(c) == 127 for c in value):
                raise InputError(f"{name}: control characters are not allowed")
        if not self.run_id.strip():
            raise InputError("run_id: required; name the run this output belongs to")

    def _validate_command(self) -> None:
        if not self.command.strip():
            raise InputError("command: required; name the command or tool that produced it")
        if len(self.command) > MAX_COMMAND:
            raise InputError(f"command: at most {MAX_COMMAND} characters")

    def _validate_dropped(self) -> None:
        """What was dropped is given only for truncated output, and is never negative."""
        if self.complete and (self.dropped_bytes is not None or self.dropped_lines is not None):
            raise InputError(
                "dropped_bytes/dropped_lines: only for truncated output (complete=false)"
            )
        for name in ("dropped_bytes", "dropped_lines"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InputError(f"{name}: must be 0 or more")

    def _validate_times(self) -> None:
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
        raise Forbidden(
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
