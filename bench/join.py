"""Join cost benchmark: `python -m bench.join [--sessions 40] [--calls 250] [--repeat 5]`.

On a fresh PostgreSQL database, in one process (Django started once): the same Claude Code
`api_request` events (500-record protobuf batches, each request id a transcript call's)
received through `otlp_logs_receive`,

* alone, into a workspace that holds nothing (the baseline), and
* joined, into a workspace that already holds their transcripts, so every event is
  linked to its call on arrival;

and the other direction: the transcripts ingested alone, and ingested after their events
(every call then links the events waiting for it). Each repetition uses fresh workspaces
and alternates which side runs first. Medians over the repetitions and their ratio.

Target (issue 17): joined ≤ 1.5 × alone. Writes the section "Join cost" of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import write_section
from bench.traces import OUT, ROOT, fresh_database, log

DATABASE = "gov_join_bench"
PER_BATCH = 500
T0 = 1_767_225_600


def _iso(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _counts(s: int, i: int) -> dict:
    return {
        "input_tokens": 3 + i % 7,
        "cache_creation_tokens": 300 + i,
        "cache_read_tokens": 20_000 + 90 * i + s,
        "output_tokens": 40 + (i * 13) % 400,
    }


def write_transcripts(folder: Path, sessions: int, calls: int) -> None:
    """One Claude Code transcript per session: a prompt and a streamed answer (two lines)
    per call."""
    for s in range(sessions):
        session = f"00000000-0000-4000-8000-{s:012d}"
        lines, parent = [], None
        for i in range(calls):
            stamp = T0 + s * 100_000 + i * 10
            lines.append({"type": "user", "uuid": f"u-{s}-{i}", "parentUuid": parent,
                          "sessionId": session, "timestamp": _iso(stamp - 1), "version": "2.1.240",
                          "message": {"role": "user", "content": f"step {i}"}})  # fmt: skip
            parent = f"u-{s}-{i}"
            counts = _counts(s, i)
            for part, output in enumerate((1, counts["output_tokens"])):
                lines.append({
                    "type": "assistant", "uuid": f"a-{s}-{i}-{part}", "parentUuid": parent,
                    "sessionId": session, "timestamp": _iso(stamp + part), "version": "2.1.240",
                    "requestId": f"req_{s:06d}_{i:06d}",
                    "message": {"id": f"msg_{s:06d}_{i:06d}", "type": "message", "role": "assistant",
                                "model": "claude-sonnet-4-5-20250929",
                                "content": [{"type": "text", "text": f"answer {i}"}],
                                "usage": {"input_tokens": counts["input_tokens"],
                                          "cache_creation_input_tokens": counts["cache_creation_tokens"],
                                          "cache_read_input_tokens": counts["cache_read_tokens"],
                                          "output_tokens": output}},
                })  # fmt: skip
                parent = f"a-{s}-{i}-{part}"
        path = folder / "projects" / "bench" / f"{session}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def event_bodies(sessions: int, calls: int) -> list[bytes]:
    """The transcripts' calls as api_request events, 500 to a protobuf request."""
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

    resource = Resource(attributes=[attr("service.name", "claude-code"),
                                    attr("service.version", "2.1.240")])  # fmt: skip
    records = []
    for s in range(sessions):
        for i in range(calls):
            stamp = T0 + s * 100_000 + i * 10 + 2
            counts = _counts(s, i)
            records.append(
                LogRecord(
                    time_unix_nano=stamp * 10**9,
                    body=AnyValue(string_value="claude_code.api_request"),
                    attributes=[
                        attr("event.name", "api_request"),
                        attr("session.id", f"00000000-0000-4000-8000-{s:012d}"),
                        attr("request_id", f"req_{s:06d}_{i:06d}"), attr("model", "claude-sonnet-4-5"),
                        attr("cost_usd", 0.01 + i / 1e5), attr("duration_ms", 2000 + i),
                        attr("user.email", f"dev{s % 5}@example.com"),
                        *(attr(k, v) for k, v in counts.items()),
                    ],
                )
            )  # fmt: skip
    bodies = []
    for start in range(0, len(records), PER_BATCH):
        request = ExportLogsServiceRequest(resource_logs=[ResourceLogs(
            resource=resource,
            scope_logs=[ScopeLogs(scope=InstrumentationScope(name="com.anthropic.claude_code.events"),
                                  log_records=records[start : start + PER_BATCH])],
        )])  # fmt: skip
        bodies.append(request.SerializeToString())
    return bodies


