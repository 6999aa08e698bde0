"""Trace viewer benchmark: the viewer page and a window fetch on a run of 6,000 steps, and an
agent of 6,000 calls with about 180 compactions, through Django's full request stack (URL
resolution, workspace check, selectors, templates). The baseline, measured in the same run,
renders the whole run in one page: what the viewer would cost without windows.

    .venv/bin/python -m bench.annotations [--steps 6000] [--repeat 15]

Uses a throwaway SQLite file unless DATABASE_URL is set (e.g. to a PostgreSQL database).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time


def setup_django() -> str:
    """Configure Django; returns the DATABASE_URL prefix for the command line, if one was set."""
    given = os.environ.get("DATABASE_URL", "")
    if "DATABASE_URL" not in os.environ:
        folder = tempfile.mkdtemp(prefix="bench-annotations-")
        os.environ["DATABASE_URL"] = f"sqlite:///{folder}/bench.sqlite3"
        os.environ.setdefault("GOVERNANCE_MEDIA_ROOT", f"{folder}/media")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,localhost")
    # Production settings otherwise (DEBUG off); the test client speaks plain HTTP and there is
    # no collectstatic manifest in a checkout.
    os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "0")
    os.environ.setdefault("DJANGO_STATIC_MANIFEST", "0")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1@", given)  # never print a password


def measure(fn, repeat: int) -> tuple[float, float, list[float]]:
    fn()  # warm: template compilation, connection, caches
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    samples.sort()
    p90 = samples[min(len(samples) - 1, round(0.9 * (len(samples) - 1)))]
    return statistics.median(samples), p90, samples


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    database_url = setup_django()

    from django.db import connection
    from django.test import Client

    from bench.common import write_section
    from governance.models import Role, Workspace
    from governance.services import membership_set, user_get_or_create, workspace_create
    from traces.annotations import selectors
    from traces.models import Agent, AgentKind, Run, Session, UploadSource
    from traces.services import ingest_bytes
    from traces.synthetic import CorpusParams, generate_corpus

    workspace = Workspace.objects.filter(slug="bench-viewer").first() or workspace_create(
        slug="bench-viewer"
    )
    user = user_get_or_create(username="bench-viewer", password="bench-viewer-pass")
    membership_set(workspace=workspace, user=user, role=Role.REVIEWER)

    def ingest(params: CorpusParams, name: str) -> Session:
        generated = next(generate_corpus(params))
        start = time.perf_counter()
        ingest_bytes(
            workspace=workspace,
            name=f"{name}-{generated.session_id}.jsonl",
            data=b"\n".join(generated.lines) + b"\n",
            source=UploadSource.DEMO,
        )
        print(f"ingested {name}: {generated.calls:,} calls in {time.perf_counter() - start:.1f} s")
        return Session.objects.get(workspace=workspace, external_id=generated.session_id)

    # One long window: no compaction, so the main thread is a single run of `steps` calls.
    long = ingest(
        CorpusParams(
            sessions=1, steps_per_session=(args.steps, args.steps), threshold=10**9,
            growth_at_100k=60, subagents_per_session=(2, 2), subagent_steps=(10, 20), seed=31,
        ),
        "long-run",
    )  # fmt: skip
    # The realistic shape: compaction at 180k, so the main agent has many runs.
    compacting = ingest(
        CorpusParams(sessions=1, steps_per_session=(args.steps, args.steps), seed=32), "compacting"
    )
    run = (
        Run.objects.filter(session=long, agent__kind=AgentKind.MAIN).order_by("-call_count").first()
    )
    agent = Agent.objects.get(session=compacting, kind=AgentKind.MAIN)
    compactions = compacting.compaction_count
    client = Client()
    client.force_login(user)
    run_url = f"/w/{workspace.slug}/annotations/sessions/{long.pk}/runs/{run.pk}/"
    agent_url = f"/w/{workspace.slug}/annotations/sessions/{compacting.pk}/agents/{agent.pk}/"
    middle = run.call_count // 2 // selectors.WINDOW + 1

    def get(url, **headers):
        def call():
            response = client.get(url, **headers)
            assert response.status_code == 200, (url, response.status_code)
            return response

        return call

    cases = [
        ("Run viewer page (first window + strip of every step)", get(run_url)),
        ("Run window fetch (htmx, a middle window)", get(f"{run_url}?page={middle}", HTTP_HX_REQUEST="true")),
        ("Run jump to a call (`?at=`, full page)", get(f"{run_url}?at={run.first_call_index + run.call_count * 3 // 4}")),
        (f"Agent viewer page ({agent.call_count:,} calls, {compactions} compactions)", get(agent_url)),
        ("Agent window fetch (htmx, a middle window)", get(f"{agent_url}?page={middle}", HTTP_HX_REQUEST="true")),
    ]  # fmt: skip
    sizes = {}
    rows = []
    for label, fn in cases:
        median, p90, _ = measure(fn, args.repeat)
        sizes[label] = len(fn().content)
        rows.append((label, median, p90))
        print(f"{label}: median {median * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms")

    # Baseline: the same run rendered in one page, every step at once.
    window = selectors.WINDOW
    selectors.WINDOW = run.call_count
    try:
        base_median, base_p90, _ = measure(get(run_url), 3)
        base_size = len(client.get(run_url).content)
    finally:
        selectors.WINDOW = window
    print(f"baseline, whole run in one page: median {base_median * 1000:.0f} ms")

    vendor = connection.vendor
    viewer_median = rows[0][1]
    table = "\n".join(
        f"| {label} | {median * 1000:.0f} | {p90 * 1000:.0f} | {sizes[label] / 1024:.0f} |"
        for label, median, p90 in rows
    )
    body = f"""
Database: {vendor}. A run of {run.call_count:,} steps (one context window, no compaction) and a
main agent of {agent.call_count:,} calls with {compactions} compactions, ingested from
`traces.synthetic`; windows of {selectors.WINDOW} steps. Each figure is the median (and p90)
of {args.repeat} requests through Django's test client after one warm-up request, so it
includes URL resolution, the workspace check, the queries, step building (zstd text
decompression) and template rendering, but not the network or the browser's Plotly drawing.

| Request | median ms | p90 ms | KiB |
|---|---:|---:|---:|
{table}
| Baseline: the whole run in one page (3 requests) | {base_median * 1000:.0f} | {base_p90 * 1000:.0f} | {base_size / 1024:.0f} |

The windowed viewer page is {base_median / viewer_median:.0f}× faster than rendering every
step at once and sends {base_size / max(sizes[rows[0][0]], 1):.0f}× less HTML; every request
above is under the 500 ms target: {"yes" if all(r[2] < 0.5 for r in rows) else "NO"} (p90).
"""
    prefix = f"DATABASE_URL={database_url} " if database_url else ""
    command = f"{prefix}.venv/bin/python -m bench.annotations {' '.join(argv or sys.argv[1:])}"
    write_section("Trace viewer", body, command=command.strip())


if __name__ == "__main__":
    main()
