"""Trace ingestion benchmark: `python -m bench.traces [--calls 300000] [--workers 2] [--repeat 3]`.

With `--compare-to REVISION`, each of our ingest runs is followed by one with that
revision's code (a temporary git worktree, its own database), for a same-run baseline.

1. Generates (once, cached in bench/out/) a Claude Code corpus of at least --calls
   deduplicated calls with `traces.synthetic` (streamed duplicate lines and tool results,
   so about 3.1 lines per call).
2. Measures the bare parse floor: orjson.loads over every line of the same files.
3. Measures end-to-end ingest into a fresh PostgreSQL database with the CLI
   (`ingest_traces --workers N`: store raw copies, parse, dedup, COPY, derive runs,
   compactions, file touches), in a separate process so that its peak RSS is its own.
4. Measures the OTLP receiver on loopback, --repeat times: gunicorn serving /v1/traces
   (--otlp-server-workers, default 3 as deployed), clients posting 500-span protobuf
   batches, against the in-process protobuf decode of the same bodies.

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


# --- corpus ------------------------------------------------------------------------


def build_corpus(target_calls: int) -> tuple[Path, dict]:
    from traces.synthetic import CorpusParams, generate_session

    folder = OUT / f"traces-corpus-{target_calls}"
    stamp = OUT / f"traces-corpus-{target_calls}.json"
    if stamp.exists():
        return folder, json.loads(stamp.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    params = CorpusParams(sessions=10**9, seed=300)
    calls = lines = size = compactions = sessions = 0
    start = time.perf_counter()
    while calls < target_calls:
        generated = generate_session(sessions, params)
        data = b"\n".join(generated.lines) + b"\n"
        (folder / f"{generated.session_id}.jsonl").write_bytes(data)
        calls += generated.calls
        lines += len(generated.lines)
        size += len(data)
        compactions += generated.compactions
        sessions += 1
    info = {
        "sessions": sessions,
        "calls": calls,
        "lines": lines,
        "bytes": size,
        "compactions": compactions,
        "generated_in_s": round(time.perf_counter() - start, 1),
    }
    stamp.write_text(json.dumps(info))
    return folder, info


def parse_floor(folder: Path) -> float:
    import orjson

    from traces.formats.archive import STREAM_BUFFER

    start = time.perf_counter()
    for path in sorted(folder.glob("*.jsonl")):
        with open(path, "rb", buffering=STREAM_BUFFER) as handle:  # as the ingest reads them
            for line in handle:
                orjson.loads(line)
    return time.perf_counter() - start


# --- ingest ------------------------------------------------------------------------


def fresh_database(name: str, root: Path = ROOT) -> str:
    """An empty database migrated by the code in `root` (this tree or a baseline's)."""
    subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", name], check=True)
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
    url = PG.format(name)
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SECURE_SSL_REDIRECT": "0"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=root, env=env, check=True)
    subprocess.run(
        [sys.executable, "manage.py", "create_workspace", "bench"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )
    return url


def ingest_once(folder: Path, workers: int, var_dir: Path, root: Path = ROOT) -> dict:
    # The baseline gets its own database: the load floor is measured on ours afterwards.
    url = fresh_database("gov_bench_traces" + ("" if root == ROOT else "_baseline"), root)
    shutil.rmtree(var_dir, ignore_errors=True)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "GOVERNANCE_VAR_DIR": str(var_dir),
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "GOVERNANCE_LOG_LEVEL": "WARNING",
    }
    command = [
        sys.executable,
        "-m",
        "bench.traces",
        "_ingest",
        str(folder),
        "--workers",
        str(workers),
    ]
    result = subprocess.run(command, cwd=root, env=env, check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def baseline_tree(revision: str) -> Path:
    """A git worktree of an earlier revision, to run its ingest interleaved with ours."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short=12", revision],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    path = OUT / f"baseline-{commit}"
    if not path.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), commit], cwd=ROOT, check=True
        )
    return path


def _ingest_child(folder: str, workers: int) -> None:
    """Runs in its own process: ingest, then report time and peak RSS (self and children)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    import django

    django.setup()
    from governance.models import Workspace
    from traces.services import ingest_paths

    workspace = Workspace.objects.get(slug="bench")
    start = time.perf_counter()
    summary = ingest_paths(
        workspace=workspace, paths=[folder], workers=workers, refresh_analytics=False
    )
    elapsed = time.perf_counter() - start
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({
        "seconds": elapsed, "calls": summary.calls, "duplicates": summary.duplicates_dropped,
        "compactions": summary.compactions, "errors": len(summary.errors),
        "rss_self_mb": own, "rss_child_mb": children,
    }))  # fmt: skip


def database_floor(url: str) -> float:
    """Seconds to COPY the ingested calls and their texts back into empty tables: what
    PostgreSQL alone needs to store the rows, without any parsing in Python."""
    import psycopg

    dump = OUT / "traces-load-floor"
    dump.mkdir(exist_ok=True)
    tables = ("traces_call", "traces_calltext")
    with psycopg.connect(url, autocommit=True) as conn:
        for table in tables:
            with (
                (dump / table).open("wb") as handle,
                conn.cursor().copy(f"COPY {table} TO STDOUT (FORMAT binary)") as copy,
            ):
                for block in copy:
                    handle.write(block)
        conn.execute("TRUNCATE traces_call, traces_calltext CASCADE")
        start = time.perf_counter()
        with conn.transaction():
            for table in tables:
                with (
                    (dump / table).open("rb") as handle,
                    conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT binary)") as copy,
                ):
                    while block := handle.read(1 << 20):
                        copy.write(block)
        return time.perf_counter() - start


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
    parser.add_argument("--calls", type=int, default=300_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
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
    parser.add_argument(
        "--compare-to",
        metavar="REVISION",
        help="Also ingest with the code of this git revision, each run interleaved with ours.",
    )
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    from bench.common import write_section

    command = "python -m bench.traces " + " ".join(sys.argv[1:])
    if not args.only_otlp:
        body = ingest_benchmark(args)
        write_section("Trace ingestion", body, command=command)
        print(body)
    if not args.skip_otlp:
        runs = []
        for attempt in range(args.repeat):
            runs.append(
                otlp_run(
                    args.otlp_batches, args.otlp_clients, server_workers=args.otlp_server_workers
                )
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
                f"| Receiver ÷ decode baseline, median of the runs (the share of the decode rate the whole receiver keeps; compare across runs, since this machine's speed drifts) | {statistics.median(shares):.2f} | – |",
            ]
        ) + (
            "\n\nEvery request stores its raw body (fsynced) and its calls before answering; "
            "runs and totals are derived by the worker, debounced per workspace."
        )
        write_section("OTLP receiver", body, command=command)
        print(body)


