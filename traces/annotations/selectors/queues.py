"""Reads of annotation queues: the queues, a user's open places, progress and agreement."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet
from django.http import Http404

from governance.models import Membership, Workspace
from traces.annotations.analysis.agreement import (
    Rating,
    kappa_for_items,
    run_agreement,
    step_agreement,
)
from traces.annotations.analysis.classes import NO_DIVERGENCE, class_label
from traces.annotations.models import (
    AnnotationQueue,
    Divergence,
    MarkKind,
    QueueItem,
    QueueSlot,
    SlotOutcome,
)
from traces.annotations.services import ANNOTATE_ROLE
from traces.models import Run


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


def _ratings_by_item(*, queue: AnnotationQueue, items: list[QueueItem]) -> dict[int, list[Rating]]:
    """Each item's ratings from its finished places: the annotator's current mark class (and
    step) when the place ended with a mark, else "none" for no divergence."""
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
    return by_item


def _agreement_row(item: QueueItem, ratings: list[Rating], *, names: dict, window: int) -> dict:
    """One item's row: its ratings, named, and their agreement when it has two or more."""
    return {
        "item": item,
        "ratings": ratings,
        "named": [
            {"who": names.get(r.rater, "?"), "step": r.step, "label": class_label(r.category)}
            for r in ratings
        ],
        "agreement": run_agreement(ratings, window=window) if len(ratings) >= 2 else None,
    }


def queue_agreement(*, queue: AnnotationQueue, window: int | None = None) -> QueueAgreement:
    """Ratings per item from finished places: the annotator's current mark class (and step) on
    the run, or "none" for no divergence."""
    window = queue.agreement_window if window is None else window
    items = list(
        QueueItem.objects.filter(queue=queue)
        .select_related("run__session", "run__agent")
        .order_by("position")
    )
    by_item = _ratings_by_item(queue=queue, items=items)
    complete = [r for r in by_item.values() if len(r) >= 2]
    kappa = kappa_for_items(
        [{r.rater: r.category for r in ratings} for ratings in by_item.values()],
        ratings_per_item=queue.annotators_per_run if queue.annotators_per_run >= 2 else None,
    )
    steps = step_agreement(complete, window=window)
    names = dict(queue.members.values_list("user_id", "user__username"))
    rows = [
        _agreement_row(item, by_item.get(item.pk, []), names=names, window=window) for item in items
    ]
    return QueueAgreement(kappa, steps, rows)


def annotators_for(*, workspace: Workspace) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(workspace=workspace, role__gte=ANNOTATE_ROLE)
        .select_related("user")
        .order_by("user__username")
    )
