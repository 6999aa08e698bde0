"""Demo annotations: production runs of the qualified model, marked by three annotators (some
agreeing, some not, one settled by the admin), and a queue with two annotators per run.

Idempotent: sessions are ingested by content (the same bytes add nothing), a mark identical to
the current one changes nothing, and the queue and final mark are created only once.
"""

from __future__ import annotations

import random

from traces.analytics.services import analytics_refresh_queue
from traces.annotations import services
from traces.annotations.demo_runs import demo_runs
from traces.annotations.filters import RunFilter
from traces.annotations.models import AnnotationQueue, Divergence, MarkKind
from traces.models import AgentKind, Call, Run, Session, UploadSource
from traces.services import ingest_bytes
from traces.synthetic import CorpusParams, generate_corpus

# The model the qualification demo sweeps, so "production against the lab" has both sides.
DEMO_MODEL = "claude-sonnet-4"
# Lean starts and slow growth, as in a small-repo workload; the planted divergences cluster
# below the requalified sweep's ECL (32k), so the demo shows "earlier than the lab predicted".
PARAMS = CorpusParams(
    sessions=14, steps_per_session=(90, 180), seed=4242, models=(DEMO_MODEL,),
    start_context=(8_000, 12_000), growth_at_100k=700, threshold=120_000,
    projects=("/home/dev/checkout-service", "/home/dev/billing-api"), subagents_per_session=(1, 2),
)  # fmt: skip
DIVERGENCE_MEDIAN = 21_000  # tokens; log-normal spread 0.25
QUEUE_NAME = "Demo: Sonnet 4.5 main-thread runs over 100k tokens"
QUEUE_MODEL = "claude-sonnet-4-5"  # a model of the traces demo, which seeds before this app
# Hand-written runs that go wrong (demo_runs), for trying the annotation job itself. The name
# says nothing of what goes wrong in them: marking stays blind.
READ_QUEUE_NAME = "Demo: runs to read for their first divergence"
CLASSES = [
    "forgotten_constraint", "retrieval_failure", "stale_or_conflicting_evidence", "repetition",
    "incorrect_symbol_relationship", "under_changed_fix", "over_broad_change",
    "hallucinated_reference", "harness_truncation",
]  # fmt: skip
NOTES = {
    "forgotten_constraint": "Reintroduced the raw SQL the task said to avoid (constraint at the evidence step).",
    "retrieval_failure": "Never opened the module that defines the retry policy before editing callers.",
    "stale_or_conflicting_evidence": "Followed the pre-refactor summary instead of the current file.",
    "repetition": "Re-ran the same failing test three times without changing anything.",
    "incorrect_symbol_relationship": "Confused Order.total with OrderLine.total.",
    "under_changed_fix": "Fixed the symptom in one caller; the second caller has the same bug.",
    "over_broad_change": "Touched nine files for a one-line ticket.",
    "hallucinated_reference": "Called utils.retry_async, which does not exist.",
    "harness_truncation": "The test log was clipped at the harness cap; the failure line was cut.",
}


def _calls(run: Run) -> list[tuple[int, int]]:
    return list(
        Call.objects.filter(
            agent=run.agent,
            session_index__gte=run.first_call_index,
            session_index__lte=run.last_call_index,
        )
        .order_by("session_index")
        .values_list("session_index", "context_tokens")
    )


def _step_near(calls: list[tuple[int, int]], target: int) -> int:
    """The first call at or above `target` tokens (the last call if none is)."""
    for index, context in calls:
        if context >= target:
            return index
    return calls[-1][0]


