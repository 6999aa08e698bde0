"""Utility audit benchmark: building the judge packets of 200 sampled steps (seed 001 §6).

Ingests transcripts whose tool results carry text at ≈4 characters a token, so that the
inventories are as large as the windows they describe (compaction near 170k, a 4,400-token
summary opening each later run), then creates an audit of 201 steps (three to a run: 67 runs) and
times the job that samples the steps, decompresses their call text, builds the packets and
stores them. The baseline, measured in the same run, only reads and decompresses the same
call text: the floor any packet builder pays.

    .venv/bin/python -m bench.audit [--sessions 14] [--calls 500] [--repeat 3]

Uses a throwaway SQLite file unless DATABASE_URL is set (e.g. to a PostgreSQL database).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from bench.annotations import setup_django

TARGET_SECONDS = 10.0
STEPS = 201  # drawn three to a run: 67 runs
GROWTH = 1_500  # tokens a call adds
START = 20_000
COMPACT_EVERY = 100  # calls: 20k + 100 × 1.5k = 170k before each compaction
SUMMARY_TOKENS = 4_400
BASE = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _ts(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def transcript(session: str, calls: int) -> bytes:
    """A Claude Code main thread: each call reads a file whose text is GROWTH tokens long."""
    lines = []
    t = 0.0

    def user(content, **extra):
        nonlocal t
        t += 1
        lines.append(
            {"type": "user", "sessionId": session, "isSidechain": False, "uuid": f"u{session}{t}",
             "timestamp": _ts(t), "message": {"role": "user", "content": content}, **extra}
        )  # fmt: skip

    user("Refactor the billing module so that invoices are computed in one place.")
    context = START
    for i in range(calls):
        if i and i % COMPACT_EVERY == 0:
            t += 1
            lines.append(
                {"type": "system", "subtype": "compact_boundary", "sessionId": session,
                 "isSidechain": False, "uuid": f"cb{session}{i}", "timestamp": _ts(t),
                 "content": "Conversation compacted",
                 "compactMetadata": {"trigger": "auto", "preTokens": context}}
            )  # fmt: skip
            user("Summary of the work so far. " * (SUMMARY_TOKENS * 4 // 28), isCompactSummary=True)
            context = 30_000
            user("Continue with the invoice refactor; keep the public API unchanged.")
        tool_id = f"toolu_{session}_{i}"
        t += 1
        lines.append(
            {"type": "assistant", "sessionId": session, "isSidechain": False,
             "uuid": f"a{session}{i}", "timestamp": _ts(t), "requestId": f"req_{session}_{i}",
             "message": {"id": f"msg_{session}_{i}", "type": "message", "role": "assistant",
                         "model": "claude-sonnet-4-5",
                         "content": [
                             {"type": "text", "text": f"Reading module {i % 40} next."},
                             {"type": "tool_use", "id": tool_id, "name": "Read",
                              "input": {"file_path": f"/repo/billing/mod_{i % 40}.py"}}],
                         "usage": {"input_tokens": 3, "cache_creation_input_tokens": GROWTH,
                                   "cache_read_input_tokens": context, "output_tokens": 60}}}
        )  # fmt: skip
        body = "\n".join(
            f"{n:5d}  def invoice_{n}(x): return x * {n}  # billing"
            for n in range(GROWTH * 4 // 48)
        )
        user([{"type": "tool_result", "tool_use_id": tool_id, "content": body}])
        context += GROWTH
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=14)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    database_url = setup_django()

    from django.db import connection

    from bench.common import write_section
    from governance.celery import app
    from governance.models import Role, Workspace
    from governance.services import membership_set, user_get_or_create, workspace_create
    from traces.audit import services
    from traces.audit.analysis.sampling import band_labels, strata_counts
    from traces.audit.models import AuditPacket, AuditStep
    from traces.ingest.writes import decompress_text
    from traces.models import Call, CallText, Run, UploadSource
    from traces.services import ingest_bytes

    app.conf.task_always_eager = True  # the job runs in this process, as without a broker
    workspace = Workspace.objects.filter(slug="bench-audit").first() or workspace_create(
        slug="bench-audit"
    )
    user = user_get_or_create(username="bench-audit", password="bench-audit-pass")
    membership_set(workspace=workspace, user=user, role=Role.ADMIN)
    start = time.perf_counter()
    for s in range(args.sessions):
        ingest_bytes(
            workspace=workspace, name=f"audit-bench-{s}.jsonl",
            data=transcript(f"audit-bench-{s}", args.calls), source=UploadSource.DEMO,
        )  # fmt: skip
    calls = Call.objects.filter(workspace=workspace).count()
    print(
        f"ingested {args.sessions} sessions, {calls:,} calls in {time.perf_counter() - start:.1f} s"
    )

    started = time.perf_counter()
    counts = strata_counts(services.run_infos(workspace=workspace))
    strata_seconds = time.perf_counter() - started
    # Steps come from the highest bands first: the latest steps of their runs, so the packets
    # carry the longest inventories (the worst case for the builder).
    bands = band_labels()
    sizes, left = {}, STEPS
    for key, available in sorted(
        counts.items(), key=lambda kv: (-bands.index(kv[0].partition("|")[2]), -kv[1])
    ):
        if left <= 0:
            break
        sizes[key] = min(available, left)
        left -= sizes[key]

    started = time.perf_counter()
    audit = services.audit_create(
        workspace=workspace, actor=user, name="bench", strata_sizes=sizes, seed=1
    )
    cold = time.perf_counter() - started
    audit.refresh_from_db()
    steps = AuditStep.objects.filter(packet__audit=audit).count()
    items = sum(AuditPacket.objects.filter(audit=audit).values_list("item_count", flat=True))
    print(f"cold: {cold:.2f} s for {audit.packet_count} packets, {steps} steps, {items:,} items")

    warm = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        services.audit_build_packets(audit=audit)
        warm.append(time.perf_counter() - started)
    print(f"rebuild: median {statistics.median(warm):.2f} s")

    # Baseline: read and decompress the call text of the same runs up to their last step.
    spans = []
    for packet in AuditPacket.objects.filter(audit=audit).select_related("run"):
        last = max(packet.steps.values_list("call_index", flat=True))
        spans.append((packet.run.agent_id, packet.run.first_call_index, last))

    def read_only():
        chars = 0
        for agent_id, first, last in spans:
            ids = Call.objects.filter(
                agent_id=agent_id, session_index__gte=first, session_index__lte=last
            ).values_list("id", flat=True)
            for data in CallText.objects.filter(call_id__in=list(ids)).values_list(
                "data", flat=True
            ):
                chars += len(json.dumps(decompress_text(data)))
        return chars

    base = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        chars = read_only()
        base.append(time.perf_counter() - started)
    base_median = statistics.median(base)
    warm_median = statistics.median(warm)
    print(f"baseline read: median {base_median:.2f} s ({chars / 1e6:.0f}M characters)")
    runs = Run.objects.filter(workspace=workspace).count()
    body = f"""
