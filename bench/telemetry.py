"""OTLP logs benchmark: `python -m bench.telemetry [--batches 201] [--clients 4] [--repeat 3]
[--baseline-root DIR]`.

Gunicorn serves the app on loopback over a fresh PostgreSQL database, with a Celery worker
as in production. Clients post 500-record protobuf batches of Claude Code
`claude_code.api_request` events to /v1/logs (each record with the identity attributes
Claude Code sends, so the default policy hashes them and the body is re-encoded before it
is stored); then, in the same run against the same server, the peer: 500-span batches of
the equivalent GenAI spans to /v1/traces. Each request stores its (redacted) body, fsynced,
and its rows before it is answered. Also the in-process decode + normalisation of the same
log batches, as the floor.

With `--baseline-root DIR` (a checkout of older code, e.g. `git archive <rev> | tar -x -C
DIR`), each repeat also serves the same requests from that code, alternating with this
one, so that the two are compared under the same load.

Writes the medians, ratios, machine and command into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

from bench.traces import OUT, ROOT, free_port, fresh_database, log, otlp_bodies

# The database (dropped and created for every run) and the Redis db (flushed); both can be
# moved with --database and --redis when several people share the machine's servers.
DATABASE = "gov_otlp_bench"
REDIS = "redis://127.0.0.1:6379/6"
PER_BATCH = 500


def log_bodies(batches: int, per_batch: int = PER_BATCH) -> list[bytes]:
    """Protobuf ExportLogsServiceRequests of api_request events, shaped as Claude Code's."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    def attr(key, value):
        if isinstance(value, float):
            return KeyValue(key=key, value=AnyValue(double_value=value))
        if isinstance(value, int):
            return KeyValue(key=key, value=AnyValue(int_value=value))
        return KeyValue(key=key, value=AnyValue(string_value=value))

    resource = Resource(
        attributes=[attr("service.name", "claude-code"), attr("service.version", "2.1.240"),
                    attr("os.type", "linux"), attr("host.arch", "amd64")]
    )  # fmt: skip
    base = 1_767_225_600_000_000_000
    bodies = []
    for batch in range(batches):
        records = []
        for i in range(per_batch):
            n = batch * per_batch + i
            session = f"5f0c6c2e-8a43-4a53-9d43-{batch:06d}{i % 10:06d}"
            context = 20_000 + 900 * (i // 10)
            attributes = [
                attr("event.name", "api_request"), attr("event.timestamp", "2026-01-01T00:00:00.000Z"),
                attr("event.sequence", n), attr("session.id", session),
                attr("prompt.id", f"prompt-{batch}-{i // 5}"), attr("app.version", "2.1.240"),
                attr("terminal.type", "xterm-256color"), attr("user.id", "f3b1" * 16),
                attr("user.email", f"dev{i % 10}@example.com"),
                attr("user.account_uuid", f"acc-{i % 10:04d}"), attr("organization.id", "org-0001"),
                attr("model", "claude-sonnet-4-5"), attr("cost_usd", 0.0123 + i / 1e5),
                attr("duration_ms", 2100 + i), attr("input_tokens", 12),
                attr("output_tokens", 180), attr("cache_read_tokens", context - 1200),
                attr("cache_creation_tokens", 1100), attr("request_id", f"req_{batch}_{i}"),
                attr("speed", "normal"), attr("query_source", "repl_main_thread"),
                attr("effort", "medium"),
            ]  # fmt: skip
            records.append(
                LogRecord(
                    time_unix_nano=base + n * 1_000_000_000,
                    observed_time_unix_nano=base + n * 1_000_000_000 + 5_000_000,
                    body=AnyValue(string_value="claude_code.api_request"),
                    attributes=attributes,
                )
            )
        request = ExportLogsServiceRequest(
            resource_logs=[
                ResourceLogs(
                    resource=resource,
                    scope_logs=[
                        ScopeLogs(
                            scope=InstrumentationScope(name="com.anthropic.claude_code.events"),
                            log_records=records,
                        )
                    ],
                )
            ]
        )
        bodies.append(request.SerializeToString())
    return bodies


def _post_all(url: str, bodies: list[bytes], headers: dict, clients: int) -> tuple[float, list]:
    import requests

    failures = []

    def send(chunk):
        session = requests.Session()
        for body in chunk:
            response = session.post(url, data=body, headers=headers, timeout=120)
            if response.status_code != 200 or response.content not in (b"",):
                # A 200 with a partial_success body means records were rejected.
                failures.append((response.status_code, response.content[:200]))

    threads = [threading.Thread(target=send, args=(bodies[i::clients],)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, failures


def _count(table: str, where: str = "TRUE") -> int:
    query = f"SELECT count(*) FROM {table} WHERE {where}"
    result = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", query, DATABASE],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(result.stdout.strip())


def run_once(batches: int, clients: int, server_workers: int, root=ROOT) -> dict:
    import requests

    url = fresh_database(DATABASE)  # migrated by this code: older code runs on it too
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SECURE_SSL_REDIRECT": "0", "GOVERNANCE_LOG_LEVEL": "WARNING",
           "GOVERNANCE_VAR_DIR": str(OUT / "telemetry-var"), "CELERY_BROKER_URL": REDIS,
           "DJANGO_STATIC_MANIFEST": "0"}  # fmt: skip
    subprocess.run(
        ["redis-cli", "-n", REDIS.rsplit("/", 1)[1], "flushdb"], check=False, capture_output=True
    )
    subprocess.run(
        [sys.executable, "manage.py", "add_member", "bench", "sender", "editor", "--create-user"],
        cwd=root, env=env, check=True, capture_output=True,
    )  # fmt: skip
    token = subprocess.run(
        [sys.executable, "manage.py", "create_api_token", "--user", "sender", "--workspace", "bench"],
        cwd=root, env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "governance.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", str(server_workers), "--log-level", "warning", "--timeout", "120"],
        cwd=root, env=env,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "governance", "worker", "--queues",
         "ingest,analysis,default", "--concurrency", "1", "--loglevel", "WARNING"],
        cwd=root, env=env,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.2)
        logs = log_bodies(batches)
        spans = otlp_bodies(batches)
        from traces.formats.telemetry import decode_logs, normalise_logs

        sample = logs[: max(10, batches // 10)]
        start = time.perf_counter()
        for body in sample:
            normalise_logs(decode_logs(body, "application/x-protobuf"))
        decode_rate = len(sample) * PER_BATCH / (time.perf_counter() - start)
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"}
        base = f"http://127.0.0.1:{port}"
        for signal, body in (("logs", logs[0]), ("traces", spans[0])):  # warm both paths
            requests.post(
                f"{base}/v1/{signal}", data=body, headers=headers, timeout=60
            ).raise_for_status()
        load_before = os.getloadavg()[0]
        logs_seconds, logs_failures = _post_all(f"{base}/v1/logs", logs[1:], headers, clients)
        traces_seconds, traces_failures = _post_all(
            f"{base}/v1/traces", spans[1:], headers, clients
        )
        records = (len(logs) - 1) * PER_BATCH
        return {
            "records": records,
            "logs_seconds": logs_seconds,
            "logs_per_s": records / logs_seconds,
            "traces_per_s": records / traces_seconds,
            "decode_per_s": decode_rate,
            "load": (load_before, os.getloadavg()[0]),
            "failures": len(logs_failures) + len(traces_failures),
            "failure_sample": (logs_failures + traces_failures)[:2],
            "stored_events": _count("traces_telemetryevent"),
            "stored_calls": _count("traces_call"),
            "plain_emails": _count(
                "traces_telemetryevent", "attributes::text LIKE '%@example.com%'"
            ),
        }
    finally:
        server.terminate()
        server.wait(timeout=30)
        worker.terminate()
        worker.wait(timeout=60)


def _baseline_rows(runs: list[dict], baseline: list[dict], root: str) -> list[str]:
    rates = [r["logs_per_s"] for r in baseline]
    ratios = [
        new["logs_per_s"] / old["logs_per_s"] for new, old in zip(runs, baseline, strict=True)
    ]
    return [
        f"| Baseline, same run, alternating with the runs above: `/v1/logs` served by the code in `{root}` | {statistics.median(rates):,.0f} records/s (runs: {', '.join(f'{r:,.0f}' for r in rates)}; {sum(r['failures'] for r in baseline)} failed or partial requests) | – |",
        f"| This code ÷ baseline, `/v1/logs`, median of the paired runs | **{statistics.median(ratios):.2f}×** (pairs: {', '.join(f'{r:.2f}' for r in ratios)}) | – |",
    ]  # fmt: skip


def main() -> None:
    global DATABASE, REDIS
    from bench.common import write_section

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=201)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--server-workers", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-root", help="a checkout of older code, served alternately")
    parser.add_argument("--database", default=DATABASE, help="dropped and created every run")
    parser.add_argument("--redis", default=REDIS, help="a Redis db URL; flushed every run")
    args = parser.parse_args()
    DATABASE, REDIS = args.database, args.redis
    command = "python -m bench.telemetry " + " ".join(sys.argv[1:])
    runs, baseline = [], []
    for attempt in range(args.repeat):
        runs.append(run_once(args.batches, args.clients, args.server_workers))
        log(f"run {attempt + 1}: {runs[-1]}")
        if args.baseline_root:
            baseline.append(
                run_once(args.batches, args.clients, args.server_workers, args.baseline_root)
            )
            log(f"baseline run {attempt + 1}: {baseline[-1]}")
    logs_rates = [r["logs_per_s"] for r in runs]
    traces_rates = [r["traces_per_s"] for r in runs]
    ratios = [r["logs_per_s"] / r["traces_per_s"] for r in runs]
    middle = sorted(runs, key=lambda r: r["logs_per_s"])[len(runs) // 2]
    body = "\n".join(
        [
            "| Measure | Result | Target |",
            "|---|---|---|",
            f"| `/v1/logs`: {middle['records']:,} `claude_code.api_request` records in {PER_BATCH}-record protobuf batches from {args.clients} clients, gunicorn with {args.server_workers} workers, identity hashed (the default); median of {len(runs)} | **{statistics.median(logs_rates):,.0f} records/s** (runs: {', '.join(f'{r:,.0f}' for r in logs_rates)}; {sum(r['failures'] for r in runs)} failed or partial requests; {middle['stored_events']:,} events stored per run, {middle['plain_emails']} with a plain e-mail address) | ≥ 10,000 records/s |",
            f"| Peer, same run and server: `/v1/traces`, the equivalent GenAI spans in {PER_BATCH}-span batches | {statistics.median(traces_rates):,.0f} spans/s (runs: {', '.join(f'{r:,.0f}' for r in traces_rates)}; {middle['stored_calls']:,} calls stored per run) | – |",
            f"| `/v1/logs` ÷ `/v1/traces`, median of the runs | {statistics.median(ratios):.2f} | – |",
            f"| Floor: in-process protobuf decode and normalisation of the same log batches, median | {statistics.median(r['decode_per_s'] for r in runs):,.0f} records/s | – |",
            *(_baseline_rows(runs, baseline, args.baseline_root) if baseline else []),
        ]
    ) + (
        "\n\nOne-minute load average at the start and end of each run's sends: "
        + ", ".join(f"{a:.1f}→{b:.1f}" for a, b in (r["load"] for r in runs + baseline))
        + f" (on {os.cpu_count()} cores; other work on the machine slows every figure alike, "
        "so compare only the ratio within a run)."
    ) + (
        "\n\nEvery request stores its body (identity attributes hashed, re-encoded, fsynced) and "
        "its events in one transaction before answering; `/v1/traces` also loads calls and "
        "queues the derive step."
    )  # fmt: skip
    # Against a baseline the figures go to a section of their own, beside the last plain run.
    section = "OTLP logs receiver against the older code" if baseline else "OTLP logs receiver"
    write_section(section, body, command=command)
    print(body)


if __name__ == "__main__":
    main()