def _mark(session, user, calls, step, cls, rng, *, offset=0, confidence=None, evidence=True):
    indexes = [c[0] for c in calls]
    position = min(max(indexes.index(step) + offset, 1), len(indexes) - 1)
    call_index = indexes[position]
    earlier = [i for i in indexes if i < call_index]
    return services.divergence_mark(
        session=session,
        annotator=user,
        call_index=call_index,
        failure_class=cls,
        confidence=confidence or rng.choice(["medium", "high", "high", "low"]),
        note=NOTES.get(cls, ""),
        evidence_call_indexes=[earlier[len(earlier) // 3]] if evidence and earlier else [],
    )


def seed(*, workspace, users, stdout) -> None:
    reviewer, editor, admin = users["reviewer"], users["editor"], users["admin"]
    added = 0
    for generated in generate_corpus(PARAMS):
        summary = ingest_bytes(
            workspace=workspace,
            name=f"annotations-demo-{generated.session_id}.jsonl",
            data=b"\n".join(generated.lines) + b"\n",
            source=UploadSource.DEMO,
            user=editor,
        )
        added += summary.calls
    ids = [g.session_id for g in generate_corpus(PARAMS)]
    sessions = list(Session.objects.filter(workspace=workspace, external_id__in=ids).order_by("id"))
    rng = random.Random(2026)
    runs = [
        run
        for session in sessions
        for run in Run.objects.filter(
            session=session, agent__kind=AgentKind.MAIN, call_count__gte=12, index=0
        ).select_related("session", "agent")
    ]
    marked = 0
    disputed = None
    for number, run in enumerate(runs[:24]):
        calls = _calls(run)
        target = int(min(run.max_context * 0.95, DIVERGENCE_MEDIAN * rng.lognormvariate(0, 0.25)))
        step = _step_near(calls, target)
        cls = CLASSES[number % len(CLASSES)]
        _mark(run.session, reviewer, calls, step, cls, rng)
        marked += 1
        if number % 3 == 2:
            continue  # one annotator only
        agree = number % 5 != 4
        other_cls = cls if agree else CLASSES[(number + 3) % len(CLASSES)]
        offset = rng.choice([0, 1, 2, -1]) if agree else rng.choice([9, 14, -12])
        _mark(run.session, editor, calls, step, other_cls, rng, offset=offset)
        marked += 1
        if number % 4 == 0:
            _mark(run.session, admin, calls, step, cls, rng, offset=rng.choice([0, 1]))
            marked += 1
        if not agree and disputed is None:
            disputed = run
    if (
        disputed is not None
        and not Divergence.objects.filter(run=disputed, kind=MarkKind.ADJUDICATION).exists()
    ):
        adopt = Divergence.objects.get(
            run=disputed, annotator=reviewer, kind=MarkKind.MARK, replaced_at=None
        )
        services.divergence_adjudicate(
            run=disputed,
            adjudicator=admin,
            adopt=adopt,
            note="The reviewer's step is where the constraint was first ignored; the later "
            "step is its consequence.",
        )
    stdout.write(
        f"  annotations: {len(sessions)} sessions of {DEMO_MODEL} ({added} new calls), "
        f"{marked} marks on {min(len(runs), 24)} runs"
    )
    _queue(workspace=workspace, users=users, stdout=stdout)
    seed_runs_that_go_wrong(workspace=workspace, users=users, stdout=stdout)


def _queue(*, workspace, users, stdout) -> None:
    if AnnotationQueue.objects.filter(workspace=workspace, name=QUEUE_NAME).exists():
        return
    reviewer, editor = users["reviewer"], users["editor"]
    criteria = {
        "model": QUEUE_MODEL, "agent_kind": "main", "min_context": 100_000, "unmarked": True,
    }  # fmt: skip
    candidates = RunFilter(criteria, queryset=Run.objects.filter(workspace=workspace)).qs
    if not candidates.exists():
        stdout.write(f"  no unmarked {QUEUE_MODEL} runs over 100k tokens: no demo queue")
        return
    queue = services.queue_build(
        workspace=workspace,
        actor=reviewer,
        name=QUEUE_NAME,
        runs=candidates,
        criteria=criteria,
        sample_size=10,
        annotators=[reviewer, editor],
        annotators_per_run=2,
        agreement_window=3,
        seed=2026,
    )
    rng = random.Random(7)
    # Both annotators work through the first six runs; the rest stay open.
    for _ in range(6):
        first = services.queue_next(queue=queue, user=reviewer)
        if first is None:
            break
        run = first.item.run
        calls = _calls(run)
        step = _step_near(calls, int(run.max_context * rng.uniform(0.45, 0.8)))
        cls = rng.choice(CLASSES[:5])
        if rng.random() < 0.2:
            services.queue_no_divergence(queue=queue, user=reviewer)
        else:
            _mark(run.session, reviewer, calls, step, cls, rng)
        second = services.queue_next(queue=queue, user=editor)
        if second is None or second.item.run_id != run.pk:
            continue
        if rng.random() < 0.7:
            _mark(run.session, editor, calls, step, cls, rng, offset=rng.choice([0, 1, -2]))
        elif rng.random() < 0.5:
            services.queue_no_divergence(queue=queue, user=editor)
        else:
            _mark(run.session, editor, calls, step, rng.choice(CLASSES), rng, offset=6)
    stdout.write(f"  annotation queue '{queue.name}': {queue.sample_size} runs, 2 annotators each")


def seed_runs_that_go_wrong(*, workspace, users, stdout) -> AnnotationQueue:
    """Ingest the demo runs that go wrong and queue, for the reviewer and the editor, the run
    of each that holds its first divergence. Idempotent."""
    written = demo_runs()
    added = 0
    for demo_run in written:
        added += ingest_bytes(
            workspace=workspace,
            name=f"demo-run-{demo_run.key}.jsonl",
            data=b"\n".join(demo_run.lines) + b"\n",
            source=UploadSource.DEMO,
            user=users.get("editor"),
            refresh_analytics=False,
        ).calls
    if added:
        analytics_refresh_queue(workspace=workspace)
    stdout.write(f"  {len(written)} demo runs that go wrong ({added} new calls)")
    queue = AnnotationQueue.objects.filter(workspace=workspace, name=READ_QUEUE_NAME).first()
    if queue is not None:
        return queue
    runs = Run.objects.filter(pk__in=[run_holding_divergence(workspace, r).pk for r in written])
    queue = services.queue_build(
        workspace=workspace,
        actor=users["reviewer"],
        name=READ_QUEUE_NAME,
        runs=runs,
        criteria={"sessions": "hand-written demo runs"},
        sample_size=runs.count(),
        annotators=[users["reviewer"], users["editor"]],
        annotators_per_run=2,
        agreement_window=2,
        seed=16,
    )
    stdout.write(f"  annotation queue '{queue.name}': {queue.sample_size} runs, 2 annotators each")
    return queue


def run_holding_divergence(workspace, demo_run) -> Run:
    """The main-thread run of a demo session that contains its first divergence."""
    return Run.objects.select_related("session").get(
        session__workspace=workspace,
        session__external_id=demo_run.session_id,
        agent__kind=AgentKind.MAIN,
        first_call_index__lte=demo_run.expected_call,
        last_call_index__gte=demo_run.expected_call,
    )