def ingest_benchmark(args) -> str:
    folder, corpus = build_corpus(args.calls)
    log(f"corpus: {corpus}")
    baseline = baseline_tree(args.compare_to) if args.compare_to else None
    # Floors, our runs and baseline runs alternate: this machine's speed drifts by tens of
    # percent within minutes, and each ratio should compare like with like.
    floors, runs, baseline_runs = [], [], []
    for attempt in range(args.repeat):
        floors.append(parse_floor(folder))
        runs.append(ingest_once(folder, args.workers, OUT / "traces-var"))
        log(f"parse floor {floors[-1]:.2f} s; ingest run {attempt + 1}: {runs[-1]}")
        if baseline:
            baseline_runs.append(ingest_once(folder, args.workers, OUT / "traces-var", baseline))
            log(f"baseline run {attempt + 1}: {baseline_runs[-1]}")
    if baseline:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT, check=False
        )
    floor = statistics.median(floors)
    paired = statistics.median(r["seconds"] / f for r, f in zip(runs, floors, strict=True))
    load_floors = [database_floor(PG.format("gov_bench_traces")) for _ in range(args.repeat)]
    log(f"database load floor: {load_floors}")
    load_floor = statistics.median(load_floors)
    seconds = statistics.median(r["seconds"] for r in runs)
    rss = max(max(r["rss_self_mb"], r["rss_child_mb"]) for r in runs)
    calls_per_s = corpus["calls"] / seconds
    rows = [
        "| Measure | Result | Target |",
        "|---|---|---|",
        f"| Corpus | {corpus['calls']:,} deduplicated calls in {corpus['sessions']:,} session files, {corpus['lines']:,} lines, {corpus['bytes'] / 1e6:,.0f} MB, {corpus['compactions']:,} compactions | ≥ 300,000 calls, ~1M lines |",
        f"| Bare parse floor (orjson over every line), median of {len(floors)} | {floor:.1f} s ({corpus['lines'] / floor:,.0f} lines/s) | baseline |",
        f"| End-to-end ingest into PostgreSQL, {args.workers} worker processes, median of {len(runs)} | {seconds:.1f} s → **{calls_per_s:,.0f} calls/s** | ≥ 30,000 calls/s |",
        f"| Ingest ÷ parse floor: ratio of the medians; median of each run ÷ the floor measured just before it | **{seconds / floor:.2f}×**; {paired:.2f}× | ≤ 3× |",
        f"| Database load floor: COPY of the same call rows and texts alone (binary, server-side, same indexes, no parsing), median of {len(load_floors)} | {load_floor:.1f} s ({corpus['calls'] / load_floor:,.0f} calls/s); {load_floor / floor:.1f}× the parse floor | baseline |",
        f"| Ingest ÷ (parse floor + database load floor) | **{seconds / (floor + load_floor):.2f}×** | – |",
        f"| Peak RSS (largest process) | **{rss:.0f} MB** | ≤ 300 MB |",
        *(
            [
                f"| Same-run baseline: ingest with the code at `{args.compare_to}` ({baseline.name.removeprefix('baseline-')}), its runs interleaved with ours, median of {len(baseline_runs)} | {statistics.median(r['seconds'] for r in baseline_runs):.1f} s ({corpus['calls'] / statistics.median(r['seconds'] for r in baseline_runs):,.0f} calls/s); ours takes **{seconds / statistics.median(r['seconds'] for r in baseline_runs):.2f}×** its time | – |"
            ]
            if baseline
            else []
        ),
        f"| Calls loaded / duplicate lines dropped / compactions / errors | {runs[-1]['calls']:,} / {runs[-1]['duplicates']:,} / {runs[-1]['compactions']:,} / {runs[-1]['errors']} | all calls, no errors |",
    ]
    return "\n".join(rows) + (
        "\n\nEach ingest run starts from an empty database. The ingest includes storing a raw copy of every file, "
        "the dedup, the COPY load with per-call compressed text, and deriving runs, compactions and file touches. "
        "Per-run figures: "
        + "; ".join(f"{r['seconds']:.1f} s" for r in runs)
        + "; parse floors: "
        + "; ".join(f"{f:.1f} s" for f in floors)
        + (
            "; baseline: " + "; ".join(f"{r['seconds']:.1f} s" for r in baseline_runs)
            if baseline
            else ""
        )
        + "."
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_ingest":
        _ingest_child(sys.argv[2], int(sys.argv[4]))
    else:
        main()
