"""Survival audit benchmark: the pure comparison for specs of 10 to 1,000 settled items against
a summary of about 4,400 tokens, and the PostCompact hook service with the audit (a governed
session) against the same call without it (a session no spec governs), measured in one run.

    .venv/bin/python -m bench.survival [--repeat 15]

Uses a throwaway SQLite file unless DATABASE_URL is set (e.g. to a PostgreSQL database).
"""

from __future__ import annotations

import argparse
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


def hook(repeat: int, items: int = 50) -> tuple[float, float]:
    """Median seconds of `hook_events_record` for one PostCompact: governed, ungoverned."""
    from django.db import transaction

    from governance.services import user_get_or_create, workspace_create
    from specs import services as spec_services
    from specs.analysis.content import Item
    from traces.models import Compaction, Harness, Session
    from traces.services.hooks import hook_events_record

    rng = random.Random(7)
    suffix = f"{time.time_ns()}"
    workspace = workspace_create(slug=f"bench-survival-{suffix}", name="Bench survival")
    user = user_get_or_create(username=f"bench-survival-{suffix}", password="x" * 16)
    from governance.models import Role
    from governance.services import membership_set

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
    timings = {}
    for name, project in (("governed", "/bench/a/repo"), ("ungoverned", "/bench/b")):
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
            with transaction.atomic():
                result = hook_events_record(workspace=workspace, actor=user, events=[event])
            assert result.summaries_stored == 1

        timings[name] = _median(call, repeat)
    audited = spec.versions.get().survival_audits.count()
    assert audited == repeat + 1, audited
    return timings["governed"], timings["ungoverned"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    db = setup_django()
    from bench.common import write_section

    rows = pure(args.repeat)
    governed, ungoverned = hook(args.repeat)
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
        f"PostCompact hook service (`hook_events_record`, one event, one transaction), 50 settled "
        f"items, median of {args.repeat} events each:",
        "",
        "| session | median | |",
        "|---|---:|---|",
        f"| governed (summary stored and audited) | {governed * 1000:.1f} ms | "
        f"{governed / ungoverned:.2f}× the baseline |",
        f"| no governing spec (summary stored only; baseline) | {ungoverned * 1000:.1f} ms | |",
        "",
        f"The audit adds {max(governed - ungoverned, 0) * 1000:.1f} ms to the hook's request "
        "(the hook budget is 300 ms).",
    ]
    command = f"{'DATABASE_URL=' + db + ' ' if db else ''}.venv/bin/python -m bench.survival --repeat {args.repeat}"
    write_section("Survival audit", "\n".join(lines), command=command)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
