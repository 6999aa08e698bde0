"""Reads for the trace viewer, marks, agreement, queues and aggregates, scoped to a workspace.

The viewer never loads a whole run: the context strip reads three columns of the run's calls,
and the step list reads one window of calls and their texts.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet
from django.http import Http404

from governance.models import Membership, Role, Workspace
from traces.annotations.analysis import aggregates
from traces.annotations.analysis.agreement import (
    Rating,
    RunAgreement,
    kappa_for_items,
    run_agreement,
    step_agreement,
)
from traces.annotations.analysis.classes import NO_DIVERGENCE, class_label
from traces.annotations.analysis.steps import Step, StepRow, build_step, full_part
from traces.annotations.models import (
    AnnotationQueue,
    Divergence,
    MarkKind,
    QueueItem,
    QueueSlot,
    SlotOutcome,
)
from traces.annotations.services import ANNOTATE_ROLE
from traces.ingest import decompress_text
from traces.models import Agent, AgentKind, Call, CallText, Compaction, Run, Session

WINDOW = 50

# --- the viewer ---------------------------------------------------------------


def session_get(*, workspace: Workspace, pk: int) -> Session:
    session = Session.objects.filter(workspace=workspace, pk=pk).first()
    if session is None:
        raise Http404("No such session in this workspace.")
    return session


def recent_sessions(*, workspace: Workspace, limit: int = 5) -> list[Session]:
    return list(Session.objects.filter(workspace=workspace).order_by("-started_at", "-id")[:limit])


def agent_get(*, session: Session, pk: int) -> Agent:
    agent = Agent.objects.filter(session=session, pk=pk).select_related("parent").first()
    if agent is None:
        raise Http404("No such agent in this session.")
    return agent


def main_agent(*, session: Session) -> Agent:
    """The main thread, or (for harnesses without one) the agent with the most calls."""
    agents = Agent.objects.filter(session=session)
    agent = (
        agents.filter(kind=AgentKind.MAIN).order_by("started_at", "id").first()
        or agents.order_by("-call_count", "id").first()
    )
    if agent is None:
        raise Http404("This session has no agents.")
    return agent


def run_get(*, session: Session, pk: int) -> Run:
    run = Run.objects.filter(session=session, pk=pk).select_related("agent", "started_by").first()
    if run is None:
        raise Http404("No such run in this session.")
    return run


def run_in_workspace(*, workspace: Workspace, pk: int) -> Run:
    run = Run.objects.filter(workspace=workspace, pk=pk).select_related("session", "agent").first()
    if run is None:
        raise Http404("No such run in this workspace.")
    return run


@dataclass(frozen=True)
class Scope:
    """The calls a viewer page shows: an agent's calls from `lo` to `hi` (agent indexes)."""

    agent: Agent
    run: Run | None
    lo: int
    hi: int

    @property
    def count(self) -> int:
        return max(0, self.hi - self.lo + 1)

    @property
    def pages(self) -> int:
        return max(1, -(-self.count // WINDOW))


def scope_for(*, agent: Agent, run: Run | None = None) -> Scope:
    if run is None:
        bounds = (
            Call.objects.filter(agent=agent)
            .order_by("agent_index")
            .values_list("agent_index", flat=True)
        )
        first = bounds.first()
        last = bounds.last()
        if first is None:
            return Scope(agent, None, 0, -1)
        return Scope(agent, None, first, last)
    ends = dict(
        Call.objects.filter(
            session_id=run.session_id,
            session_index__in=[run.first_call_index, run.last_call_index],
        ).values_list("session_index", "agent_index")
    )
    return Scope(agent, run, ends[run.first_call_index], ends[run.last_call_index])


def page_of_call(*, scope: Scope, call_index: int) -> int | None:
    """The 1-based window that holds the call, or None when the call is not in the scope."""
    agent_index = (
        Call.objects.filter(
            session_id=scope.agent.session_id, session_index=call_index, agent=scope.agent
        )
        .values_list("agent_index", flat=True)
        .first()
    )
    if agent_index is None or not scope.lo <= agent_index <= scope.hi:
        return None
    return (agent_index - scope.lo) // WINDOW + 1


def strip(*, scope: Scope) -> dict[str, list]:
    """Context per call for the whole scope, as columns."""
    rows = (
        Call.objects.filter(agent=scope.agent, agent_index__gte=scope.lo, agent_index__lte=scope.hi)
        .order_by("agent_index")
        .values_list("session_index", "context_tokens")
    )
    index, context = [], []
    for i, c in rows:
        index.append(i)
        context.append(c)
    return {"index": index, "context": context}


STEP_COLUMNS = (
    "id", "session_index", "agent_index", "timestamp", "model", "context_tokens", "output_tokens",
    "input_tokens", "cache_creation_tokens", "cache_read_tokens",
)  # fmt: skip


def steps_window(*, scope: Scope, page: int, spawns: dict[str, int]) -> list[Step]:
    """One window of steps with their texts (WINDOW calls, plus the one before for growth)."""
    start = scope.lo + (page - 1) * WINDOW
    end = min(scope.hi, start + WINDOW - 1)
    # From the agent's call before the window, so the first step's growth is known (across a
    # compaction it shows the drop).
    rows = list(
        Call.objects.filter(agent=scope.agent, agent_index__gte=start - 1, agent_index__lte=end)
        .order_by("agent_index")
        .values_list(*STEP_COLUMNS)
    )
    texts = {
        call_id: decompress_text(data)
        for call_id, data in CallText.objects.filter(
            call_id__in=[r[0] for r in rows if r[2] >= start]
        ).values_list("call_id", "data")
    }
    steps = []
    previous = None
    for row in rows:
        pk, index, agent_index, ts, model, ctx, out, inp, cc, cr = row
        if agent_index >= start:
            steps.append(
                build_step(
                    StepRow(index, agent_index, ts, model, ctx, out, inp, cc, cr, previous),
                    texts.get(pk),
                    position=agent_index - scope.lo + 1,
                    spawns=spawns,
                )
            )
        previous = ctx
    return steps


def spawn_map(*, session: Session) -> dict[str, int]:
    return dict(
        Agent.objects.filter(session=session)
        .exclude(spawn_tool_call_id="")
        .values_list("spawn_tool_call_id", "pk")
    )


def agents_of(*, session: Session) -> list[Agent]:
    return list(Agent.objects.filter(session=session).order_by("started_at", "id"))


def runs_of(*, agent: Agent) -> list[Run]:
    return list(Run.objects.filter(agent=agent).order_by("index"))


def compactions_in(*, scope: Scope) -> dict[int, Compaction]:
    """Compactions of the agent keyed by the session index of the first call after them."""
    if scope.count == 0:
        return {}
    rows = Compaction.objects.filter(agent=scope.agent, after_call_index__isnull=False)
    return {c.after_call_index: c for c in rows}


def spawning_call(*, agent: Agent) -> int | None:
    """The parent's call that started a subagent: its last call before the subagent's first."""
    if agent.parent_id is None:
        return None
    first = (
        Call.objects.filter(agent=agent)
        .order_by("agent_index")
        .values_list("session_index", flat=True)
        .first()
    )
    if first is None:
        return None
    return (
        Call.objects.filter(agent_id=agent.parent_id, session_index__lt=first)
        .order_by("-session_index")
        .values_list("session_index", flat=True)
        .first()
    )


def call_full_text(*, session: Session, call_index: int, key: str) -> str:
    row = (
        Call.objects.filter(session=session, session_index=call_index)
        .values_list("id", flat=True)
        .first()
    )
    if row is None:
        raise Http404("No such call in this session.")
    data = CallText.objects.filter(call_id=row).values_list("data", flat=True).first()
    text = full_part(decompress_text(data) if data is not None else None, key)
    if text is None:
        raise Http404("No such part of this call.")
    return text


# --- marks --------------------------------------------------------------------


def divergences_for(*, workspace: Workspace, current: bool = True) -> QuerySet[Divergence]:
    marks = Divergence.objects.filter(workspace=workspace).select_related(
        "annotator", "session", "agent", "run"
    )
    return marks.filter(replaced_at__isnull=True) if current else marks


def divergence_get(*, workspace: Workspace, pk: int) -> Divergence:
    mark = divergences_for(workspace=workspace, current=False).filter(pk=pk).first()
    if mark is None:
        raise Http404("No such divergence in this workspace.")
    return mark


@dataclass
class RunMarks:
    marks: list[Divergence]  # current annotators' marks
    final: Divergence | None  # current adjudication
    history: list[Divergence]  # replaced marks and final marks, newest first
    agreement: RunAgreement | None
    mine: Divergence | None


def run_marks(*, run: Run, user=None, window: int = 3) -> RunMarks:
    rows = list(
        Divergence.objects.filter(run=run)
        .select_related("annotator", "based_on__annotator")
        .order_by("created_at", "id")
    )
    current = [m for m in rows if m.replaced_at is None and m.kind == MarkKind.MARK]
    final = next(
        (m for m in rows if m.replaced_at is None and m.kind == MarkKind.ADJUDICATION), None
    )
    history = sorted(
        (m for m in rows if m.replaced_at is not None), key=lambda m: m.replaced_at, reverse=True
    )
    agreement = (
        run_agreement(
            [Rating(m.annotator_id, m.call_index, m.failure_class) for m in current], window=window
        )
        if len(current) >= 2
        else None
    )
    mine = next((m for m in current if user is not None and m.annotator_id == user.pk), None)
    return RunMarks(current, final, history, agreement, mine)


def marks_in_scope(*, scope: Scope) -> list[Divergence]:
    """Current marks on the agent's calls shown (for the strip and the step badges)."""
    marks = Divergence.objects.filter(agent=scope.agent, replaced_at__isnull=True)
    if scope.run is not None:
        marks = marks.filter(run=scope.run)
    return list(marks.select_related("annotator"))


def can_annotate(*, membership: Membership) -> bool:
    return membership.has_role(ANNOTATE_ROLE)


@dataclass(frozen=True)
class VisibleMarks:
    marks: list  # what the member may see: every mark, or only their own
    hidden: int  # others' marks withheld
    revealed: bool  # others' marks are shown


def _own(mark, user_id) -> bool:
    author = mark.rater if isinstance(mark, Rating) else mark.annotator_id
    return author == user_id


def _has_marked(marks, user_id) -> bool:
    """A rating on a queue run, or a current divergence mark (a final mark is no rating)."""
    return any(
        _own(m, user_id) and (isinstance(m, Rating) or m.kind == MarkKind.MARK) for m in marks
    )


def marks_visible_to(
    *, membership: Membership, marks, can_still_mark: bool = True, asked: bool = False
) -> VisibleMarks:
    """Blind marking: an annotator who has not marked a run does not see the others' marks on
    it (so the judgement stays independent) while the run can still come to them, unless they
    asked to see them anyway. Viewers (who cannot mark) and admins see every mark.

    `marks` are one run's (or one scope's) `Divergence` rows or queue `Rating`s. The queue page
    passes `can_still_mark=False` once the run cannot come to this member any more.
    """
    user_id = membership.user_id
    revealed = (
        not can_annotate(membership=membership)
        or membership.has_role(Role.ADMIN)
        or not can_still_mark
        or asked
        or _has_marked(marks, user_id)
    )
    shown = [m for m in marks if revealed or _own(m, user_id)]
    return VisibleMarks(shown, len(marks) - len(shown), revealed)


# --- aggregates ---------------------------------------------------------------


def mark_points(*, marks: QuerySet[Divergence]) -> list[aggregates.MarkPoint]:
    rows = marks.filter(replaced_at__isnull=True).values_list(
        "id", "run_id", "annotator_id", "call_index", "failure_class", "context_tokens", "model",
        "kind",
    )  # fmt: skip
    return [
        aggregates.MarkPoint(pk, run, who, step, cls, ctx, model, kind == MarkKind.ADJUDICATION)
        for pk, run, who, step, cls, ctx, model, kind in rows
    ]


def resolved(
    *, marks: QuerySet[Divergence], window: int = 3, basis: str = "resolved"
) -> tuple[list[aggregates.MarkPoint], aggregates.Resolution]:
    """The divergences aggregates count: one per run (resolved), or every annotator's mark."""
    points = mark_points(marks=marks)
    resolution = aggregates.resolve(points, window=window)
    if basis == "marks":
        return [p for p in points if not p.adjudication], resolution
    return resolution.resolved, resolution


def lab_reference(*, workspace: Workspace, model_name: str):
    from qualification.selectors import lab_reference_for_model

    return lab_reference_for_model(workspace=workspace, model_name=model_name)


def weakest_family(reference):
    """The lab family the comparison uses: the weakest one (it sets the production limit)."""
    if reference is None or not reference.families:
        return None
    named = next((f for f in reference.families if f.family == reference.weakest_family), None)
    if named is not None:
        return named
    return min(reference.families, key=lambda f: f.ecl_tokens or f.knee_tokens or 10**12)


# --- queues ------------------------------------------------------------------


def queues_for(*, workspace: Workspace) -> QuerySet[AnnotationQueue]:
    return (
        AnnotationQueue.objects.filter(workspace=workspace)
        .select_related("created_by")
        .annotate(items_count=Count("items", distinct=True))
        .order_by("-created_at", "-id")
    )


def queue_get(*, workspace: Workspace, pk: int) -> AnnotationQueue:
    queue = (
        AnnotationQueue.objects.filter(workspace=workspace, pk=pk)
        .select_related("created_by")
        .first()
    )
    if queue is None:
        raise Http404("No such annotation queue in this workspace.")
    return queue


def open_assignment(*, queue: AnnotationQueue, user) -> QueueSlot | None:
    return (
        QueueSlot.objects.filter(item__queue=queue, annotator=user, finished_at=None)
        .select_related("item__run__session", "item__run__agent")
        .first()
    )


def open_assignments(*, workspace: Workspace, user) -> QuerySet[QueueSlot]:
    return QueueSlot.objects.filter(
        item__queue__workspace=workspace, annotator=user, finished_at=None
    ).select_related("item__run")


def assignment_for_run(*, run: Run, user) -> QueueSlot | None:
    return (
        QueueSlot.objects.filter(item__run=run, annotator=user, finished_at=None)
        .select_related("item__queue")
        .first()
    )


@dataclass
class QueueProgress:
    items: int
    places: int
    finished: int
    assigned: int
    complete_items: int
    by_annotator: list[dict]


def queue_progress(*, queue: AnnotationQueue) -> QueueProgress:
    slots = QueueSlot.objects.filter(item__queue=queue)
    totals = slots.aggregate(
        places=Count("id"),
        finished=Count("id", filter=Q(finished_at__isnull=False)),
        assigned=Count("id", filter=Q(annotator__isnull=False, finished_at__isnull=True)),
    )
    complete = (
        QueueItem.objects.filter(queue=queue)
        .annotate(done=Count("slots", filter=Q(slots__finished_at__isnull=False)))
        .filter(done__gte=queue.annotators_per_run)
        .count()
    )
    people = {
        m.user_id: {"user": m.user, "finished": 0, "marked": 0, "none": 0, "open": 0}
        for m in queue.members.select_related("user")
    }
    for who, outcome, finished in slots.exclude(annotator=None).values_list(
        "annotator_id", "outcome", "finished_at"
    ):
        row = people.get(who)
        if row is None:
            continue
        if finished is None:
            row["open"] += 1
        else:
            row["finished"] += 1
            row["marked" if outcome == SlotOutcome.MARKED else "none"] += 1
    return QueueProgress(
        items=queue.items.count(),
        places=totals["places"],
        finished=totals["finished"],
        assigned=totals["assigned"],
        complete_items=complete,
        by_annotator=sorted(people.values(), key=lambda r: r["user"].get_username()),
    )


@dataclass
class QueueAgreement:
    kappa: object  # KappaResult
    steps: object  # StepAgreement
    rows: list[dict]  # per item: run, ratings, agreement


def queue_agreement(*, queue: AnnotationQueue, window: int | None = None) -> QueueAgreement:
    """Ratings per item from finished places: the annotator's current mark class (and step) on
    the run, or "none" for no divergence."""
    window = queue.agreement_window if window is None else window
    items = list(
        QueueItem.objects.filter(queue=queue)
        .select_related("run__session", "run__agent")
        .order_by("position")
    )
    finished = list(
        QueueSlot.objects.filter(item__queue=queue, finished_at__isnull=False)
        .exclude(annotator=None)
        .values_list("item_id", "annotator_id", "outcome")
    )
    run_ids = [item.run_id for item in items]
    marks = {
        (m.run_id, m.annotator_id): m
        for m in Divergence.objects.filter(
            run_id__in=run_ids, kind=MarkKind.MARK, replaced_at__isnull=True
        ).select_related("annotator")
    }
    by_item: dict[int, list[Rating]] = {}
    run_of = {item.pk: item.run_id for item in items}
    for item_id, who, outcome in finished:
        mark = marks.get((run_of[item_id], who))
        if outcome == SlotOutcome.MARKED and mark is not None:
            rating = Rating(who, mark.call_index, mark.failure_class)
        else:
            rating = Rating(who, None, NO_DIVERGENCE)
        by_item.setdefault(item_id, []).append(rating)
    complete = [r for r in by_item.values() if len(r) >= 2]
    kappa = kappa_for_items(
        [{r.rater: r.category for r in ratings} for ratings in by_item.values()],
        ratings_per_item=queue.annotators_per_run if queue.annotators_per_run >= 2 else None,
    )
    steps = step_agreement(complete, window=window)
    names = dict(queue.members.values_list("user_id", "user__username"))
    rows = []
    for item in items:
        ratings = by_item.get(item.pk, [])
        rows.append(
            {
                "item": item,
                "ratings": ratings,
                "named": [
                    {
                        "who": names.get(r.rater, "?"),
                        "step": r.step,
                        "label": class_label(r.category),
                    }
                    for r in ratings
                ],
                "agreement": run_agreement(ratings, window=window) if len(ratings) >= 2 else None,
            }
        )
    return QueueAgreement(kappa, steps, rows)


def annotators_for(*, workspace: Workspace) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(workspace=workspace, role__gte=ANNOTATE_ROLE)
        .select_related("user")
        .order_by("user__username")
    )


# --- reports shared by pages and the API ---------------------------------------


@dataclass
class BandReport:
    table: aggregates.BandTable
    resolution: aggregates.Resolution
    points: list[aggregates.MarkPoint]
    basis: str
    window: int
    distribution: aggregates.Distribution


def band_report(
    *, marks: QuerySet[Divergence], width: int = aggregates.DEFAULT_BAND, basis: str = "resolved",
    window: int = 3,
) -> BandReport:  # fmt: skip
    points, resolution = resolved(marks=marks, window=window, basis=basis)
    table = aggregates.by_band(((p.context, p.failure_class) for p in points), width=width)
    dist = aggregates.distribution([p.context for p in points])
    return BandReport(table, resolution, points, basis, window, dist)


@dataclass
class LabReport:
    model: str
    reference: object | None  # qualification.selectors.LabReference
    family: object | None  # its weakest LabFamily
    comparison: aggregates.LabComparison | None
    contexts: list[int]


def models_marked(*, points: list[aggregates.MarkPoint]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for p in points:
        if p.model:
            counts[p.model] = counts.get(p.model, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def lab_report(
    *, workspace: Workspace, points: list[aggregates.MarkPoint], model: str
) -> LabReport:
    contexts = sorted(p.context for p in points if p.model == model)
    reference = lab_reference(workspace=workspace, model_name=model) if model else None
    family = weakest_family(reference)
    comparison = None
    if reference is not None and family is not None:
        comparison = aggregates.compare_with_lab(
            contexts,
            ecl_tokens=family.ecl_tokens,
            knee_tokens=family.knee_tokens,
            family=family.family,
        )
    return LabReport(model, reference, family, comparison, contexts)
