"""Trace ingestion benchmark: `python -m bench.traces [--shapes a,b,c] [--repeat 3]`.

1. Three corpus shapes (bench/shapes.py, cached in bench/out/, laid out as `~/.claude`):
   for each, --repeat rounds of: the bare parse floor (orjson over every line), ccusage
   20.0.24 (`ccusage session --json --offline`, CLAUDE_CONFIG_DIR = the corpus; installed
   from npm into bench/out/), and our ingest into an empty PostgreSQL database with 2
   worker processes (raw copies, parse, dedup, COPY, derive), in a process of its own. The
   token totals of both are compared.
2. Shape a at growing sizes (--scale): CPU per call and peak RSS; at the largest, every
   analytics section computed cold.
3. A grown transcript: one long session read, then read again after 102 calls appended.
4. The OTLP receiver on loopback, --repeat times: gunicorn serving /v1/traces, clients
   posting 500-span protobuf batches, against the in-process decode of the same bodies.

Writes the medians, ratios, machine and command into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PG = "postgres://postgres@127.0.0.1:5432/{}"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- corpora ------------------------------------------------------------------------

SHAPES = {
    "a": "today's corpus: `traces.synthetic` sessions, 2 streamed lines per call, each call's "
    "tool result after it, subagents inline (every line names its agent)",
    "b": "100 long sessions × 1,000 calls; half run their subagents inline (tool results "
    "without `agentId`); 1–4 streamed blocks per message with parallel tool results "
    "interleaved; 6% of calls without `requestId`",
    "c": "3,000 short subagent files of 5–40 calls (`<session>/subagents/agent-*.jsonl` with "
    "`.meta.json`) beside 100 short sessions",
}


def build_shape(shape: str, calls: int = 300_000) -> tuple[Path, dict]:
    """The corpus of a shape, laid out as `~/.claude` (cached in bench/out/)."""
    from bench.shapes import write_shape_b, write_shape_c

    folder = OUT / (f"shape-a-{calls}" if shape == "a" else f"shape-{shape}")
    stamp = folder.with_suffix(".json")
    if stamp.exists():
        return folder, json.loads(stamp.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    if shape == "a":
        info = _write_synthetic(folder / "projects" / "-home-dev-bench", calls)
    elif shape == "b":
        info = write_shape_b(folder)
    else:
        info = write_shape_c(folder)
    info["generated_in_s"] = round(time.perf_counter() - start, 1)
    stamp.write_text(json.dumps(info))
    return folder, info


def _write_synthetic(folder: Path, target_calls: int) -> dict:
    from traces.synthetic import CorpusParams, generate_session

    folder.mkdir(parents=True)
    params = CorpusParams(sessions=10**9, seed=300)
    info = {"files": 0, "lines": 0, "bytes": 0}
    calls = 0
    while calls < target_calls:
        generated = generate_session(info["files"], params)
        data = b"\n".join(generated.lines) + b"\n"
        (folder / f"{generated.session_id}.jsonl").write_bytes(data)
        calls += generated.calls
        info["files"] += 1
        info["lines"] += len(generated.lines)
        info["bytes"] += len(data)
    return info


def parse_floor(folder: Path) -> float:
    import orjson

    from traces.formats.archive import STREAM_BUFFER

    start = time.perf_counter()
    for path in sorted(folder.rglob("*.jsonl")):
        with open(path, "rb", buffering=STREAM_BUFFER) as handle:  # as the ingest reads them
            for line in handle:
                orjson.loads(line)
    return time.perf_counter() - start


# --- the peer ----------------------------------------------------------------------------

CCUSAGE = "20.0.24"


def ccusage_binary() -> Path:
    """ccusage from the npm registry, installed once into bench/out/."""
    prefix = OUT / f"ccusage-{CCUSAGE}"
    binary = prefix / "node_modules" / ".bin" / "ccusage"
    if not binary.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"ccusage@{CCUSAGE}"],
            check=True, capture_output=True,
        )  # fmt: skip
    return binary


def ccusage_once(folder: Path) -> dict:
    """`ccusage session --json --offline` over the same files: its wall time and totals."""
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(folder)}
    start = time.perf_counter()
    result = subprocess.run(
        [str(ccusage_binary()), "session", "--json", "--offline"],
        env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    totals = json.loads(result.stdout)["totals"]
    return {
        "seconds": elapsed,
        "tokens": {
            "input": totals["inputTokens"],
            "cache_creation": totals["cacheCreationTokens"],
            "cache_read": totals["cacheReadTokens"],
            "output": totals["outputTokens"],
        },
    }


# --- ingest ------------------------------------------------------------------------


def fresh_database(name: str, root: Path = ROOT) -> str:
    """An empty, migrated database."""
    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", name], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
    url = PG.format(name)
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SECURE_SSL_REDIRECT": "0"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=root, env=env, check=True)
    subprocess.run(
        [sys.executable, "manage.py", "create_workspace", "bench"],
        cwd=root, env=env, check=True, capture_output=True,
    )  # fmt: skip
    return url


def ingest_once(folder: Path, workers: int, *, fresh: bool = True, analytics: bool = False) -> dict:
    """Our ingest in a process of its own (after Django's start, like a long-running
    worker): wall time, CPU of it and its workers, the machine's busy CPU, peak RSS."""
    url = fresh_database("gov_bench_traces") if fresh else PG.format("gov_bench_traces")
    env = {
        **os.environ, "DATABASE_URL": url, "GOVERNANCE_VAR_DIR": str(OUT / "traces-var"),
        "DJANGO_SECURE_SSL_REDIRECT": "0", "GOVERNANCE_LOG_LEVEL": "WARNING",
    }  # fmt: skip
    if fresh:
        shutil.rmtree(OUT / "traces-var", ignore_errors=True)
    command = [sys.executable, "-m", "bench.traces", "_ingest", str(folder), str(workers)]
    if analytics:
        command.append("analytics")
    result = subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _busy_cpu_seconds() -> float:
    """CPU seconds the whole machine spent outside idle and I/O wait, since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _ingest_child(folder: str, workers: int, analytics: bool) -> None:
    """Runs in its own process: ingest, then report what it cost."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    import django

    django.setup()
    from governance.models import Workspace
    from traces.services import ingest_paths

    workspace = Workspace.objects.get(slug="bench")
    busy = _busy_cpu_seconds()
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    start = time.perf_counter()
    summary = ingest_paths(
        workspace=workspace, paths=[folder], workers=workers, refresh_analytics=False
    )
    elapsed = time.perf_counter() - start
    busy = _busy_cpu_seconds() - busy
    own_after = resource.getrusage(resource.RUSAGE_SELF)
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    python_cpu = sum(
        getattr(after, f) - getattr(before, f)
        for after, before in ((own_after, own), (children_after, children))
        for f in ("ru_utime", "ru_stime")
    )
    report = {
        "seconds": elapsed, "calls": summary.calls, "duplicates": summary.duplicates_dropped,
        "compactions": summary.compactions, "errors": len(summary.errors),
        "sessions": summary.sessions, "agents": summary.agents,
        "tokens": {"input": summary.input, "cache_creation": summary.cache_creation,
                   "cache_read": summary.cache_read, "output": summary.output},
        "python_cpu_s": python_cpu, "machine_busy_cpu_s": busy,
        "rss_self_mb": own_after.ru_maxrss / 1024, "rss_child_mb": children_after.ru_maxrss / 1024,
    }  # fmt: skip
    if analytics:
        report["analytics"] = _analytics_cold(workspace)
    print(json.dumps(report))


