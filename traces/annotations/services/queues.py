"""Writes for annotation queues: building one from a sample of runs, handing out its places,
finishing or skipping them, closing and reopening.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from governance.errors import Forbidden, InputError
from governance.models import Membership, Role, Workspace
from governance.services import audit_record
from traces.annotations.models import (
    AnnotationQueue,
    Divergence,
    MarkKind,
    QueueAnnotator,
    QueueItem,
    QueueSkip,
    QueueSlot,
    QueueStatus,
    SlotOutcome,
)
from traces.annotations.services.marks import ANNOTATE_ROLE, _require_role
from traces.models import Run

QUEUE_BUILD_ROLE = Role.REVIEWER
MAX_SAMPLE = 1000


def _queue_sizes_errors(
    *, name: str, sample_size: int, annotators_per_run: int, agreement_window: int
) -> dict[str, str]:
    """What is wrong with a queue's name and sizes, by field."""
    errors = {}
    if not name:
        errors["name"] = "Give the queue a name."
    if not 1 <= sample_size <= MAX_SAMPLE:
        errors["sample_size"] = f"Sample between 1 and {MAX_SAMPLE:,} runs."
    if not 1 <= annotators_per_run <= 10:
        errors["annotators_per_run"] = "Between 1 and 10 annotators per run."
    if not 0 <= agreement_window <= 1000:
        errors["agreement_window"] = "Between 0 and 1,000 steps."
    return errors


def _annotators_error(*, workspace: Workspace, people: list, annotators_per_run: int) -> str:
    """Why these people cannot annotate the queue ('' when they can): each must be an editor
    or higher here, and there must be enough of them for the places of one run."""
    eligible = set(
        Membership.objects.filter(
            workspace=workspace, user__in=people, role__gte=ANNOTATE_ROLE
        ).values_list("user_id", flat=True)
    )
    outside = [u.get_username() for u in people if u.pk not in eligible]
    if outside:
        return f"Not annotators here (editor role or higher needed): {', '.join(outside)}."
    if len(people) < annotators_per_run:
        return (
            f"{annotators_per_run} annotators per run needs at least {annotators_per_run} "
            f"annotators; {len(people)} chosen."
        )
    return ""


def queue_build(
    *,
    workspace: Workspace,
    actor,
    name: str,
    runs: QuerySet[Run],
    criteria: dict,
    sample_size: int,
    annotators: Sequence,
    annotators_per_run: int = 2,
    agreement_window: int = 3,
    seed: int | None = None,
) -> AnnotationQueue:
    """Sample `sample_size` runs from `runs` (already filtered by `criteria`) with a recorded
    seed, and open a queue in which each run gets `annotators_per_run` places."""
    _require_role(workspace, actor, QUEUE_BUILD_ROLE, "Building an annotation queue")
    name = (name or "").strip()
    errors = _queue_sizes_errors(
        name=name,
        sample_size=sample_size,
        annotators_per_run=annotators_per_run,
        agreement_window=agreement_window,
    )
    people = list({user.pk: user for user in annotators}.values())
    problem = _annotators_error(
        workspace=workspace, people=people, annotators_per_run=annotators_per_run
    )
    if problem:
        errors["annotators"] = problem
    ids = sorted(runs.filter(workspace=workspace).values_list("pk", flat=True))
    if not ids and "sample_size" not in errors:
        errors["criteria"] = "No run matches this filter; widen it."
    if errors:
        raise InputError.for_fields(errors)
    if seed is None:
        seed = random.SystemRandom().randrange(1, 2**31)
    chosen = random.Random(seed).sample(ids, min(sample_size, len(ids)))
    with transaction.atomic():
        queue = AnnotationQueue.objects.create(
            workspace=workspace,
            name=name[:200],
            criteria=criteria,
            matched_runs=len(ids),
            sample_size=len(chosen),
            seed=seed,
            annotators_per_run=annotators_per_run,
            agreement_window=agreement_window,
            created_by=actor,
        )
        QueueAnnotator.objects.bulk_create(QueueAnnotator(queue=queue, user=u) for u in people)
        items = QueueItem.objects.bulk_create(
            QueueItem(queue=queue, run_id=run_id, position=position)
            for position, run_id in enumerate(chosen)
        )
        QueueSlot.objects.bulk_create(
            QueueSlot(item=item, number=number)
            for item in items
            for number in range(annotators_per_run)
        )
        audit_record(
            workspace=workspace,
            actor=actor,
            action="annotation_queue.build",
            obj=queue,
            data={
                "criteria": criteria,
                "matched": len(ids),
                "sampled": len(chosen),
                "seed": seed,
                "annotators": [u.get_username() for u in people],
                "annotators_per_run": annotators_per_run,
            },
        )
    return queue