Database: {connection.vendor}. {args.sessions} sessions of {args.calls} calls ({calls:,} calls,
{runs} runs; compaction every {COMPACT_EVERY} calls, each later run opening with a
{SUMMARY_TOKENS:,}-token summary). Each call's tool result holds text of about the {GROWTH:,}
tokens it adds, so inventories are as large as the windows they describe. The audit asks
{STEPS} steps, three to a run, from the highest bands first (the longest inventories); packets hold {items:,} inventory items in all
({chars / 1e6:.0f}M characters of call text read).

| Measure | seconds |
|---|---:|
| Count the strata (every call's window, read once) | {strata_seconds:.2f} |
| Create the audit, first build in this process: sampling, then the job builds and stores {audit.packet_count} packets ({steps} steps) | {cold:.2f} |
| Rebuild the same packets (median of {args.repeat}) | {warm_median:.2f} |
| Baseline: only read and decompress the same call text (median of {args.repeat}) | {base_median:.2f} |

Building costs {warm_median / base_median:.1f}× the bare read of the text it packs. Target
for {steps} steps: under {TARGET_SECONDS:.0f} s: {"met" if max(cold, *warm) < TARGET_SECONDS else "NOT met"}
(every build). The first build follows the ingest, so PostgreSQL's cache already holds the
call text; a build on a cold server also pays reading it from disk.
"""
    prefix = f"DATABASE_URL={database_url} " if database_url else ""
    command = f"{prefix}.venv/bin/python -m bench.audit {' '.join(argv or sys.argv[1:])}"
    write_section("Utility audit packets", body, command=command.strip())


if __name__ == "__main__":
    main()
