"""ingest_traces PATH… [--workspace SLUG] [--format auto|claude-code|codex|otlp-json] [--json]
ingest_traces --follow PATH… [--workspace SLUG] [--interval SECONDS]"""

import gc
import json
import os
import signal
import sys
import threading
import time

from django.core.management.base import BaseCommand, CommandError

from governance.models import Workspace
from governance.services import InputError
from traces.formats import FORMATS
from traces.services import ingest_paths
from traces.services.follow import Follower, follow_database_recover

DEFAULT_WORKERS = min(4, os.cpu_count() or 1)


class Command(BaseCommand):
    help = (
        "Ingest Claude Code, Codex or OTLP/JSON trace files, folders (recursively) or globs. "
        "Archives (.zip, .tar.gz) are unpacked safely. Re-ingesting the same bytes adds nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument(
            "--workspace", default=None, help="Workspace slug (default: the only one)."
        )
        parser.add_argument("--format", default="auto", choices=["auto", *FORMATS])
        parser.add_argument(
            "--workers",
            type=int,
            default=DEFAULT_WORKERS,
            help=f"Ingest files in this many processes (default {DEFAULT_WORKERS}: the cores, "
            "up to 4).",
        )
        parser.add_argument(
            "--no-analytics",
            action="store_true",
            help="Do not queue the analytics refresh (e.g. before ingesting more folders).",
        )
        parser.add_argument(
            "--json", action="store_true", help="Print one JSON summary and nothing else."
        )
        parser.add_argument(
            "--follow",
            action="store_true",
            help="Keep running: ingest new files and appended lines as they are written, "
            "reading each file on from where it was last read. Stop with Ctrl-C or SIGTERM.",
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=0.5,
            help="With --follow: seconds between polls of the files (default 0.5).",
        )
        parser.add_argument(
            "--status-every",
            type=float,
            default=30.0,
            help="With --follow and output that is not a terminal: seconds between status "
            "lines (default 30; a terminal shows one line, rewritten in place).",
        )

    def handle(
        self, *args, paths, workspace, format, json: bool, workers: int, no_analytics, **options
    ):
        target = self._workspace(workspace)
        if options.get("follow"):
            if format != "auto" or json:
                raise CommandError(
                    "--follow detects each file's format and prints status lines: "
                    "leave out --format and --json."
                )
            self._follow(
                target,
                paths,
                no_analytics=no_analytics,
                interval=options["interval"],
                status_every=options["status_every"],
            )
            return
        progress = None
        task = None
        if sys.stderr.isatty() and not json:
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

            progress = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
            )
            progress.start()
            task = progress.add_task("Ingesting", total=None)

        def on_progress(done, total):
            if progress is not None:
                progress.update(task, completed=done, total=total)

        gc.freeze()  # a one-shot process: the collector need not walk what is loaded so far
        try:
            summary = ingest_paths(
                workspace=target,
                paths=paths,
                fmt=format,
                workers=max(1, workers),
                on_progress=on_progress,
                refresh_analytics=not no_analytics,
            )
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            if progress is not None:
                progress.stop()
        result = summary.as_dict()
        if json:
            self.stdout.write(_dumps(result))
            return
        self.stdout.write(
            f"{result['files']} file(s): {result['calls']} new calls in {result['sessions']} new sessions, "
            f"{result['agents']} new agents, {result['compactions']} compactions; "
            f"{result['duplicates_dropped']} duplicate lines dropped, {result['malformed_lines']} malformed lines."
        )
        if summary.skipped_files:
            self.stdout.write(
                f"{summary.skipped_files} file(s) were already ingested (same bytes): nothing added."
            )
        for error in result["errors"][:50]:
            where = error["file"] + (f":{error['line']}" if error.get("line") else "")
            self.stderr.write(f"{where}: {error['error']}")
        if len(result["errors"]) > 50:
            self.stderr.write(
                f"… and {len(result['errors']) - 50} more errors (use --json to see all)"
            )

    def _follow(self, workspace, paths, *, no_analytics: bool, interval: float, status_every):
        """Poll until Ctrl-C or SIGTERM; the status goes to stdout, errors to stderr."""
        try:
            follower = Follower(
                workspace=workspace, paths=paths, refresh_analytics=not no_analytics
            )
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, lambda *_: stop.set())
        status = _StatusLine(self.stdout, self.stderr, every=status_every)
        status.note(
            f"Following {', '.join(paths)} into workspace {workspace.slug} "
            f"(every {interval:g} s; Ctrl-C stops)."
        )
        while not stop.is_set():
            started = time.monotonic()
            try:
                follower.poll()
            except InputError as exc:
                status.error(str(exc))
            except Exception as exc:  # the database went away, a file vanished mid-read …
                status.error(f"poll failed, trying again: {type(exc).__name__}: {exc}")
                follow_database_recover()
            for error in follower.status.errors:
                where = error["file"] + (f":{error['line']}" if error.get("line") else "")
                status.error(f"{where}: {error['error']}")
            follower.status.errors = []
            status.show(follower.status.line())
            stop.wait(max(0.0, interval - (time.monotonic() - started)))
        follower.close()
        status.show(follower.status.line(), final=True)

    def _workspace(self, slug):
        if slug:
            found = Workspace.objects.filter(slug=slug).first()
            if found is None:
                raise CommandError(f"No workspace {slug!r}.")
            return found
        workspaces = list(Workspace.objects.all()[:2])
        if len(workspaces) != 1:
            raise CommandError("Name the workspace with --workspace SLUG.")
        return workspaces[0]


def _dumps(data) -> str:
    return json.dumps(data, ensure_ascii=False)


class _StatusLine:
    """One line rewritten in place on a terminal; elsewhere (a log, a pipe) a plain line
    every `every` seconds when it changed, and the last one at exit."""

    def __init__(self, stdout, stderr, *, every: float):
        self.stdout, self.stderr = stdout, stderr
        self.tty = stdout.isatty()
        self.every = every
        self.shown = ""
        self.shown_at: float | None = None  # the first line is printed at once

    def note(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def error(self, text: str) -> None:
        if self.tty and self.shown:
            self.stdout.write("\r\x1b[K", ending="")
            self.shown = ""
        self.stderr.write(text)
        self.stderr.flush()

    def show(self, text: str, *, final: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            if text != self.shown or final:
                self.stdout.write("\r\x1b[K" + text, ending="\n" if final else "")
                self.stdout.flush()
                self.shown = text
            return
        due = self.shown_at is None or now - self.shown_at >= self.every
        if final or (text != self.shown and due):
            self.stdout.write(text)
            self.stdout.flush()
            self.shown, self.shown_at = text, now
