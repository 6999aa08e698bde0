"""Follow transcript folders live (`ingest_traces --follow`): each Claude Code or Codex
file is read from the byte offset where its last read ended, with the parser state saved
then, so a growing transcript is never parsed again from its start.

Polling, not file-system events: a `stat` of every followed file per interval is cheap
(about 3 µs a file), works the same on every OS, on network and bind-mounted folders
(where inotify sees no writes made on the other side) and needs no dependency.

Only complete lines are read: a last line without its newline is left for the next
poll. A file that shrank, whose first bytes changed, or whose inode changed (replaced by
a rename) is read again from the start; every write is keyed by the call's natural key,
so reading it again counts nothing twice.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from django.db import DatabaseError, connection

from governance.models import Workspace
from governance.services import InputError, audit_record, workspace_bump_data_version
from traces.formats import RESUMABLE_FORMATS, detect_format, make_parser
from traces.formats.archive import READ_ERRORS
from traces.ingest import IngestSummary, TraceLoader
from traces.models import FollowedFile, IngestedFile
from traces.services._common import CHUNK, _refresh_analytics
from traces.services.derivation import sessions_derive

FOLLOWED_SUFFIX = ".jsonl"
HEAD_BYTES = 64 * 1024  # the fingerprint covers at most this many first bytes
DETECT_BYTES = 8 * 1024 * 1024
SIDECAR_MAX_BYTES = 64 * 1024
ANALYTICS_EVERY_SECONDS = 300  # a live follow refreshes the analytics at most this often


@dataclass
class FollowStatus:
    """What a follower did since it started: the command's status line."""

    files: int = 0  # followed now
    reads: int = 0  # reads that ingested at least one line
    lines: int = 0
    resets: int = 0
    summary: IngestSummary = field(default_factory=IngestSummary)
    last_read_at: float | None = None
    errors: list[dict] = field(default_factory=list)  # not yet shown

    def line(self) -> str:
        s = self.summary
        last = (
            time.strftime("%H:%M:%S", time.localtime(self.last_read_at))
            if self.last_read_at
            else "—"
        )
        return (
            f"following {self.files:,} files · {self.reads:,} reads, {self.lines:,} lines · "
            f"{s.calls:,} new calls, {s.sessions:,} new sessions, {s.compactions:,} compactions · "
            f"{self.resets:,} files re-read · {len(s.errors):,} errors · last read {last}"
        )


@dataclass
class _Seen:
    """A followed file as the last poll saw it, and its stored row."""

    row: FollowedFile
    stat: tuple[int, int, int, int] = (-1, -1, -1, -1)  # size, mtime_ns, device, inode
    # Never followed before: earlier one-shot reads of a file by its name, to go on from.
    earlier: list[IngestedFile] = field(default_factory=list)


