"""Page speed: `python -m bench.pages [--calls 1000000]`.

Loads the demo workspace into a PostgreSQL database, finds every page by following the
links of the workspace's pages from its home page (one URL per route, ids and query strings
dropped), adds every API list endpoint, and measures each one's server time through
Django's test client (p50/p95 of --requests after one warm-up), against /healthz measured
the same way. Then it adds --calls calls to the same workspace (COPY-loaded, as in
bench.analytics), computes the analytics once so that their pages read a cached result, and
measures the same URLs again. Writes the table, machine and command into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DB = "gov_bench_pages"
TARGET_MS = 300
SKIP = re.compile(r"/(logout|admin|media)/|\.csv$|/csv/|/download/|/export/|/raw/|/content/")
HREF = re.compile(r'href="(/[^"#]*)"')


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def setup_database() -> None:
    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", DB], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", DB], check=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    subprocess.run(
        [sys.executable, "manage.py", "seed_demo"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL
    )


def route_of(path: str) -> str:
    """The route a URL belongs to: numbers, UUIDs and long hex ids replaced by {id}."""
    path = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "{id}", path)
    return re.sub(r"/(\d+|[0-9a-f]{16,})(?=/|$)", "/{id}", path)


def crawl(client, start: str, prefix: str, max_pages: int) -> dict[str, str]:
    """One URL per route under `prefix`, reached by links from `start` (GET only)."""
    seen_routes: dict[str, str] = {}
    queue = deque([start])
    while queue and len(seen_routes) < max_pages:
        path = queue.popleft().split("?")[0]
        route = route_of(path)
        if route in seen_routes or not path.startswith(prefix) or SKIP.search(path):
            continue
        response = client.get(path)
        if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
            continue
        seen_routes[route] = path
        for href in HREF.findall(response.content.decode()):
            if route_of(href.split("?")[0]) not in seen_routes:
                queue.append(href.replace("&amp;", "&"))
    return seen_routes


def api_lists() -> dict[str, str]:
    """Every API list endpoint that takes no URL argument."""
    from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse

    names = []

    def walk(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns)
            elif (
                isinstance(pattern, URLPattern) and pattern.name and pattern.name.endswith("-list")
            ):
                names.append(pattern.name)

    walk(get_resolver().url_patterns)
    found = {}
    for name in sorted(set(names)):
        try:
            path = reverse(name)
        except NoReverseMatch:
            continue
        if path.startswith("/api/"):
            found[route_of(path)] = path
    return found


def largest_objects() -> dict[str, str]:
    """The session and the agent with the most calls, whose pages are the heaviest."""
    from django.db.models import Count

    from traces.models import Agent, Session

    session = Session.objects.annotate(n=Count("calls")).order_by("-n").first()
    agent = Agent.objects.annotate(n=Count("calls")).order_by("-n").first()
    return {
        f"/w/demo/traces/sessions/{{id}}/ (largest session, {session.n:,} calls)": (
            f"/w/demo/traces/sessions/{session.pk}/"
        ),
        f"/w/demo/annotations/sessions/{{id}}/agents/{{id}}/ (largest agent, {agent.n:,} calls)": (
            f"/w/demo/annotations/sessions/{agent.session_id}/agents/{agent.pk}/"
        ),
    }


def measure(client, urls: dict[str, str], requests: int) -> dict[str, tuple[float, float, int]]:
    """Route → (p50 ms, p95 ms, KiB) of the server time, after one warm-up request."""
    results = {}
    for route, path in urls.items():
        response = client.get(path, HTTP_X_WORKSPACE="demo")
        if response.status_code != 200:
            log(f"skip {path}: {response.status_code}")
            continue
        size = len(response.content) // 1024
        samples = []
        for _ in range(requests):
            begin = time.perf_counter()
            client.get(path, HTTP_X_WORKSPACE="demo")
            samples.append((time.perf_counter() - begin) * 1000)
        results[route] = (
            float(np.percentile(samples, 50)),
            float(np.percentile(samples, 95)),
            size,
        )
        log(f"{route}: p50 {results[route][0]:.1f} ms, p95 {results[route][1]:.1f} ms, {size} KiB")
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--max-pages", type=int, default=200)
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
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from bench.analytics import generate
    from bench.common import write_section
    from governance.models import Workspace
    from traces.analytics.selectors import AnalyticsFilters
    from traces.analytics.services import analytics_compute, analytics_store

    workspace = Workspace.objects.get(slug="demo")
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    urls = crawl(client, "/w/demo/", "/w/demo/", args.max_pages)
    urls.update(api_lists())
    urls["/healthz (baseline)"] = "/healthz"
    log(f"{len(urls)} routes")
    demo = measure(client, urls, args.requests)

    start = time.perf_counter()
    shape = generate(workspace, args.calls)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    log(f"generated {shape} in {time.perf_counter() - start:.1f} s")
    workspace.refresh_from_db()
    filters = AnalyticsFilters()
    begin = time.perf_counter()
    result = analytics_compute(workspace=workspace, filters=filters)
    analytics_store(
        workspace=workspace,
        filters=filters,
        data_version=workspace.data_version,
        result=result,
        seconds=time.perf_counter() - begin,
    )
    largest = largest_objects()
    urls.update(largest)
    large = measure(client, urls, args.requests)

    over = [route for route, (_, p95, _) in large.items() if p95 >= TARGET_MS]
    rows = [
        "| Route | demo p50 ms | demo p95 ms | 1M p50 ms | 1M p95 ms | KiB at 1M |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for route in urls:
        if route not in demo and route not in large:
            continue
        d50, d95, _ = demo.get(route, (float("nan"),) * 3)
        l50, l95, size = large.get(route, (float("nan"),) * 3)
        mark = "**" if l95 >= TARGET_MS else ""
        rows.append(
            f"| `{route}` | {d50:.0f} | {d95:.0f} | {l50:.0f} | {mark}{l95:.0f}{mark} | {size} |"
        )
    body = "\n".join(
        [
            f"Every page reached by links from the demo workspace's home page (one URL per route, "
            f"{sum(1 for r in urls if not r.startswith('/api/'))} pages) and every API list endpoint, "
            f"signed in as the demo admin. Server time through Django's test client: one warm-up, "
            f"then {args.requests} requests per route; p50 and p95. First on the demo data, then "
            f"after adding {shape['calls']:,} calls ({shape['sessions']:,} sessions, "
            f"{shape['agents']:,} agents, {shape['compactions']:,} compactions, COPY-loaded as in "
            f"`bench.analytics`) to the same workspace, with the analytics computed once.",
            "",
            f"Routes at or over {TARGET_MS} ms p95 at 1M calls: "
            + (", ".join(f"`{r}`" for r in over) if over else "none")
            + ".",
            "",
            *rows,
        ]
    )
    write_section("Page speed", body, command="python -m bench.pages " + " ".join(sys.argv[1:]))
    print(body)


if __name__ == "__main__":
    main()
