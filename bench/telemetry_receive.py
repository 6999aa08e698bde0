"""The /v1/logs storing path in process, this code against older code, alternating:
`python -m bench.telemetry_receive --baseline-root DIR [--batches 41] [--repeat 5]`.

Each run is a fresh process (its working directory is the code under test) on the same
migrated PostgreSQL database, emptied first: it calls `otlp_logs_receive` on 500-record protobuf batches of
Claude Code `api_request` events (identity hashed, the default policy), as the view does
after reading the body, and reports records stored per second. No HTTP server, client or
Celery worker shares the cores, so the ratio shows the storing path itself; the HTTP
figures are in `bench/telemetry.py`. Writes medians, ratios and the load to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from bench.traces import ROOT, fresh_database, log

DATABASE = "gov_otlp_receive_bench"
RUN = r"""
import json, os, sys, time, django
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
django.setup()
from governance.models import Workspace
from traces.models import TelemetryEvent
from traces.services.telemetry import otlp_logs_receive
sys.path.insert(0, sys.argv[1])
from bench.telemetry import log_bodies
bodies = log_bodies(int(sys.argv[2]))
workspace = Workspace.objects.get(slug="bench")
otlp_logs_receive(workspace=workspace, user=None, body=bodies[0],
                  content_type="application/x-protobuf")  # warm
start = time.perf_counter()
for body in bodies[1:]:
    otlp_logs_receive(workspace=workspace, user=None, body=body,
                      content_type="application/x-protobuf")
seconds = time.perf_counter() - start
print(json.dumps({"records": (len(bodies) - 1) * 500, "seconds": seconds,
                  "stored": TelemetryEvent.objects.count()}))
"""


def run_once(root: str, batches: int, url: str) -> dict:
    subprocess.run(  # every run starts empty (one migrated database: migrating is minutes)
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
         "TRUNCATE traces_telemetryevent, traces_session, traces_rawupload CASCADE", DATABASE],
        check=True, capture_output=True,
    )  # fmt: skip
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SECURE_SSL_REDIRECT": "0",
           "GOVERNANCE_LOG_LEVEL": "WARNING", "GOVERNANCE_VAR_DIR": str(ROOT / "bench" / "out" / "receive-var"),
           "DJANGO_STATIC_MANIFEST": "0"}  # fmt: skip
    load = os.getloadavg()[0]
    out = subprocess.run(
        [sys.executable, "-c", RUN, str(ROOT), str(batches)],
        cwd=root, env=env, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    result = json.loads(out.strip().splitlines()[-1])
    result["per_s"] = result["records"] / result["seconds"]
    result["load"] = (load, os.getloadavg()[0])
    return result


def main() -> None:
    global DATABASE
    from bench.common import write_section

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-root", required=True)
    parser.add_argument("--batches", type=int, default=41)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--database", default=DATABASE, help="dropped and created first")
    args = parser.parse_args()
    DATABASE = args.database
    command = "python -m bench.telemetry_receive " + " ".join(sys.argv[1:])
    new, old = [], []
    url = fresh_database(DATABASE)
    for attempt in range(args.repeat):
        new.append(run_once(str(ROOT), args.batches, url))
        old.append(run_once(args.baseline_root, args.batches, url))
        log(f"pair {attempt + 1}: this {new[-1]} / baseline {old[-1]}")
    ratios = [a["per_s"] / b["per_s"] for a, b in zip(new, old, strict=True)]
    records = new[0]["records"]
    new_runs = ", ".join(f"{r['per_s']:,.0f}" for r in new)
    old_runs = ", ".join(f"{r['per_s']:,.0f}" for r in old)
    body = "\n".join(
        [
            "| Measure | Result |",
            "|---|---|",
            f"| `otlp_logs_receive`, this code: {records:,} `api_request` records in 500-record protobuf batches, identity hashed; median of {len(new)} | **{statistics.median(r['per_s'] for r in new):,.0f} records/s** (runs: {new_runs}; {new[0]['stored']:,} events stored per run) |",
            f"| The same, baseline code in `{args.baseline_root}`, alternating | {statistics.median(r['per_s'] for r in old):,.0f} records/s (runs: {old_runs}; {old[0]['stored']:,} events stored per run) |",
            f"| This ÷ baseline, median of the pairs | **{statistics.median(ratios):.2f}×** (pairs: {', '.join(f'{r:.2f}' for r in ratios)}) |",
        ]
    ) + (
        "\n\nOne-minute load average at the start and end of each run (this, baseline): "
        + ", ".join(f"{a['load'][0]:.1f}→{a['load'][1]:.1f} / {b['load'][0]:.1f}→{b['load'][1]:.1f}"
                    for a, b in zip(new, old, strict=True))
        + f" on {os.cpu_count()} cores shared with other work: compare the paired ratio, not "
        "the rates. One process, one connection, no HTTP: the storing path only (decode, "
        "redaction, normalisation, body fsync, dedupe, COPY, audit)."
    )  # fmt: skip
    write_section("OTLP logs storing path against the older code", body, command=command)
    print(body)


if __name__ == "__main__":
    main()