class Follower:
    """Poll folders and files for Claude Code and Codex transcripts and ingest what they
    gained since the last poll. `poll()` is one pass; the command calls it in a loop."""

    def __init__(self, *, workspace: Workspace, paths: list[str], refresh_analytics: bool = True):
        self.workspace = workspace
        self.roots = [Path(os.path.expanduser(p)).resolve() for p in paths]
        missing = [str(p) for p in self.roots if not p.exists()]
        if missing:
            raise InputError(f"{', '.join(missing)}: no such file or folder")
        self.refresh_analytics = refresh_analytics
        self.status = FollowStatus()
        self._seen: dict[str, _Seen] = {}
        self._ignored: set[str] = set()  # files of no followed format
        self._underived: set[int] = set()  # sessions that gained calls, not yet derived
        self._analytics_due = False
        self._analytics_at = 0.0

    # --- the loop's one pass ----------------------------------------------------------

    def poll(self) -> int:
        """Read what every followed file gained; returns the lines ingested."""
        found = self._scan()
        for gone in set(self._seen) - set(found):
            del self._seen[gone]  # its row stays: if it comes back, its head is compared
        self._load_rows([path for path in found if path not in self._seen])
        self.status.files = len(self._seen)
        changed = [
            (self._seen[path], stat)
            for path, stat in found.items()
            if self._seen[path].stat != stat
        ]
        if not changed:
            self._derive()
            return 0
        summary = IngestSummary()
        loader = TraceLoader(workspace=self.workspace, summary=summary, file_name="")
        read: list[tuple[_Seen, tuple]] = []
        lines = files_with_lines = 0
        try:
            for seen, stat in changed:
                try:
                    added = self._read(seen, stat, loader)
                except OSError as exc:  # vanished or unreadable between the scan and the read
                    summary.errors.append({"file": seen.row.path, "line": None, "error": str(exc)})
                    self._forget([(seen, stat)])
                    continue
                read.append((seen, stat))
                lines += added
                files_with_lines += bool(added)
            # The calls are committed before the offsets that say they were read: a crash
            # in between reads those lines again, which adds nothing.
            self._underived |= loader.finish()
            for seen, stat in read:
                seen.row.save()
                seen.stat = stat
        except BaseException:
            # Rows advanced in memory whose calls may not be stored: read from the database
            # again at the next poll.
            self._forget(changed)
            raise
        self._derive()
        self.status.summary.merge(summary)
        self.status.errors += summary.errors
        if lines:
            self.status.reads += files_with_lines
            self.status.lines += lines
            self.status.last_read_at = time.time()
        return lines

    def _forget(self, items: list[tuple[_Seen, tuple]]) -> None:
        for seen, _ in items:
            self._seen.pop(seen.row.path, None)

    def _derive(self) -> None:
        """Derive the sessions that gained calls; those a failure left are tried again at
        the next poll."""
        if self._underived:
            sessions_derive(session_ids=self._underived)
            self._underived = set()
            workspace_bump_data_version(workspace=self.workspace)
            self._analytics_due = True
        self._maybe_refresh_analytics()

    def close(self) -> None:
        """At exit: refresh the analytics if new calls wait for it, and record the run
        once in the audit log with its counts (as a one-shot `ingest_traces` run is)."""
        self._refresh_if_due()
        status = self.status
        audit_record(
            workspace=self.workspace,
            actor=None,
            action="trace_ingest.follow",
            data={
                "paths": [str(root) for root in self.roots],
                "followed_files": status.files,
                "reads": status.reads,
                "lines": status.lines,
                "resets": status.resets,
                **status.summary.counts(),
                "errors": len(status.summary.errors),
            },
        )

    def _refresh_if_due(self) -> None:
        if self._analytics_due and self.refresh_analytics:
            _refresh_analytics(self.workspace)
            self._analytics_due = False

    def _maybe_refresh_analytics(self) -> None:
        now = time.monotonic()
        if self._analytics_due and now - self._analytics_at >= ANALYTICS_EVERY_SECONDS:
            self._analytics_at = now
            self._refresh_if_due()

    # --- finding files ----------------------------------------------------------------

    def _scan(self) -> dict[str, tuple[int, int, int, int]]:
        found: dict[str, tuple[int, int, int, int]] = {}
        for root in self.roots:
            if root.is_file():
                self._note(found, str(root))
            elif root.is_dir():
                self._walk(str(root), found)
        return found

    def _walk(self, folder: str, found: dict) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return  # removed meanwhile, or unreadable
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                self._walk(entry.path, found)
            elif entry.name.endswith(FOLLOWED_SUFFIX):
                self._note(found, entry.path)

    @staticmethod
    def _note(found: dict, path: str) -> None:
        try:
            st = os.stat(path)
        except OSError:
            return
        found[path] = (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)

    def _load_rows(self, paths: list[str]) -> None:
        if not paths:
            return
        rows = {
            row.path: row
            for row in FollowedFile.objects.filter(workspace=self.workspace, path__in=paths)
        }
        new_names = {os.path.basename(path) for path in paths if path not in rows}
        earlier: dict[str, list[IngestedFile]] = {}
        if new_names:
            for read in IngestedFile.objects.filter(
                workspace=self.workspace,
                member__in=new_names,
                complete=True,
                parser_state__isnull=False,
                harness__in=RESUMABLE_FORMATS,
            ).order_by("-size"):
                earlier.setdefault(read.member, []).append(read)
        for path in paths:
            row = rows.get(path)
            if row is not None:
                self._seen[path] = _Seen(row)
            else:
                row = FollowedFile(workspace=self.workspace, path=path)
                self._seen[path] = _Seen(row, earlier=earlier.get(os.path.basename(path), []))

    # --- reading one file -------------------------------------------------------------

    def _read(self, seen: _Seen, stat: tuple[int, int, int, int], loader: TraceLoader) -> int:
        row = seen.row
        size, _, device, inode = stat
        with open(row.path, "rb") as handle:
            if seen.earlier:
                _resume_from_earlier_read(row, handle, size, seen.earlier)
                seen.earlier = []
            if row.offset and self._replaced(row, handle, size, device, inode):
                self._reset(row)
            row.device, row.inode = device, inode
            if size <= row.offset:
                return 0
            if not row.harness and not self._detect(row, handle, loader.summary):
                return 0
            handle.seek(row.offset)
            lines = _CompleteLines(handle)
            parser = make_parser(row.harness, row.path, _sidecar(row.path), state=row.parser_state)
            loader.file_name = row.path
            loader.source_file_id = None
            try:
                for record in parser.parse(lines):
                    loader.feed(record)
            except READ_ERRORS as exc:
                loader.summary.errors.append(
                    {"file": row.path, "line": None, "error": f"stopped reading: {exc}"}
                )
            stats = parser.stats
            loader.summary.files += 1
            loader.summary.duplicates_dropped += stats.duplicates_dropped
            loader.summary.malformed_lines += stats.malformed_lines
            state = parser.state(lines=parser.first_line - 1 + stats.lines)
            row.parser_state = orjson.loads(orjson.dumps(state).replace(b"\\u0000", b"\\ufffd"))
            row.offset += lines.consumed
            row.lines += stats.lines
            if row.head_size < min(row.offset, HEAD_BYTES):
                handle.seek(0)
                head = handle.read(min(row.offset, HEAD_BYTES))
                row.head_size, row.head_sha256 = len(head), hashlib.sha256(head).hexdigest()
            return stats.lines

    def _replaced(self, row: FollowedFile, handle, size: int, device: int, inode: int) -> bool:
        if size < row.offset:
            return True
        if row.inode and (row.device, row.inode) != (device, inode):
            return True
        handle.seek(0)
        head = handle.read(row.head_size)
        return hashlib.sha256(head).hexdigest() != row.head_sha256

    def _reset(self, row: FollowedFile) -> None:
        row.offset = 0
        row.parser_state = None
        row.harness = ""
        row.head_size, row.head_sha256 = 0, ""
        row.lines = 0
        row.resets += 1
        self.status.resets += 1

    def _detect(self, row: FollowedFile, handle, summary: IngestSummary) -> bool:
        """Find the format from the first complete lines; False until it can be told, and
        for a file of no followed format (reported once, then left alone)."""
        if row.path in self._ignored:
            return False
        handle.seek(0)
        head = handle.read(DETECT_BYTES)
        complete = head[: head.rfind(b"\n") + 1]
        if not complete:
            return False
        detection = detect_format(row.path, io.BytesIO(complete))
        if detection.format in RESUMABLE_FORMATS:
            row.harness = detection.format
            return True
        if detection.format is None and (detection.empty or len(head) < DETECT_BYTES):
            return False  # perhaps the next lines tell
        reason = (
            f"{detection.format} files are not followed (only Claude Code and Codex transcripts)"
            if detection.format
            else detection.reason
        )
        summary.errors.append({"file": row.path, "line": detection.line, "error": reason})
        self._ignored.add(row.path)
        return False


