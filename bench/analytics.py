"""Analytics benchmark: `python -m bench.analytics [--calls 1000000]`.

Builds a PostgreSQL database holding --calls calls (agents with planted growth,
compactions, runs and file touches, bulk-loaded with COPY), then measures:

* a cold computation of every analysis (the job's work), median of 3;
* server time of the analytics pages once the result is cached (p50/p95 over 60
  requests through Django's test client), against /healthz measured the same way.

Writes the figures, machine and command into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DB = "gov_bench_analytics"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def setup_database() -> None:
    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", DB], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", DB], check=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)


def generate(
    workspace,
    target_calls: int,
    seed: int = 1,
    *,
    compact_at: int = 180_000,
    post_compaction: tuple[int, int] = (52_000, 68_000),
    main_every: int = 4,
    prefix: str = "bench",
) -> dict:
    """Agents of lognormal length whose context grows as D(C) ∝ C^(2−2.55), compacting at
    `compact_at` (~180k) back to `post_compaction`; one agent in `main_every` is a main
    thread."""
    from django.db import connection

    from traces.models import Session

    rng = np.random.default_rng(seed)
    start = datetime(2026, 9, 1, tzinfo=UTC).timestamp()
    sessions = []
    calls = agents = compactions = runs = touches = 0
    call_rows, agent_rows, compaction_rows, run_rows, touch_rows = [], [], [], [], []
    session_count = max(1, target_calls // 4000)
    for s in range(session_count):
        sessions.append(
            Session(
                workspace=workspace,
                harness="claude-code",
                external_id=f"{prefix}-{s:06d}",
                project=f"/repo/p{s % 7}",
                call_count=0,
            )
        )
    Session.objects.bulk_create(sessions, batch_size=2000)
    session_ids = list(
        Session.objects.filter(workspace=workspace, external_id__startswith=f"{prefix}-")
        .order_by("id")
        .values_list("id", flat=True)
    )
    # Ids continue after what the database holds, so the corpus can be added to a seeded one.
    with connection.cursor() as cursor:
        starts = []
        for table in ("traces_agent", "traces_run", "traces_compaction", "traces_call"):
            cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
            starts.append(cursor.fetchone()[0])
    agent_id, run_id, compaction_id, call_id = starts
    while calls < target_calls:
        session = session_ids[agents % len(session_ids)]
        agent_id += 1
        n = int(min(max(rng.lognormal(5.5, 0.8), 20), 3000))
        n = min(n, target_calls - calls)
        kind = "main" if agent_id % main_every == 1 % main_every else "subagent"
        context = np.empty(n)
        run_index = np.empty(n, dtype=np.int64)
        c = (
            rng.uniform(15_000, 30_000)
            if kind == "subagent" or rng.random() > 0.1
            else rng.uniform(150_000, 400_000)
        )
        initial = c
        r = 0
        rediscovery = 0
        agent_compactions = []
        for i in range(n):
            growth = (
                2_000
                * (c / 100_000) ** (-0.55)
                * rng.lognormal(0, 0.25)
                * (2.2 if rediscovery else 1.0)
            )
            rediscovery = max(0, rediscovery - 1)
            c += growth
            if c > compact_at and i + 1 < n:
                post = rng.uniform(*post_compaction)
                agent_compactions.append((i + 1, c, post))
                c = post
                r += 1
                rediscovery = 25
            context[i] = c
            run_index[i] = r
        output = rng.lognormal(5.2, 0.6, n).astype(np.int64)
        stamps = start + agent_id * 600 + np.cumsum(rng.uniform(4, 40, n))
        ids = np.arange(call_id + 1, call_id + n + 1)
        call_id += n
        ctx = context.astype(np.int64)
        cache_creation = np.r_[ctx[0], np.maximum(np.diff(ctx), 0)]
        cache_read = np.maximum(ctx - cache_creation - 3, 0)
        for j in range(n):
            call_rows.append(
                (
                    int(ids[j]),
                    workspace.pk,
                    session,
                    agent_id,
                    f"m{ids[j]}",
                    j,
                    j,
                    datetime.fromtimestamp(float(stamps[j]), tz=UTC),
                    "claude-sonnet-4-5",
                    3,
                    int(cache_creation[j]),
                    int(cache_read[j]),
                    int(output[j]),
                    0,
                    int(ctx[j]),
                    kind != "main",
                    "Read Edit",
                    "",
                    j + 1,
                )
            )
        agent_rows.append(
            (
                agent_id,
                workspace.pk,
                session,
                f"a{agent_id}",
                kind,
                "fork" if initial > 100_000 else "fresh",
                int(initial),
                n,
            )
        )
        bounds = [0] + [i for i, _, _ in agent_compactions] + [n]
        for k in range(len(bounds) - 1):
            run_id += 1
            first, last = bounds[k], bounds[k + 1] - 1
            started_by = None
            if k > 0:
                compaction_id += 1
                i, pre, post = agent_compactions[k - 1]
                compaction_rows.append(
                    (
                        compaction_id,
                        workspace.pk,
                        session,
                        agent_id,
                        f"c{compaction_id}",
                        "full",
                        datetime.fromtimestamp(float(stamps[i]) - 1, tz=UTC),
                        "auto",
                        i - 1,
                        i,
                        int(pre),
                        int(post),
                        4_400,
                        True,
                        90_000,
                    )
                )
                started_by = compaction_id
            segment = ctx[first : last + 1]
            run_rows.append(
                (
                    run_id,
                    workspace.pk,
                    session,
                    agent_id,
                    k,
                    started_by,
                    first,
                    last,
                    last - first + 1,
                    int(segment.max()),
                    int(np.median(segment)),
                    ["building", "research", "qa", "pr_to_merge", "code_understanding"][
                        agent_id % 5
                    ],
                    "",
                )
            )
        paths = rng.integers(0, 40, n)
        position = np.cumsum(np.r_[ctx[0], np.maximum(np.diff(ctx), 0)])
        for j in range(0, n, 2):
            touch_rows.append(
                (
                    workspace.pk,
                    session,
                    agent_id,
                    int(run_index[j]),
                    j,
                    f"src/f{paths[j]}.py",
                    "read",
                    int(position[j]),
                )
            )
        calls += n
        agents += 1
        compactions += len(agent_compactions)
        runs += len(bounds) - 1
        touches += (n + 1) // 2
        if len(call_rows) > 200_000:
            _flush(connection, call_rows, agent_rows, compaction_rows, run_rows, touch_rows)
    _flush(connection, call_rows, agent_rows, compaction_rows, run_rows, touch_rows)
    with connection.cursor() as cursor:
        for table in ("traces_agent", "traces_run", "traces_compaction", "traces_call"):
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))"
            )
        cursor.execute(
            "UPDATE traces_session s SET call_count = (SELECT COUNT(*) FROM traces_call c"
            " WHERE c.session_id = s.id) WHERE s.id = ANY(%s)",
            [session_ids],
        )
        cursor.execute("ANALYZE")
    return {
        "calls": calls,
        "agents": agents,
        "compactions": compactions,
        "runs": runs,
        "touches": touches,
        "sessions": len(session_ids),
    }


def _flush(connection, call_rows, agent_rows, compaction_rows, run_rows, touch_rows) -> None:
    specs = [
        (
            "traces_agent",
            "id, workspace_id, session_id, external_id, kind, start_kind, initial_context, call_count, max_context, total_tokens, agent_type, description, spawn_tool_call_id",
            agent_rows,
            lambda r: (*r, 0, 0, "", "", ""),
        ),
        (
            "traces_call",
            "id, workspace_id, session_id, agent_id, key, session_index, agent_index, timestamp, model, input_tokens, cache_creation_tokens, cache_read_tokens, output_tokens, reasoning_tokens, context_tokens, is_sidechain, tool_names, touches, source_line",
            call_rows,
            lambda r: r,
        ),
        (
            "traces_compaction",
            "id, workspace_id, session_id, agent_id, key, kind, timestamp, trigger, before_call_index, after_call_index, pre_tokens, post_tokens, summary_tokens, summary_estimated, duration_ms, compact_summary",
            compaction_rows,
            lambda r: (*r, ""),
        ),
        (
            "traces_run",
            "id, workspace_id, session_id, agent_id, index, started_by_id, first_call_index, last_call_index, call_count, max_context, median_context, task_type, task_type_reason",
            run_rows,
            lambda r: r,
        ),
        (
            "traces_filetouch",
            "workspace_id, session_id, agent_id, run_index, call_index, path, mode, token_position",
            touch_rows,
            lambda r: r,
        ),
    ]
    with connection.cursor() as cursor:
        for table, columns, rows, shape in specs:
            quoted = ", ".join(f'"{c.strip()}"' for c in columns.split(","))
            with cursor.cursor.copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(shape(row))
            rows.clear()


def percentile(values, q):
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=60)
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{DB}"
    os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "0")
    os.environ.setdefault("GOVERNANCE_LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
    os.environ.setdefault("DJANGO_STATIC_MANIFEST", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    setup_database()
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    from governance.models import Role
    from governance.services import membership_set, user_get_or_create, workspace_create
    from traces.analytics.selectors import AnalyticsFilters
    from traces.analytics.services import TASK_TYPE_BOOTSTRAP, analytics_compute, analytics_store

    workspace = workspace_create(slug="bench", name="Bench")
    start = time.perf_counter()
    shape = generate(workspace, args.calls)
    log(f"generated {shape} in {time.perf_counter() - start:.1f} s")
    timings = []
    result = None
    for attempt in range(3):
        connection.close()
        begin = time.perf_counter()
        result = analytics_compute(workspace=workspace, filters=AnalyticsFilters())
        timings.append(time.perf_counter() - begin)
        log(f"cold computation {attempt + 1}: {timings[-1]:.2f} s")
    analytics_store(
        workspace=workspace,
        filters=AnalyticsFilters(),
        data_version=workspace.data_version,
        result=result,
        seconds=timings[-1],
    )
    user = user_get_or_create(username="bench", password="bench-pass-123")
    membership_set(workspace=workspace, user=user, role=Role.VIEWER)
    client = Client()
    client.force_login(user)
    pages = {
        name: f"/w/bench/analytics/{path}"
        for name, path in [
            ("cost", ""),
            ("steps", "steps/"),
            ("compactions", "compactions/"),
            ("coverage", "coverage/"),
            ("incidents", "incidents/"),
        ]
    }
    pages["api cost-curve"] = "/api/v1/analytics/cost-curve/"
    pages["healthz (baseline)"] = "/healthz"
    rows = []
    for name, path in pages.items():
        samples = []
        for _ in range(args.requests):
            begin = time.perf_counter()
            response = client.get(path, HTTP_X_WORKSPACE="bench")
            samples.append((time.perf_counter() - begin) * 1000)
            assert response.status_code == 200, (path, response.status_code)
        rows.append((name, statistics.median(samples), percentile(samples, 95)))
        log(f"{name}: p50 {rows[-1][1]:.1f} ms, p95 {rows[-1][2]:.1f} ms")
    median = statistics.median(timings)
    measured = result["cycle_parameters"]
    bootstrap = (
        f"cycle parameters with a {measured['bootstrap']:,}-replicate bootstrap for "
        f"{measured['compactions']:,} compactions (rule: {measured['bootstrap_rule']}), "
        f"per-task-type thresholds ({TASK_TYPE_BOOTSTRAP} replicates each, same cap)"
    )
    body = "\n".join(
        [
            "| Measure | Result | Target |",
            "|---|---|---|",
            f"| Data | {shape['calls']:,} calls, {shape['agents']:,} agents, {shape['sessions']:,} sessions, {shape['runs']:,} runs, {shape['compactions']:,} compactions, {shape['touches']:,} file touches (PostgreSQL, COPY-loaded) | 1M calls |",
            f"| Cold computation of all analyses (load columns by COPY … TO, cost curve, growth, amplification, steps, compactions, {bootstrap}, coverage, incidents), median of 3 | **{median:.2f} s** (runs: {', '.join(f'{t:.2f}' for t in timings)}) | < 10 s |",
            *[
                f"| {name} server time, cached, {args.requests} requests | p50 {p50:.1f} ms, **p95 {p95:.1f} ms** | < 300 ms p95 |"
                for name, p50, p95 in rows
            ],
        ]
    )
    from bench.common import write_section

    write_section(
        "Trace analytics", body, command="python -m bench.analytics " + " ".join(sys.argv[1:])
    )
    print(body)


if __name__ == "__main__":
    main()
