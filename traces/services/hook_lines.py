"""Transcript lines sent by `context-governance hook …`: the lines a Claude Code transcript
gained since the last send, ingested into their session through the shared loader.

Each transcript the hooks send is a stream, kept as a `FollowedFile` row named
`hook:<the transcript's path on the client>`: how many bytes were ingested (`offset`), the
parser's state at that point, and the fingerprint of the file's first bytes (as the client
computed it). A chunk goes on only from the row's offset; any other offset is a conflict
whose answer tells the client where the server stands, so it can go on from there (a send
whose answer it never got) or start again from the beginning (a file truncated or
replaced). A chunk at offset 0 starts the stream again. Every call is keyed by its natural
key, so reading lines again counts nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
from django.db import IntegrityError, transaction

from governance.errors import Conflict, InputError
from governance.models import Workspace
from governance.services import audit_record, workspace_bump_data_version
from traces.formats import make_parser
from traces.formats.archive import READ_ERRORS
from traces.ingest import IngestSummary, TraceLoader
from traces.models import FollowedFile, Harness
from traces.services.derivation import _sessions_mark, derive_pending_queue

STREAM_PREFIX = "hook:"
MAX_CHUNK_BYTES = 6 * 1024 * 1024  # one request's lines; the client sends 64 KiB at a time
HEAD_BYTES = 64 * 1024  # the client's fingerprint covers at most this many first bytes


@dataclass
class LinesResult:
    offset: int  # the bytes of the transcript now ingested: where the next chunk starts
    lines: int = 0
    calls: int = 0
    compactions: int = 0
    duplicates_dropped: int = 0
    malformed_lines: int = 0
    errors: list[dict] = field(default_factory=list)


def stream_name(path: str) -> str:
    return (STREAM_PREFIX + path)[:1000]


def _stream_row(workspace: Workspace, path: str, harness: str) -> FollowedFile:
    name = stream_name(path)
    try:
        with transaction.atomic():
            row, _ = FollowedFile.objects.get_or_create(
                workspace=workspace, path=name, defaults={"harness": harness}
            )
    except IntegrityError:  # a concurrent first send of the same transcript won
        row = FollowedFile.objects.get(workspace=workspace, path=name)
    return row


def _stream_conflict(row: FollowedFile, reason: str) -> Conflict:
    return Conflict(
        f"{reason}: the server has the first {row.offset:,} bytes of this transcript; send "
        "from there, or from 0 if the file was replaced",
        code="offset_mismatch",
        payload={
            "offset": row.offset,
            "head_size": row.head_size,
            "head_sha256": row.head_sha256,
        },
    )


def _check_chunk(
    row: FollowedFile,
    *,
    offset: int,
    end: int,
    data: bytes,
    head_size: int,
    head_sha256: str,
    restart: bool = False,
) -> bool:
    """Whether this chunk starts the stream again; raises Conflict when it does not follow on
    from what the server has, InputError when it is not whole lines."""
    if len(data) > MAX_CHUNK_BYTES:
        raise InputError.for_fields({"data": f"At most {MAX_CHUNK_BYTES:,} bytes per request."})
    if data and not data.endswith(b"\n"):
        raise InputError.for_fields({"data": "Send whole lines: the data must end in a newline."})
    if end < offset + len(data):
        raise InputError.for_fields({"end": "Must be at least offset + the bytes of data."})
    if offset == 0:
        same_head = (row.head_size, row.head_sha256) == (head_size, head_sha256)
        if row.offset and same_head and head_size and not restart:
            # The client lost its place in a file the server has read further: go on instead.
            raise _stream_conflict(row, "this transcript was sent before")
        return True
    if offset != row.offset:
        raise _stream_conflict(row, f"the chunk starts at byte {offset:,}")
    return False


def transcript_lines_receive(
    *,
    workspace: Workspace,
    actor,
    path: str,
    offset: int,
    end: int,
    data: bytes,
    head_size: int,
    head_sha256: str,
    harness: str = Harness.CLAUDE_CODE,
    restart: bool = False,
) -> LinesResult:
    """Ingest the lines of one transcript between `offset` and `end` (`data`: whole lines;
    a line too long to send is left out of it but within `end`). Answers with the offset now
    ingested; raises Conflict (with the server's offset and head) when the chunk does not
    follow on from what was received. A chunk at offset 0 of a transcript the server has read
    further, with the same first bytes, is a conflict too (the client lost its place), unless
    `restart` says the client found the file truncated."""
    row = _stream_row(workspace, path, harness)
    restart = _check_chunk(
        row, offset=offset, end=end, data=data, head_size=head_size, head_sha256=head_sha256,
        restart=restart,
    )  # fmt: skip
    before = row.offset
    summary = IngestSummary()
    loader = TraceLoader(
        workspace=workspace, summary=summary, file_name=row.path, derive_new_sessions=True
    )
    fmt = harness if restart else (row.harness or harness)
    parser = make_parser(fmt, path, state=None if restart else row.parser_state)
    try:
        for record in parser.parse(data.splitlines(keepends=True)):
            loader.feed(record)
    except READ_ERRORS as exc:
        summary.errors.append({"file": path, "line": None, "error": f"stopped reading: {exc}"})
    # The calls are committed before the offset that says they were read: a failure in
    # between sends these lines again, which adds nothing.
    touched = loader.finish()
    stats = parser.stats
    state = parser.state(lines=parser.first_line - 1 + stats.lines)
    updated = FollowedFile.objects.filter(pk=row.pk, offset=before).update(
        offset=end,
        harness=fmt,
        parser_state=orjson.loads(orjson.dumps(state).replace(b"\\u0000", b"\\ufffd")),
        lines=(0 if restart else row.lines) + stats.lines,
        resets=row.resets + (1 if restart and before else 0),
        head_size=min(head_size, HEAD_BYTES),
        head_sha256=head_sha256[:64],
    )
    if not updated:  # another send of the same lines moved the stream meanwhile
        row.refresh_from_db()
        raise _stream_conflict(row, "another send of this transcript arrived meanwhile")
    if touched:
        # Derived shortly after (debounced), as OTLP's sessions are: never in the hook's time.
        _sessions_mark(touched)
        workspace_id = workspace.pk
        transaction.on_commit(lambda: derive_pending_queue(workspace_id=workspace_id))
    elif summary.derived_sessions:
        workspace_bump_data_version(workspace=workspace)
    audit_record(
        workspace=workspace,
        actor=actor,
        action="trace_hook_lines.receive",
        obj=row,
        data={
            "offset": offset, "end": end, "restart": restart, "lines": stats.lines,
            "calls": summary.calls, "compactions": summary.compactions,
            "malformed_lines": stats.malformed_lines,
        },
    )  # fmt: skip
    return LinesResult(
        offset=end,
        lines=stats.lines,
        calls=summary.calls,
        compactions=summary.compactions,
        duplicates_dropped=stats.duplicates_dropped,
        malformed_lines=stats.malformed_lines,
        errors=summary.errors[:20],
    )