def queue_next(*, queue: AnnotationQueue, user) -> QueueSlot | None:
    """The user's open place in the queue, or a newly claimed one; None when nothing is left.

    Places are claimed with SELECT … FOR UPDATE SKIP LOCKED, so concurrent requests never get
    the same place; the user's membership row is locked first, so one person's concurrent
    requests are served in turn and never get two places. A run the user already marked is
    counted as done at once.
    """
    if queue.status != QueueStatus.OPEN:
        raise InputError.for_fields({"queue": "This queue is closed."})
    for _attempt in range(50):
        with transaction.atomic():
            member = QueueAnnotator.objects.select_for_update().filter(queue=queue, user=user)
            if member.first() is None:
                raise Forbidden("You are not an annotator of this queue.")
            open_slot = (
                QueueSlot.objects.filter(item__queue=queue, annotator=user, finished_at=None)
                .select_related("item__run")
                .first()
            )
            if open_slot is not None:
                return open_slot
            taken = QueueSlot.objects.filter(item__queue=queue, annotator=user).values("item_id")
            skipped = QueueSkip.objects.filter(item__queue=queue, user=user).values("item_id")
            slot = (
                QueueSlot.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(item__queue=queue, annotator__isnull=True)
                .exclude(item_id__in=taken)
                .exclude(item_id__in=skipped)
                .order_by("item__position", "number")
                .first()
            )
            if slot is None:
                return None
            slot.annotator = user
            slot.assigned_at = timezone.now()
            try:
                with transaction.atomic():
                    slot.save(update_fields=["annotator", "assigned_at"])
            except IntegrityError:
                continue  # the same person already holds another place of this item
            item = QueueItem.objects.select_related("run").get(pk=slot.item_id)
            audit_record(
                workspace=queue.workspace,
                actor=user,
                action="annotation_queue.assign",
                obj=queue,
                data={"run": item.run_id, "position": item.position, "slot": slot.number},
            )
            marked = Divergence.objects.filter(
                run_id=item.run_id, annotator=user, kind=MarkKind.MARK, replaced_at=None
            ).exists()
            if not marked:
                return QueueSlot.objects.select_related("item__run").get(pk=slot.pk)
            slot.finished_at = timezone.now()
            slot.outcome = SlotOutcome.MARKED
            slot.save(update_fields=["finished_at", "outcome"])
    return None


def _open_slot_for(*, queue: AnnotationQueue, user, run_id: int | None = None) -> QueueSlot:
    slots = QueueSlot.objects.select_for_update(of=("self",)).filter(
        item__queue=queue, annotator=user, finished_at=None
    )
    if run_id is not None:
        slots = slots.filter(item__run_id=run_id)
    slot = slots.select_related("item").first()
    if slot is None:
        raise InputError.for_fields({"run": "You have no open run in this queue."})
    return slot


def queue_no_divergence(*, queue: AnnotationQueue, user, run_id: int | None = None) -> QueueSlot:
    """The annotator read the run and found no consequential divergence."""
    with transaction.atomic():
        slot = _open_slot_for(queue=queue, user=user, run_id=run_id)
        if Divergence.objects.filter(
            run_id=slot.item.run_id, annotator=user, kind=MarkKind.MARK, replaced_at=None
        ).exists():
            raise InputError.for_fields(
                {"outcome": "You have marked a divergence on this run; it is already done."}
            )
        slot.finished_at = timezone.now()
        slot.outcome = SlotOutcome.NO_DIVERGENCE
        slot.save(update_fields=["finished_at", "outcome"])
        audit_record(
            workspace=queue.workspace,
            actor=user,
            action="annotation_queue.no_divergence",
            obj=queue,
            data={"run": slot.item.run_id},
        )
    return slot


def queue_skip(
    *, queue: AnnotationQueue, user, run_id: int | None = None, reason: str = ""
) -> QueueSkip:
    """Give the place back (someone else takes it) and never offer this run to the user again."""
    with transaction.atomic():
        slot = _open_slot_for(queue=queue, user=user, run_id=run_id)
        skip, _ = QueueSkip.objects.get_or_create(
            item_id=slot.item_id, user=user, defaults={"reason": (reason or "")[:500]}
        )
        slot.annotator = None
        slot.assigned_at = None
        slot.save(update_fields=["annotator", "assigned_at"])
        audit_record(
            workspace=queue.workspace,
            actor=user,
            action="annotation_queue.skip",
            obj=queue,
            data={"run": slot.item.run_id, "reason": skip.reason},
        )
    return skip


def queue_set_status(*, queue: AnnotationQueue, actor, status: str) -> AnnotationQueue:
    _require_role(queue.workspace, actor, QUEUE_BUILD_ROLE, "Closing or reopening a queue")
    if status not in QueueStatus.values:
        raise InputError.for_fields({"status": f"Use one of: {', '.join(QueueStatus.values)}."})
    with transaction.atomic():
        queue.status = status
        queue.save(update_fields=["status"])
        audit_record(
            workspace=queue.workspace,
            actor=actor,
            action=f"annotation_queue.{'close' if status == QueueStatus.CLOSED else 'reopen'}",
            obj=queue,
        )
    return queue
