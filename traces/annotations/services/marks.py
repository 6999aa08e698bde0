"""Writes for divergence marks: an annotator's mark (replacing their earlier one) and an admin's
final mark, with the checks of their input.

Bad input raises `InputError` naming the field that is wrong (the API answers 400 with it;
pages show it on the field); a missing role `Forbidden`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import transaction
from django.utils import timezone
from django.utils.text import Truncator

from governance.errors import Forbidden, InputError
from governance.models import Membership, Role, Workspace
from governance.services import audit_record, full_clean
from traces.annotations.analysis.classes import CONFIDENCES, FAILURE_CLASSES, OTHER
from traces.annotations.models import (
    Divergence,
    MarkKind,
    QueueSlot,
    SlotOutcome,
)
from traces.models import Agent, Call, Run, Session

ANNOTATE_ROLE = Role.EDITOR
ADJUDICATE_ROLE = Role.ADMIN
MAX_EVIDENCE = 50
MAX_NOTE = 5000
MAX_OTHER_TEXT = 500


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