def _analytics_cold(workspace) -> dict:
    """Every analytics section over everything just loaded, computed once, cold."""
    from traces.analytics.selectors import AnalyticsFilters
    from traces.analytics.services import analytics_compute

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    result = analytics_compute(workspace=workspace, filters=AnalyticsFilters())
    return {
        "seconds": time.perf_counter() - start,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_mb": before,
        "failed_sections": sorted((result.get("failures") or {}).keys()),
    }


# --- OTLP --------------------------------------------------------------------------------


def otlp_bodies(batches: int, spans_per_batch: int = 500) -> list[bytes]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def attr(key, value):
        return KeyValue(
            key=key,
            value=AnyValue(int_value=value)
            if isinstance(value, int)
            else AnyValue(string_value=value),
        )

    bodies = []
    base = 1_767_225_600_000_000_000
    for batch in range(batches):
        spans = []
        for i in range(spans_per_batch):
            conversation = f"conv-{batch:05d}-{i % 10}"
            context = 20_000 + 900 * (i // 10)
            spans.append(
                Span(
                    trace_id=(batch * 1000 + i % 10 + 1).to_bytes(16, "big"),
                    span_id=(batch * 100_000 + i + 1).to_bytes(8, "big"),
                    name="chat claude-sonnet-4-5",
                    start_time_unix_nano=base + (batch * spans_per_batch + i) * 1_000_000_000,
                    end_time_unix_nano=base
                    + (batch * spans_per_batch + i) * 1_000_000_000
                    + 800_000_000,
                    attributes=[
                        attr("gen_ai.operation.name", "chat"),
                        attr("gen_ai.conversation.id", conversation),
                        attr("gen_ai.response.model", "claude-sonnet-4-5"),
                        attr("gen_ai.response.id", f"msg_{batch}_{i}"),
                        attr("gen_ai.usage.input_tokens", context),
                        attr("gen_ai.usage.cache_read.input_tokens", context - 1200),
                        attr("gen_ai.usage.cache_creation.input_tokens", 1100),
                        attr("gen_ai.usage.output_tokens", 180),
                    ],
                )
            )
        request = ExportTraceServiceRequest(
            resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
        )
        bodies.append(request.SerializeToString())
    return bodies


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def otlp_run(batches: int, clients: int, server_workers: int) -> dict:
    import requests

    url = fresh_database("gov_bench_otlp")
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SECURE_SSL_REDIRECT": "0", "GOVERNANCE_LOG_LEVEL": "WARNING",
           "GOVERNANCE_VAR_DIR": str(OUT / "otlp-var"), "CELERY_BROKER_URL": "redis://127.0.0.1:6379/14",
           "CACHE_URL": "redis://127.0.0.1:6379/15", "DJANGO_STATIC_MANIFEST": "0"}  # fmt: skip
    subprocess.run(["redis-cli", "-n", "14", "flushdb"], check=False, capture_output=True)
    subprocess.run(
        [sys.executable, "manage.py", "add_member", "bench", "sender", "editor", "--create-user"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    token = subprocess.run(
        [sys.executable, "manage.py", "create_api_token", "--user", "sender", "--workspace", "bench"],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "governance.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", str(server_workers),
         "--log-level", "warning", "--timeout", "120"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "governance", "worker", "--queues", "ingest,analysis,default",
         "--concurrency", "1", "--loglevel", "WARNING"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.2)
        bodies = otlp_bodies(batches)
        from traces.formats.otlp import parse_request

        decode_start = time.perf_counter()
        for body in bodies[: max(10, batches // 10)]:
            parse_request(body, "application/x-protobuf")
        decode_rate = max(10, batches // 10) * 500 / (time.perf_counter() - decode_start)
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"}
        warm = requests.post(
            f"http://127.0.0.1:{port}/v1/traces", data=bodies[0], headers=headers, timeout=60
        )
        warm.raise_for_status()
        failures = []

        def send(chunk):
            session = requests.Session()
            for body in chunk:
                response = session.post(
                    f"http://127.0.0.1:{port}/v1/traces", data=body, headers=headers, timeout=120
                )
                if response.status_code != 200:
                    failures.append(response.status_code)

        work = bodies[1:]
        threads = [threading.Thread(target=send, args=(work[i::clients],)) for i in range(clients)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        stored = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", "SELECT count(*) FROM traces_call", "gov_bench_otlp"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        return {"spans": len(work) * 500, "seconds": elapsed, "spans_per_s": len(work) * 500 / elapsed,
                "failures": len(failures), "decode_spans_per_s": decode_rate, "stored_calls": int(stored)}  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
        worker.terminate()
        worker.wait(timeout=60)


# --- main --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="a,b,c", help="Corpus shapes to measure (a,b,c).")
    parser.add_argument("--calls", type=int, default=300_000, help="Calls of shape a.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--scale", default="10000,100000,1000000",
        help="Sizes of shape a for CPU per call and peak RSS (the largest also times analytics).",
    )  # fmt: skip
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--otlp-batches", type=int, default=201)
    parser.add_argument("--otlp-clients", type=int, default=4)
    parser.add_argument(
        "--otlp-server-workers",
        type=int,
        default=3,
        help="gunicorn workers serving /v1/traces (default 3, as docker/Dockerfile runs it).",
    )
    parser.add_argument("--skip-otlp", action="store_true")
    parser.add_argument("--only-otlp", action="store_true", help="Measure only the OTLP receiver.")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    from bench.common import write_section

    command = "python -m bench.traces " + " ".join(sys.argv[1:])
    if not args.only_otlp:
        parts = [shapes_benchmark(args)]
        if not args.skip_scale:
            parts.append(scale_benchmark(args))
            parts.append(grown_file_benchmark(args))
        body = "\n\n".join(parts)
        write_section("Trace ingestion", body, command=command)
        print(body)
    if not args.skip_otlp:
        otlp_benchmark(args, command)


def shapes_benchmark(args) -> str:
    """Each shape: our ingest and ccusage over the same files, alternating, same run."""
    rows = [
        "| Shape | Corpus | Ours, 2 workers: median s → calls/s | ccusage 20.0.24, median s | Ours ÷ ccusage (median of pairs) | Parse floor | Peak RSS | Tokens equal to ccusage's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for shape in args.shapes.split(","):
        folder, corpus = build_shape(shape, args.calls)
        log(f"shape {shape}: {corpus}")
        ours, peer, floors = [], [], []
        for attempt in range(args.repeat):
            floors.append(parse_floor(folder))
            peer.append(ccusage_once(folder))
            ours.append(ingest_once(folder, args.workers))
            log(
                f"shape {shape} run {attempt + 1}: ccusage {peer[-1]['seconds']:.2f} s; ours {ours[-1]}"
            )
        seconds = statistics.median(r["seconds"] for r in ours)
        calls = ours[-1]["calls"]
        ratio = statistics.median(
            o["seconds"] / p["seconds"] for o, p in zip(ours, peer, strict=True)
        )
        same = all(r["tokens"] == peer[-1]["tokens"] for r in ours)
        differences = {
            k: ours[-1]["tokens"][k] - v
            for k, v in peer[-1]["tokens"].items()
            if ours[-1]["tokens"][k] != v
        }
        rss = max(max(r["rss_self_mb"], r["rss_child_mb"]) for r in ours)
        rows.append(
            f"| {shape} | {calls:,} calls, {corpus['files']:,} files, {corpus['lines']:,} lines, {corpus['bytes'] / 1e6:,.0f} MB "
            f"| {seconds:.2f} s → **{calls / seconds:,.0f} calls/s** | {statistics.median(p['seconds'] for p in peer):.2f} s "
            f"| **{ratio:.1f}×** | {statistics.median(floors):.2f} s | {rss:.0f} MB | {'yes' if same else f'no: {differences}'} |"
        )  # fmt: skip
        cpu = statistics.median(r["python_cpu_s"] / r["calls"] * 1e6 for r in ours)
        busy = statistics.median(r["machine_busy_cpu_s"] / r["calls"] * 1e6 for r in ours)
        notes.append(
            f"- Shape {shape}: {SHAPES[shape]}. Runs (ours / ccusage, s): "
            + "; ".join(f"{o['seconds']:.2f} / {p['seconds']:.2f}" for o, p in zip(ours, peer, strict=True))
            + f". CPU per call: {cpu:.0f} µs in our processes, {busy:.0f} µs on the whole machine "
            f"(PostgreSQL and all else). {ours[-1]['sessions']:,} sessions, {ours[-1]['agents']:,} agents, "
            f"{ours[-1]['compactions']:,} compactions, {ours[-1]['duplicates']:,} duplicate lines, {ours[-1]['errors']} errors."
        )  # fmt: skip
    return (
        "### Three shapes, each against ccusage in the same run\n\n"
        + "\n".join(rows)
        + "\n\nTargets: ≥ 30,000 calls/s with 2 workers; ours ÷ ccusage ≤ 1.0. Each of our runs starts "
        "from an empty database and includes storing a raw copy of every file, the dedup, the "
        "COPY load with each call's compressed text, and deriving runs, compactions and file "
        "touches; ccusage reads the same files into an in-memory report. The parse floor is "
        "orjson over every line in one process, for information.\n\n" + "\n".join(notes)
    )


def scale_benchmark(args) -> str:
    rows = [
        "| Calls (shape a) | Wall | Calls/s | CPU per call, our processes | CPU per call, machine | Peak RSS |",
        "|---|---|---|---|---|---|",
    ]
    sizes = [int(size) for size in args.scale.split(",")]
    analytics = None
    for size in sizes:
        folder, _ = build_shape("a", size)
        run = ingest_once(folder, args.workers, analytics=size == sizes[-1])
        log(f"scale {size}: {run}")
        rss = max(run["rss_self_mb"], run["rss_child_mb"])
        rows.append(
            f"| {run['calls']:,} | {run['seconds']:.1f} s | {run['calls'] / run['seconds']:,.0f} "
            f"| {run['python_cpu_s'] / run['calls'] * 1e6:.0f} µs | {run['machine_busy_cpu_s'] / run['calls'] * 1e6:.0f} µs | {rss:.0f} MB |"
        )  # fmt: skip
        analytics = run.get("analytics") or analytics
    text = "### CPU per call and memory as the corpus grows\n\n" + "\n".join(rows)
    text += "\n\nTargets: CPU per call flat from 10k to 1M calls; peak RSS ≤ 300 MB at 1M calls."
    if analytics:
        text += (
            f"\n\nAnalytics, every section, cold, over the {run['calls']:,} calls just loaded (in the "
            f"ingest's process, one run): **{analytics['seconds']:.1f} s**, peak RSS "
            f"{analytics['rss_mb']:.0f} MB ({analytics['rss_before_mb']:.0f} MB before); failed "
            f"sections: {', '.join(analytics['failed_sections']) or 'none'}. Target: < 10 s, worker RSS ≤ 400 MB."
        )
    return text


def grown_file_benchmark(args) -> str:
    """One long session read, then read again after 102 calls were appended."""
    from bench.shapes import write_shape_b

    folder = OUT / "grown"
    shutil.rmtree(folder, ignore_errors=True)
    write_shape_b(folder, sessions=1, calls=20_102, seed=9)
    (path,) = folder.rglob("*.jsonl")
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    # The first version ends before the last 102 calls' lines (about 4.3 lines a call).
    cut = len(lines) - 440
    path.write_bytes(b"".join(lines[:cut]))
    first = ingest_once(folder, 1)
    path.write_bytes(data)
    again = ingest_once(folder, 1, fresh=False)
    log(f"grown: first {first}; again {again}")
    return (
        "### A grown transcript\n\n"
        f"One session file of {first['calls']:,} calls ({cut:,} lines) ingested, then again after "
        f"{len(lines) - cut} lines ({again['calls']} new calls) were appended: **{again['seconds']:.2f} s** "
        f"against {first['seconds']:.2f} s for the first read ({again['seconds'] / first['seconds']:.3f}×; "
        f"the appended lines are {(len(lines) - cut) / len(lines):.3f} of the file). Only the "
        "appended lines are parsed; the session is derived again from the database. Target: cost "
        "proportional to the appended lines."
    )


def otlp_benchmark(args, command: str) -> None:
    from bench.common import write_section

    runs = []
    for attempt in range(args.repeat):
        runs.append(
            otlp_run(args.otlp_batches, args.otlp_clients, server_workers=args.otlp_server_workers)
        )
        log(f"otlp run {attempt + 1}: {runs[-1]}")
    rates = [run["spans_per_s"] for run in runs]
    otlp = sorted(runs, key=lambda run: run["spans_per_s"])[len(runs) // 2]
    shares = [run["spans_per_s"] / run["decode_spans_per_s"] for run in runs]
    body = "\n".join(
        [
            "| Measure | Result | Target |",
            "|---|---|---|",
            f"| OTLP/HTTP on loopback: {otlp['spans']:,} spans in 500-span protobuf batches from {args.otlp_clients} clients, gunicorn with {args.otlp_server_workers} workers, a Celery worker deriving sessions in the background; median of {len(runs)} | **{statistics.median(rates):,.0f} spans/s** (runs: {', '.join(f'{r:,.0f}' for r in rates)}; {sum(r['failures'] for r in runs)} failed requests; {otlp['stored_calls']:,} calls stored per run) | ≥ 10,000 spans/s |",
            f"| Baseline: in-process protobuf decode and normalisation of the same batches, median | {statistics.median(r['decode_spans_per_s'] for r in runs):,.0f} spans/s | – |",
            f"| Receiver ÷ decode baseline, median of the runs | {statistics.median(shares):.2f} | – |",
        ]
    ) + (
        "\n\nEvery request stores its raw body (fsynced) and its calls before answering; "
        "runs and totals are derived by the worker, debounced per workspace."
    )  # fmt: skip
    write_section("OTLP receiver", body, command=command)
    print(body)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_ingest":
        _ingest_child(sys.argv[2], int(sys.argv[3]), analytics=sys.argv[4:] == ["analytics"])
    else:
        main()