def _resume_from_earlier_read(row: FollowedFile, handle, size: int, earlier: list) -> None:
    """A file first followed after a one-shot ingest read it: go on from where that read
    stopped (its parser state and offset), if the file still begins with the bytes it read."""
    for read in earlier:
        if read.size > size or "offset" not in read.parser_state:
            continue
        handle.seek(0)
        digest = hashlib.sha256()
        left = read.size
        while left:
            chunk = handle.read(min(CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
        if digest.hexdigest() != read.sha256:
            continue
        row.harness = read.harness
        row.offset = read.parser_state["offset"]
        row.parser_state = read.parser_state
        row.lines = int(read.parser_state.get("lines") or 0)
        handle.seek(0)
        head = handle.read(min(row.offset, HEAD_BYTES))
        row.head_size, row.head_sha256 = len(head), hashlib.sha256(head).hexdigest()
        return


class _CompleteLines:
    """The lines of a file from where it stands, each ending in a newline; stops before a
    last line still being written. `consumed` counts the bytes handed out."""

    def __init__(self, handle):
        self.handle = handle
        self.consumed = 0

    def __iter__(self) -> Iterator[bytes]:
        for line in self.handle:
            if not line.endswith(b"\n"):
                return
            self.consumed += len(line)
            yield line


def _sidecar(path: str) -> dict | None:
    """A subagent file's `agent-<id>.meta.json` beside it, if there is one."""
    sibling = path.removesuffix(FOLLOWED_SUFFIX) + ".meta.json"
    try:
        if os.path.getsize(sibling) > SIDECAR_MAX_BYTES:
            return None
        with open(sibling, "rb") as handle:
            data = orjson.loads(handle.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def follow_database_recover() -> None:
    """After a database error: drop the broken connection; the next poll opens a new one."""
    try:
        connection.close()
    except DatabaseError:
        pass