def _child(sessions: int, calls: int, repeat: int) -> None:
    """Runs in its own process on the benchmark database; prints the samples as JSON."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    import django

    django.setup()
    from governance.services import workspace_create
    from traces.models import Call, Session, TelemetryEvent
    from traces.services import ingest_paths
    from traces.services.telemetry import otlp_logs_receive

    folder = Path(tempfile.mkdtemp(prefix="join-bench-"))
    write_transcripts(folder, sessions, calls)
    bodies = event_bodies(sessions, calls)
    expected = sessions * calls

    def receive(workspace) -> float:
        start = time.perf_counter()
        for body in bodies:
            otlp_logs_receive(
                workspace=workspace, user=None, body=body, content_type="application/x-protobuf"
            )
        return time.perf_counter() - start

    def ingest(workspace) -> float:
        start = time.perf_counter()
        ingest_paths(workspace=workspace, paths=[str(folder)], refresh_analytics=False)
        return time.perf_counter() - start

    samples = {"events_alone": [], "events_joined": [], "transcript_alone": [],
               "transcript_existing": [], "transcript_joined": []}  # fmt: skip
    for r in range(repeat):
        alone = workspace_create(slug=f"alone-{r}", name=f"alone {r}")
        joined = workspace_create(slug=f"joined-{r}", name=f"joined {r}")
        t_alone = workspace_create(slug=f"t-alone-{r}", name=f"t alone {r}")
        t_joined = workspace_create(slug=f"t-joined-{r}", name=f"t joined {r}")
        t_existing = workspace_create(slug=f"t-existing-{r}", name=f"t existing {r}")
        ingest(joined)  # untimed: the transcripts the events join
        receive(t_joined)  # untimed: the events the transcripts join
        Session.objects.bulk_create([  # untimed: the sessions alone, no events in them
            Session(workspace=t_existing, harness="claude-code",
                    external_id=f"00000000-0000-4000-8000-{s:012d}")
            for s in range(sessions)
        ])  # fmt: skip
        order = [("events_alone", receive, alone), ("events_joined", receive, joined),
                 ("transcript_alone", ingest, t_alone),
                 ("transcript_existing", ingest, t_existing),
                 ("transcript_joined", ingest, t_joined)]  # fmt: skip
        if r % 2:
            order = [order[1], order[0], order[4], order[3], order[2]]
        for name, run, workspace in order:
            samples[name].append(run(workspace))
        for workspace in (joined, t_joined):
            linked = TelemetryEvent.objects.filter(workspace=workspace, call__isnull=False).count()
            calls_stored = Call.objects.filter(workspace=workspace).count()
            assert linked == expected and calls_stored == expected, (linked, calls_stored)
        assert not TelemetryEvent.objects.filter(workspace=alone, call__isnull=False).exists()
    shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--calls", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("_child", nargs="?")
    args = parser.parse_args()
    if args._child == "_child":
        _child(args.sessions, args.calls, args.repeat)
        return
    command = (
        f"python -m bench.join --sessions {args.sessions} --calls {args.calls} "
        f"--repeat {args.repeat}"
    )
    url = fresh_database(DATABASE)
    env = {**os.environ, "DATABASE_URL": url, "GOVERNANCE_VAR_DIR": str(OUT / "join-var"),
           "DJANGO_SECURE_SSL_REDIRECT": "0", "GOVERNANCE_LOG_LEVEL": "WARNING",
           "CELERY_TASK_ALWAYS_EAGER": "1"}  # fmt: skip
    shutil.rmtree(OUT / "join-var", ignore_errors=True)
    log(f"join benchmark: {args.sessions} sessions × {args.calls} calls, {args.repeat} repetitions")
    result = subprocess.run(
        [sys.executable, "-m", "bench.join", "--sessions", str(args.sessions), "--calls",
         str(args.calls), "--repeat", str(args.repeat), "_child"],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    samples = json.loads(result.stdout.strip().splitlines()[-1])
    median = {name: statistics.median(values) for name, values in samples.items()}
    n = args.sessions * args.calls
    events_ratio = median["events_joined"] / median["events_alone"]
    transcript_ratio = median["transcript_joined"] / median["transcript_alone"]
    existing_ratio = median["transcript_joined"] / median["transcript_existing"]

    def row(label, name):
        values = ", ".join(f"{v:.2f}" for v in samples[name])
        return f"| {label} | {median[name]:.2f} s | {n / median[name]:,.0f} /s | {values} |"

    body = f"""
{n:,} calls ({args.sessions} sessions × {args.calls}), each as a transcript call (two streamed
lines) and as a `claude_code.api_request` event ({len(range(0, n, PER_BATCH))} protobuf
requests of {PER_BATCH} records, received in-process through `otlp_logs_receive`, body
stored and fsynced as for `/v1/logs`). n = {args.repeat} repetitions, fresh workspaces each,
the order alternating; medians.

| Measure | Median | Rate | Samples (s) |
|---|---|---|---|
{row("Events alone (nothing to join)", "events_alone")}
{row("Events of an already-ingested transcript (all linked)", "events_joined")}
{row("Transcript alone", "transcript_alone")}
{row("Transcript into its sessions, created before with nothing in them", "transcript_existing")}
{row("Transcript after its events (all linked on arrival)", "transcript_joined")}

- **Join cost, events: {events_ratio:.2f}×** the events alone (target ≤ 1.5×:
  {"met" if events_ratio <= 1.5 else "NOT met"}).
- Join cost, transcripts: {existing_ratio:.2f}× the transcript into sessions that exist
  already with nothing in them (the join alone); {transcript_ratio:.2f}× the transcript
  alone, which COPYs the calls of sessions it creates instead of merging them. Transcripts
  whose sessions are new (the ingest benchmark) run no join at all.
- Checked in every repetition: every event linked, calls = {n:,} (no call added by events).
"""
    write_section("Join cost", body, command)
    log(body)


if __name__ == "__main__":
    main()
