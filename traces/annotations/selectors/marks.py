"""Reads of divergence marks: the current marks, who may see whose (`marks_visible_to`) and
the points and resolved marks the aggregates are computed from.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import Http404

from governance.models import Membership, Role, Workspace
from traces.annotations.analysis import aggregates
from traces.annotations.analysis.agreement import (
    Rating,
    RunAgreement,
    run_agreement,
)
from traces.annotations.models import (
    Divergence,
    MarkKind,
)
from traces.annotations.selectors.viewer import Scope
from traces.annotations.services import ANNOTATE_ROLE
from traces.models import Run


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
