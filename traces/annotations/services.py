"""Writes for annotations: marks, replacements, final marks, queues and their assignment.

Every change is atomic and audited. Bad input raises `InputError` naming the field that is
wrong (the API answers 400 with it; pages show it on the field); a missing role `Forbidden`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.text import Truncator

from governance.errors import Forbidden, InputError
from governance.models import Membership, Role, Workspace
from governance.services import audit_record, full_clean
from traces.annotations.analysis.classes import CONFIDENCES, FAILURE_CLASSES, OTHER
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
from traces.models import Agent, Call, Run, Session

ANNOTATE_ROLE = Role.EDITOR
QUEUE_BUILD_ROLE = Role.REVIEWER
ADJUDICATE_ROLE = Role.ADMIN
MAX_EVIDENCE = 50
MAX_NOTE = 5000
MAX_OTHER_TEXT = 500
MAX_SAMPLE = 1000


def _role(workspace: Workspace, user) -> int:
    membership = Membership.objects.filter(workspace=workspace, user=user).first()
    return membership.role if membership else 0


def _require_role(workspace: Workspace, user, role: int, what: str) -> None:
    if _role(workspace, user) < role:
        raise Forbidden(f"{what} needs the {Role(role).label} role in {workspace.slug}.")


def other_text_from_note(note: str) -> str:
    """The 'other' text taken from the note, for a mark of class 'other' given without
    other_text: the whole note, or its first MAX_OTHER_TEXT characters ending in '…'."""
    return Truncator((note or "").strip()).chars(MAX_OTHER_TEXT)


def _clean_fields(
    *, failure_class: str | None, confidence: str | None, other_text: str, note: str
) -> tuple[str, str]:
    """The other text and the note, cleaned; a class or confidence of None is not checked
    (the caller reports it missing)."""
    errors = {}
    if failure_class is not None and failure_class not in FAILURE_CLASSES:
        errors["failure_class"] = (
            f"Unknown class '{failure_class}'. Use one of: {', '.join(FAILURE_CLASSES)}."
        )
    if confidence is not None and confidence not in CONFIDENCES:
        errors["confidence"] = (
            f"Unknown confidence '{confidence}'. Use one of: {', '.join(CONFIDENCES)}."
        )
    other_text = (other_text or "").strip()
    if failure_class == OTHER and not other_text:
        # The API shape has a note but no other_text: the note says what went wrong.
        other_text = other_text_from_note(note)
        if not other_text:
            errors["other_text"] = (
                "Say what went wrong when the class is 'other' (in other_text, or in the note)."
            )
    if failure_class != OTHER:
        other_text = ""
    if len(other_text) > MAX_OTHER_TEXT:
        errors["other_text"] = f"At most {MAX_OTHER_TEXT} characters."
    if len(note or "") > MAX_NOTE:
        errors["note"] = f"At most {MAX_NOTE:,} characters."
    if errors:
        raise InputError.for_fields(errors)
    return other_text, (note or "").strip()


def locate_call(
    *, session: Session, call_index: int, agent: Agent | None = None, run: Run | None = None
) -> tuple[dict, Run]:
    """The call at `call_index` of the session and the run that contains it, or a
    InputError on `call_index` that says why not."""
    if not isinstance(call_index, int) or isinstance(call_index, bool) or call_index < 0:
        raise InputError.for_fields({"call_index": "A call index is a whole number, 0 or more."})
    call = (
        Call.objects.filter(session=session, session_index=call_index)
        .values("agent_id", "agent_index", "context_tokens", "model")
        .first()
    )
    if call is None:
        raise InputError.for_fields(
            {
                "call_index": f"Call {call_index} is outside session {session.pk}, which has "
                f"calls 0–{max(session.call_count - 1, 0)}."
            }
        )
    if agent is not None and call["agent_id"] != agent.pk:
        raise InputError.for_fields(
            {
                "call_index": f"Call {call_index} belongs to another agent of the session, "
                f"not to agent {agent.pk}."
            }
        )
    found = Run.objects.filter(
        agent_id=call["agent_id"],
        first_call_index__lte=call_index,
        last_call_index__gte=call_index,
    ).first()
    if found is None:
        raise InputError.for_fields({"call_index": f"Call {call_index} is in no derived run."})
    if run is not None and found.pk != run.pk:
        raise InputError.for_fields(
            {
                "call_index": f"Call {call_index} is outside run {run.pk}, which spans calls "
                f"{run.first_call_index}–{run.last_call_index}."
            }
        )
    return call, found


def _clean_evidence(*, session: Session, call_index: int | None, evidence: Iterable) -> list[int]:
    values = []
    for value in evidence or ():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError.for_fields(
                {"evidence_call_indexes": f"'{value}' is not a call index (a whole number ≥ 0)."}
            )
        values.append(value)
    values = sorted(set(values))
    if len(values) > MAX_EVIDENCE:
        raise InputError.for_fields(
            {"evidence_call_indexes": f"At most {MAX_EVIDENCE} evidence steps per mark."}
        )
    later = [v for v in values if call_index is not None and v >= call_index]
    if later:
        raise InputError.for_fields(
            {
                "evidence_call_indexes": f"Evidence must come before the divergence at call "
                f"{call_index}; {', '.join(map(str, later))} do not."
            }
        )
    if values:
        present = set(
            Call.objects.filter(session=session, session_index__in=values).values_list(
                "session_index", flat=True
            )
        )
        missing = [v for v in values if v not in present]
        if missing:
            raise InputError.for_fields(
                {
                    "evidence_call_indexes": f"Calls {', '.join(map(str, missing))} are outside "
                    f"session {session.pk}."
                }
            )
    return values


def _mark_input(
    *,
    session,
    call_index,
    failure_class,
    confidence,
    other_text,
    note,
    evidence,
    agent,
    run,
    partial=False,
) -> tuple[dict[str, list[str]], dict]:
    """Every problem with a mark's input, not only the first, and the cleaned values. With
    `partial`, an input given as None is missing (its form field says so) and not checked."""
    errors: dict[str, list[str]] = {}
    cleaned: dict = {}

    def attempt(name, check):
        try:
            cleaned[name] = check()
        except InputError as exc:
            for field, messages in exc.field_errors.items():
                errors.setdefault(field, []).extend(messages)

    attempt(
        "fields",
        lambda: _clean_fields(
            failure_class=failure_class if partial or failure_class is not None else "",
            confidence=confidence if partial or confidence is not None else "",
            other_text=other_text,
            note=note,
        ),
    )
    if call_index is not None or not partial:
        attempt(
            "located",
            lambda: locate_call(session=session, call_index=call_index, agent=agent, run=run),
        )
    if evidence is not None or not partial:
        attempt(
            "evidence",
            lambda: _clean_evidence(session=session, call_index=call_index, evidence=evidence),
        )
    return errors, cleaned


def divergence_mark_errors(
    *,
    session: Session,
    call_index: int | None = None,
    failure_class: str | None = None,
    confidence: str | None = None,
    other_text: str = "",
    note: str = "",
    evidence_call_indexes: Sequence[int] | None = None,
    agent: Agent | None = None,
    run: Run | None = None,
) -> dict[str, list[str]]:
    """What `divergence_mark` would refuse in this input, all at once; None skips an input
    (a form reports it missing), so a page can show every error together."""
    return _mark_input(
        session=session, call_index=call_index, failure_class=failure_class,
        confidence=confidence, other_text=other_text, note=note,
        evidence=evidence_call_indexes, agent=agent, run=run, partial=True,
    )[0]  # fmt: skip


def divergence_mark(
    *,
    session: Session,
    annotator,
    call_index: int,
    failure_class: str,
    confidence: str,
    note: str = "",
    evidence_call_indexes: Sequence[int] = (),
    other_text: str = "",
    agent: Agent | None = None,
    run: Run | None = None,
) -> Divergence:
    """Mark the first consequential divergence of the run that contains the call.

    One current mark per annotator per run: a second mark replaces the first, which is kept
    (with `replaced_at`) and linked from the new one. Marking the same thing again changes
    nothing (the mark comes back with `unchanged = True`). Finishes the annotator's place on
    any queue item for this run.
    """
    workspace = session.workspace
    _require_role(workspace, annotator, ANNOTATE_ROLE, "Marking a divergence")
    errors, cleaned = _mark_input(
        session=session, call_index=call_index, failure_class=failure_class,
        confidence=confidence, other_text=other_text, note=note,
        evidence=evidence_call_indexes, agent=agent, run=run,
    )  # fmt: skip
    if errors:
        raise InputError.for_fields(errors)
    other_text, note = cleaned["fields"]
    call, target = cleaned["located"]
    evidence = cleaned["evidence"]
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=target.pk).first()  # one writer per run
        current = Divergence.objects.filter(
            run=target, annotator=annotator, kind=MarkKind.MARK, replaced_at__isnull=True
        ).first()
        values = {
            "call_index": call_index,
            "failure_class": failure_class,
            "other_text": other_text,
            "note": note,
            "evidence_call_indexes": evidence,
            "confidence": confidence,
        }
        if current is not None and all(getattr(current, k) == v for k, v in values.items()):
            _finish_slots(run=target, user=annotator, outcome=SlotOutcome.MARKED)
            current.unchanged = True
            return current
        now = timezone.now()
        if current is not None:
            current.replaced_at = now
            current.save(update_fields=["replaced_at"])
        mark = Divergence(
            workspace=workspace,
            session=session,
            agent_id=call["agent_id"],
            run=target,
            annotator=annotator,
            kind=MarkKind.MARK,
            agent_index=call["agent_index"],
            context_tokens=call["context_tokens"],
            model=call["model"] or "",
            replaces=current,
            **values,
        )
        full_clean(mark, exclude=["replaces", "based_on"])
        mark.save()
        mark.unchanged = False
        audit_record(
            workspace=workspace,
            actor=annotator,
            action="divergence.replace" if current else "divergence.mark",
            obj=mark,
            data={
                "session": session.pk,
                "run": target.pk,
                "call_index": call_index,
                "failure_class": failure_class,
                "confidence": confidence,
                "replaces": current.pk if current else None,
            },
        )
        _finish_slots(run=target, user=annotator, outcome=SlotOutcome.MARKED)
    return mark


def _finish_slots(*, run: Run, user, outcome: str) -> int:
    return QueueSlot.objects.filter(item__run=run, annotator=user, finished_at__isnull=True).update(
        finished_at=timezone.now(), outcome=outcome
    )


def divergence_adjudicate(
    *,
    run: Run,
    adjudicator,
    adopt: Divergence | None = None,
    call_index: int | None = None,
    failure_class: str = "",
    confidence: str = "",
    note: str = "",
    evidence_call_indexes: Sequence[int] = (),
    other_text: str = "",
) -> Divergence:
    """An admin's final mark for a run: adopt one annotator's mark, or state one's own.
    A new final mark replaces the previous one (kept in history)."""
    workspace = run.workspace
    _require_role(workspace, adjudicator, ADJUDICATE_ROLE, "Adjudicating")
    if adopt is not None:
        if adopt.run_id != run.pk or adopt.kind != MarkKind.MARK or not adopt.is_current:
            raise InputError.for_fields({"adopt": "Adopt a current annotator's mark on this run."})
        call_index = adopt.call_index
        failure_class, confidence = adopt.failure_class, adopt.confidence
        other_text, evidence_call_indexes = adopt.other_text, adopt.evidence_call_indexes
        note = note or adopt.note
    if call_index is None:
        raise InputError.for_fields(
            {"call_index": "Give the step of the final mark, or adopt a mark."}
        )
    other_text, note = _clean_fields(
        failure_class=failure_class, confidence=confidence, other_text=other_text, note=note
    )
    call, _ = locate_call(session=run.session, call_index=call_index, run=run)
    evidence = _clean_evidence(
        session=run.session, call_index=call_index, evidence=evidence_call_indexes
    )
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()
        current = Divergence.objects.filter(
            run=run, kind=MarkKind.ADJUDICATION, replaced_at__isnull=True
        ).first()
        if current is not None:
            current.replaced_at = timezone.now()
            current.save(update_fields=["replaced_at"])
        final = Divergence.objects.create(
            workspace=workspace,
            session=run.session,
            agent_id=call["agent_id"],
            run=run,
            annotator=adjudicator,
            kind=MarkKind.ADJUDICATION,
            call_index=call_index,
            agent_index=call["agent_index"],
            failure_class=failure_class,
            other_text=other_text,
            note=note,
            evidence_call_indexes=evidence,
            confidence=confidence,
            context_tokens=call["context_tokens"],
            model=call["model"] or "",
            based_on=adopt,
            replaces=current,
        )
        audit_record(
            workspace=workspace,
            actor=adjudicator,
            action="divergence.adjudicate",
            obj=final,
            data={
                "run": run.pk,
                "call_index": call_index,
                "failure_class": failure_class,
                "adopted": adopt.pk if adopt else None,
                "replaces": current.pk if current else None,
            },
        )
    return final


# --- queues -------------------------------------------------------------------


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
    errors = {}
    name = (name or "").strip()
    if not name:
        errors["name"] = "Give the queue a name."
    if not 1 <= sample_size <= MAX_SAMPLE:
        errors["sample_size"] = f"Sample between 1 and {MAX_SAMPLE:,} runs."
    if not 1 <= annotators_per_run <= 10:
        errors["annotators_per_run"] = "Between 1 and 10 annotators per run."
    if not 0 <= agreement_window <= 1000:
        errors["agreement_window"] = "Between 0 and 1,000 steps."
    people = list({user.pk: user for user in annotators}.values())
    eligible = set(
        Membership.objects.filter(
            workspace=workspace, user__in=people, role__gte=ANNOTATE_ROLE
        ).values_list("user_id", flat=True)
    )
    outside = [u.get_username() for u in people if u.pk not in eligible]
    if outside:
        errors["annotators"] = (
            f"Not annotators here (editor role or higher needed): {', '.join(outside)}."
        )
    elif len(people) < annotators_per_run:
        errors["annotators"] = (
            f"{annotators_per_run} annotators per run needs at least {annotators_per_run} "
            f"annotators; {len(people)} chosen."
        )
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
