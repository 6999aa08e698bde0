"""Every benchmark in turn: `python -m bench.run_all` (each writes its section of RESULTS.md).

They need the local PostgreSQL (and Redis for the OTLP part of bench.traces). Run them on an
otherwise idle machine; together they take about 30 minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys

FRESH_DATABASES = {"bench.annotations": "gov_annotations_bench", "bench.audit": "gov_audit_bench"}

BENCHMARKS = (
    ["bench.traces"],
    ["bench.telemetry"],
    ["bench.analytics", "--calls", "1000000"],
    ["bench.qualification"],
    ["bench.artifacts"],
    ["bench.contextfiles"],
    ["bench.annotations"],
    ["bench.audit"],
)


def main() -> int:
    failed = []
    for args in BENCHMARKS:
        env = dict(os.environ)
        fresh = FRESH_DATABASES.get(args[0])
        if fresh:  # measured on PostgreSQL, in a fresh database
            for tool in ("dropdb", "createdb"):
                flags = ["--if-exists"] if tool == "dropdb" else []
                subprocess.run([tool, "-h", "127.0.0.1", "-U", "postgres", *flags, fresh])
            env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{fresh}"
        print(f"== python -m {' '.join(args)}", flush=True)
        if subprocess.run([sys.executable, "-m", *args], env=env, check=False).returncode != 0:
            failed.append(args[0])
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
