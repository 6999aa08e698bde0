"""Bounded reads of stored output (tail, head, range, search), each written to the read log."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

from django.db import transaction
from django.utils import timezone

from artifacts.content import reads
from artifacts.content.lines import LimitExceeded, LineIndex
from artifacts.content.search import Matcher, SearchError, scan
from artifacts.models import (
    Artifact,
    ArtifactPolicy,
    ArtifactRead,
    ArtifactReadMode,
    ArtifactState,
)
from artifacts.services.policy import artifact_policy_for
from artifacts.services.retention import ArtifactGone, _mark_gone
from artifacts.storage import blob_open
from governance.models import ApiToken
from governance.services import InputError


class ReadLimitExceeded(InputError):
    """A read asks for more than a workspace limit; `limit` names it."""

    def __init__(self, message: str, *, limit: str, allowed: int):
        super().__init__(message)
        self.limit, self.allowed = limit, allowed


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
    max_matches = _search_bounds(policy, max_matches=max_matches, context=context)
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
    _log(
        artifact,
        reader,
        ArtifactReadMode.SEARCH,
        params | {"max_matches": max_matches, "matches": len(matches)},
        spans,
        min((m.excerpt.start_line for m in matches), default=None),
        max((m.excerpt.end_line for m in matches), default=None),
    )
    return SearchResult(matches, stopped_by is not None, stopped_by, used)


def _search_bounds(policy, *, max_matches: int | None, context: int) -> int:
    """The number of matches to find (the policy's limit by default), within the policy's
    limits on matches and on context lines."""
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
    return max_matches


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
