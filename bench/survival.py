"""Survival audit benchmark: the pure comparison for specs of 10 to 1,000 settled items against
a summary of about 4,400 tokens, and the PostCompact hook's request work with the audit run in
the process (no broker) and queued as a job (with CELERY_BROKER_URL), against a session no
spec governs, in one run.

    .venv/bin/python -m bench.survival [--repeat 15]

Uses a throwaway SQLite file unless DATABASE_URL is set (e.g. to a PostgreSQL database).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from bench.annotations import setup_django

WORDS = [a + b + c for a in "bcdfgklmnp" for b in "aeiou" for c in ("rn", "sk", "lt", "nd")]


def _items(rng: random.Random, n: int):
    from specs.analysis.survival import AuditItem

    return [
        AuditItem(
            f"item-{i}",
            " ".join(rng.sample(WORDS, 10)) + f" at most {rng.randint(2, 99_999)} with CONF_{i}.",
        )
        for i in range(n)
    ]


def _summary(rng: random.Random, items, chars: int = 17_600) -> str:
    parts = [item.text for item in items[: len(items) // 2]]
    while sum(len(p) for p in parts) < chars:
        parts.append(" ".join(rng.sample(WORDS, 12)) + ".")
    return " ".join(parts)[: max(chars, sum(len(p) for p in parts[: len(items) // 2]))]


def _median(fn, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def pure(repeat: int) -> list[tuple[int, float, float]]:
    from specs.analysis.survival import audit, words

    rows = []
    for n in (10, 100, 1000):
        rng = random.Random(n)
        items = _items(rng, n)
        summary = _summary(rng, items)
        tokenise = _median(lambda s=summary: words(s), repeat)
        rows.append((n, _median(lambda i=items, s=summary: audit(i, s), repeat), tokenise))
    return rows


def hook(repeat: int, items: int = 50) -> dict[str, float]:
    """Median seconds of one PostCompact's hook request work (`hook_events_record` in its
    transaction, then what runs on commit), per mode: the audit run on commit in the process
    (no broker: what the request paid before the audit became a job), the audit queued to a
    broker (the request's cost now), and a session no spec governs (the baseline)."""
    from django.db import transaction

    from governance.celery import app
    from governance.models import Job, Role
    from governance.services import job_run, membership_set, user_get_or_create, workspace_create
    from specs import services as spec_services
    from specs.analysis.content import Item
    from traces.models import Compaction, Harness, Session
    from traces.services.hooks import hook_events_record

    rng = random.Random(7)
    suffix = f"{time.time_ns()}"
    workspace = workspace_create(slug=f"bench-survival-{suffix}", name="Bench survival")
    user = user_get_or_create(username=f"bench-survival-{suffix}", password="x" * 16)
    membership_set(workspace=workspace, user=user, role=Role.ADMIN)
    spec = spec_services.spec_create(
        workspace=workspace, title="Bench", consequence="low", actor=user, project="/bench/a"
    )
    specs_items = [Item(i.key, "requirement", i.text) for i in _items(rng, items)]
    version = spec_services.spec_version_create(
        spec=spec, author=user, supersedes=None, items=specs_items, note=""
    )
    spec_services.spec_version_submit(version=version, actor=user)
    summary = _summary(rng, [s for s in specs_items])
    has_broker = bool(app.conf.broker_url) and not app.conf.task_always_eager
    modes = [("in-process", "/bench/a/repo", True), ("ungoverned", "/bench/b", True)]
    if has_broker:
        modes.insert(1, ("queued", "/bench/a/repo", False))
    timings = {}
    eager = app.conf.task_always_eager
    for name, project, run_eagerly in modes:
        session = Session.objects.create(
            workspace=workspace, harness=Harness.CLAUDE_CODE, external_id=name, project=project
        )
        agent = session.agents.create(workspace=workspace, external_id="main")
        Compaction.objects.bulk_create(
            Compaction(workspace=workspace, session=session, agent=agent, key=f"c{i}")
            for i in range(repeat + 1)
        )
        counter = iter(range(repeat + 1))

        def call(name=name, counter=counter):
            n = next(counter)
            event = {
                "event_id": f"{name}-{n}", "event": "PostCompact", "harness": Harness.CLAUDE_CODE,
                "occurred_at": "2026-12-03T10:00:00Z", "context_tokens": None,
                "payload": {"session_id": name, "trigger": "auto", "compact_summary": summary},
            }  # fmt: skip
            with transaction.atomic():  # the request's transaction; on_commit runs at its end
                result = hook_events_record(workspace=workspace, actor=user, events=[event])
            assert result.summaries_stored == 1

        app.conf.task_always_eager = run_eagerly
        try:
            timings[name] = _median(call, repeat)
        finally:
            app.conf.task_always_eager = eager
    queued = Job.objects.filter(workspace=workspace, kind="survival_audit", status="queued")
    if has_broker:
        app.control.purge()  # no worker here: the bench runs the queued jobs itself
        from specs.services import survival_audit_job_run

        for job_id in queued.values_list("pk", flat=True):
            job_run(job_id=job_id, work=survival_audit_job_run)
    audited = spec.versions.get().survival_audits.count()
    expected = (repeat + 1) * (2 if has_broker else 1)
    assert audited == expected, (audited, expected)
    return timings


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    db = setup_django()
    from bench.common import write_section

    load = os.getloadavg()[0]
    rows = pure(args.repeat)
    timings = hook(args.repeat)
    base = timings["ungoverned"]
    lines = [
        "Pure comparison (`specs/analysis/survival.py: audit`), summary of 17,600 characters "
        f"(about 4,400 tokens), median of {args.repeat} runs after one warm-up; the peer is "
        "tokenising the summary alone (`words`), measured in the same run.",
        "",
        "| settled items | audit median | tokenise median | ratio | per item |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n, seconds, tokenise in rows:
        lines.append(
            f"| {n:,} | {seconds * 1000:.2f} ms | {tokenise * 1000:.2f} ms | "
            f"{seconds / tokenise:.1f}× | {seconds / n * 1e6:.0f} µs |"
        )
    lines += [
        "",
        "PostCompact hook request work (`hook_events_record` in one transaction, then what runs "
        f"on its commit), 50 settled items, median of {args.repeat} events each, in one run:",
        "",
        "| session, audit | median | vs baseline |",
        "|---|---:|---:|",
        f"| governed, audit run on commit in the process (no broker; the request's cost before "
        f"the audit became a job) | {timings['in-process'] * 1000:.1f} ms | "
        f"{timings['in-process'] / base:.2f}× |",
    ]
    if "queued" in timings:
        lines.append(
            f"| governed, audit queued as a job to the broker (the request's cost now) | "
            f"{timings['queued'] * 1000:.1f} ms | {timings['queued'] / base:.2f}× |"
        )
    lines += [
        f"| no governing spec (summary stored only; baseline) | {base * 1000:.1f} ms | 1.00× |",
        "",
    ]
    if "queued" in timings:
        lines.append(
            f"With a broker the audit leaves the request: it adds "
            f"{max(timings['queued'] - base, 0) * 1000:.1f} ms (the job row and the message) "
            f"instead of {max(timings['in-process'] - base, 0) * 1000:.1f} ms; the worker runs "
            "the audit after the commit (the bench runs the queued jobs itself and checks every "
            "audit was made)."
        )
    else:
        lines.append(
            "No broker was set (CELERY_BROKER_URL), so only the in-process mode was measured."
        )
    broker = os.environ.get("CELERY_BROKER_URL", "")
    command = f"{'DATABASE_URL=' + db + ' ' if db else ''}{'CELERY_BROKER_URL=' + broker + ' ' if broker else ''}.venv/bin/python -m bench.survival --repeat {args.repeat}"
    lines.append(f"\nLoad average (1 min) when the run started: {load:.1f} on 2 cores.")
    write_section("Survival audit", "\n".join(lines), command=command)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
