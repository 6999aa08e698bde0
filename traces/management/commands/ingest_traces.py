"""ingest_traces PATH… [--workspace SLUG] [--format auto|claude-code|codex|otlp-json] [--json]"""

import gc
import json
import os
import sys

from django.core.management.base import BaseCommand, CommandError

from governance.models import Workspace
from governance.services import InputError
from traces.formats import FORMATS
from traces.services import ingest_paths

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

    def handle(
        self, *args, paths, workspace, format, json: bool, workers: int, no_analytics, **options
    ):
        target = self._workspace(workspace)
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
