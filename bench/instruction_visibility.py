"""Instruction-visibility benchmark: `python -m bench.instruction_visibility [--calls 1000000]`.

Builds, in one PostgreSQL database, a workspace of --calls calls (COPY-loaded by
`bench.analytics.generate`) and one of --slice calls (100,000), gives every call a stored
text (zstd JSON, as the loader writes it) drawn from a pool with thinking blocks, some
quoting the instruction exactly or in capitals, prompts and tool results that deliver it,
then times, median of --repeat, each way in turn in the same run:

* the after-ingest extract tasks' work for every session at --calls with the extract emptied first (every
  text decompressed and extracted), and the count (`instruction_visibility_for`, no call
  limit) with the extract filled;
* the floor: one SQL `count(*)` of the extracted thinking texts holding the instruction
  (`strpos`), over the same calls;
* on the --slice workspace, a request with the extract empty (in memory, read-only),
  main's on-request path before the extract (`bench/instruction_visibility_previous.py`)
  and the new path (extract filled).

Both paths must give the same counts. `--reuse` keeps a database built before. Writes the
figures, machine and command into bench/RESULTS.md ("Instruction visibility").
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DB = os.environ.get("BENCH_DB", "gov_iv18_bench")
POOL = 6000
INSTRUCTION = "Never commit directly to main; open a pull request."
WORDS = [
    "the",
    "parser",
    "test",
    "file",
    "function",
    "module",
    "import",
    "value",
    "error",
    "branch",
    "retry",
    "cache",
    "index",
    "query",
    "table",
    "column",
    "request",
    "handler",
    "response",
    "schema",
    "migration",
    "fixture",
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def text_pool(seed: int) -> list[dict]:
    """POOL call texts: 60% with thinking (1–3 blocks, some blank), of which 8% quote the
    instruction exactly and 4% in capitals; 2% of prompts and 1% of tool results hold it."""
    rng = random.Random(seed)
    pool = []
    for n in range(POOL):
        blocks: list[dict] = []
        if rng.random() < 0.6:
            for _ in range(rng.choice([1, 1, 2, 3])):
                blocks.append({"type": "thinking", "text": _prose(rng, rng.randint(20, 120))})
            draw = rng.random()
            if draw < 0.08:
                blocks[-1]["text"] += f" The user said: {INSTRUCTION}"
            elif draw < 0.12:
                blocks[0]["text"] += " " + INSTRUCTION.upper()
            if rng.random() < 0.05:
                blocks.append({"type": "thinking", "text": "  "})
        blocks.append({"type": "text", "text": f"Step {n} done."})
        text: dict = {"blocks": blocks}
        if rng.random() < 0.1:
            text["prompt"] = _prose(rng, 15) + (
                f" Rule: {INSTRUCTION}" if rng.random() < 0.2 else ""
            )
        results = {}
        for k in range(rng.choice([0, 1, 1, 2])):
            content = _prose(rng, rng.randint(50, 300))
            if rng.random() < 0.01:
                content += f"\n- {INSTRUCTION}\n"
            results[f"toolu_{n:05d}_{k}"] = {"content": content, "is_error": False}
        if results:
            text["results"] = results
        pool.append(text)
    return pool


def add_texts(workspace, seed: int) -> int:
    import orjson
    import zstandard
    from django.db import connection

    from traces.ingest.writes import TEXT_COMPRESSOR_LEVEL

    compressor = zstandard.ZstdCompressor(level=TEXT_COMPRESSOR_LEVEL)
    data = [compressor.compress(orjson.dumps(t)) for t in text_pool(seed)]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM traces_call WHERE workspace_id = %s ORDER BY id", [workspace.pk]
        )
        ids = [row[0] for row in cursor.fetchall()]
        choice = np.random.default_rng(seed).integers(0, POOL, len(ids)).tolist()
        with cursor.cursor.copy("COPY traces_calltext (call_id, data) FROM STDIN") as copy:
            for pk, k in zip(ids, choice, strict=True):
                copy.write_row((pk, data[k]))
    return len(ids)


def workspace_for(slug: str, calls: int, seed: int):
    from django.db import connection

    from bench.analytics import generate
    from governance.models import Workspace
    from governance.services import workspace_create
    from traces.models import Call

    workspace = Workspace.objects.filter(slug=slug).first()
    if workspace is not None:
        have = Call.objects.filter(workspace=workspace).count()
        if have >= calls * 0.9:
            log(f"{slug}: reused, {have:,} calls")
            return workspace, have
        raise SystemExit(f"{slug} is built partly or at another size: drop {DB}")
    workspace = workspace_create(slug=slug, name=slug)
    start = time.perf_counter()
    built = generate(workspace, calls, seed=seed, prefix=slug)
    texts = add_texts(workspace, seed=10 + seed)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    log(f"{slug}: built {built}, {texts:,} texts in {time.perf_counter() - start:.0f} s")
    return workspace, texts


def comparable(result: dict) -> dict:
    keys = ("overall", "by_turns", "calls_outside_window", "sessions", "sessions_delivered")
    out = {k: result[k] for k in keys}
    out["by_session"] = sorted(
        (
            {k: row[k] for k in ("session", "n", "exact", "normalised", "thinking_blocks")}
            for row in result["by_session"]
        ),
        key=lambda r: r["session"],
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--slice", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument(
        "--empty-repeat",
        type=int,
        default=None,
        help="Runs with the extract emptied first (default --repeat; each decompresses all).",
    )
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{DB}"
    os.environ.setdefault("GOVERNANCE_LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    if not args.reuse:
        subprocess.run(
            ["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", DB], check=True
        )
    subprocess.run(
        ["createdb", "-h", "127.0.0.1", "-U", "postgres", DB], check=False, capture_output=True
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    import django

    django.setup()
    from django.db import close_old_connections, connection

    from bench.common import write_section
    from bench.instruction_visibility_previous import count_previous
    from traces.analytics.instruction_visibility_matching import extract_missing, stale_call_ids
    from traces.analytics.instruction_visibility_selectors import (
        instruction_visibility_for,
        subject_for,
    )
    from traces.analytics.selectors import AnalyticsFilters

    big, big_calls = workspace_for("iv-large", args.calls, seed=1)
    small, small_calls = workspace_for("iv-slice", args.slice, seed=2)
    filters = AnalyticsFilters()

    def count(workspace, store: bool = False) -> dict:
        close_old_connections()
        connection.close()  # cold: a new connection
        subject = subject_for(workspace=workspace, instruction=INSTRUCTION)
        return instruction_visibility_for(
            workspace=workspace, filters=filters, subject=subject, max_calls=None, store=store
        )

    def fill(workspace) -> int:
        """The after-ingest job's work: every missing extract of the workspace stored."""
        connection.close()
        return extract_missing(stale_call_ids(workspace.pk))

    def extracts() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM analytics_calltextextract")
            return cursor.fetchone()[0]

    def floor(workspace) -> int:
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM analytics_calltextextract e JOIN traces_call c "
                "ON c.id = e.call_id WHERE c.workspace_id = %s AND strpos(e.thinking, %s) > 0",
                [workspace.pk, INSTRUCTION],
            )
            return cursor.fetchone()[0]

    def previous(workspace) -> dict:
        connection.close()
        subject = subject_for(workspace=workspace, instruction=INSTRUCTION)
        return count_previous(workspace=workspace, filters=filters, subject=subject)

    def clock(fn, *a):
        start = time.perf_counter()
        value = fn(*a)
        return time.perf_counter() - start, value

    samples: dict[str, list[float]] = {
        k: [] for k in ("fill", "slice empty", "filled", "floor", "slice new", "slice previous")
    }
    checks = {}
    empty_repeat = args.repeat if args.empty_repeat is None else args.empty_repeat
    for r in range(args.repeat):
        if r < empty_repeat:
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE analytics_calltextextract")
            seconds, written = clock(fill, big)
            samples["fill"].append(seconds)
            assert written == big_calls, (written, big_calls)
            # A request at the slice with none of its texts extracted: read-only.
            before = extracts()
            seconds, empty_slice = clock(count, small)
            samples["slice empty"].append(seconds)
            assert extracts() == before, "a request wrote extracts"
            fill(small)  # the slice's extract, filled before it is timed
        seconds, filled = clock(count, big)
        samples["filled"].append(seconds)
        seconds, floor_count = clock(floor, big)
        samples["floor"].append(seconds)
        seconds, new_slice = clock(count, small)
        samples["slice new"].append(seconds)
        seconds, old_slice = clock(previous, small)
        samples["slice previous"].append(seconds)
        assert comparable(new_slice) == comparable(old_slice), "the paths disagree"
        if r < empty_repeat:
            assert comparable(empty_slice) == comparable(old_slice), "the paths disagree"
        checks = {"overall": filled["overall"], "floor": floor_count, "slice": new_slice["overall"]}
        log(f"run {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in samples.items() if v))
    median = {k: statistics.median(v) for k, v in samples.items()}
    load = os.getloadavg()[0]

    def cell(key: str) -> str:
        return f"{median[key]:.2f} ({', '.join(f'{s:.2f}' for s in samples[key])})"

    o = checks["overall"]
    body = f"""
Instruction visibility (seed 000), cold (a new database connection), median of
{args.repeat} runs, each way in turn in the same run. *After-ingest extract*: the work
the tasks the derive step sends on commit do (`instruction_visibility_extracts`, one per
transaction, for the sessions it derived), for every session at once: every
call's stored text decompressed once and its extract (`CallTextExtract`) written, with the
extract emptied first ({empty_repeat} run(s)). *Count, extract filled*: the count as a job or
a request makes it (`instruction_visibility_for`, no call limit): one query reads every call
of the agents reached with its matches (exact and normalised on the stored thinking,
delivery on the stored prompt and tool-result texts, all `strpos`, computed as the extract
is scanned) and its extract's staleness; delivery and counts in numpy. *Floor*: one SQL
`count(*)` of the extracted thinking texts that hold the instruction (`strpos`) over the
same calls: the least any count can cost once the text is extracted. On a
{small_calls:,}-call workspace: a request with none of its texts extracted (each extracted in
memory, nothing written: the extract table's row count is checked unchanged), the new path
(extract filled), and *previous*: main's on-request path before the extract (every selected
agent's text decompressed and matched in Python, call by call). All paths gave the same
counts on every run. The corpora are COPY-loaded (`bench.analytics.generate`), each call with
a text drawn from {POOL:,} generated ones (thinking in 60%; 8% of those quote the instruction
exactly, 4% in capitals; prompts and tool results deliver it). Load average at the end:
{load:.1f} on {os.cpu_count()} cores (the machine is shared with other work).

| Way | Calls | Median s (runs) | Ratio |
|---|---:|---:|---:|
| after-ingest extract (all sessions), extract empty | {big_calls:,} | {cell("fill")} | {median["fill"] / median["floor"]:.0f}× floor |
| count, extract filled | {big_calls:,} | {cell("filled")} | {median["filled"] / median["floor"]:.1f}× floor |
| floor: SQL `strpos` count of thinking texts | {big_calls:,} | {cell("floor")} | 1× |
| request, extract empty (in memory, read-only) | {small_calls:,} | {cell("slice empty")} | {median["slice empty"] / median["slice new"]:.1f}× new |
| new path (extract filled) | {small_calls:,} | {cell("slice new")} | 1× |
| previous (main's on-request path) | {small_calls:,} | {cell("slice previous")} | {median["slice previous"] / median["slice new"]:.1f}× new |

At {big_calls:,} calls: n = {o["n"]:,} calls with visible thinking in the window, exact
{o["exact"]["count"]:,}, normalised {o["normalised"]["count"]:,}; the floor counted
{checks["floor"]:,} thinking texts holding the instruction (every call, in the window or
not).
"""
    write_section(
        "Instruction visibility",
        body,
        command=f"python -m bench.instruction_visibility --calls {args.calls} --repeat {args.repeat}"
        + (f" --empty-repeat {args.empty_repeat}" if args.empty_repeat is not None else "")
        + (" --reuse" if args.reuse else ""),
    )
    print(body)


if __name__ == "__main__":
    main()
