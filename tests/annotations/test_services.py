"""Services on the real database: marks and their replacement history, validation, final
marks, queues (build, hand-out, finish, skip) and audit records."""

import pytest

from governance.errors import Forbidden, InputError
from governance.models import AuditEvent
from tests.annotations.conftest import call_in, main_run
from traces.annotations import selectors, services
from traces.annotations.models import Divergence, QueueSlot, SlotOutcome
from traces.models import Call, Run

pytestmark = pytest.mark.django_db


def mark(session, user, call_index, **extra):
    values = {"failure_class": "repetition", "confidence": "medium"}
    values.update(extra)
    return services.divergence_mark(
        session=session, annotator=user, call_index=call_index, **values
    )


def test_mark_stores_the_run_context_and_model_and_audits(small_session, members):
    run = main_run(small_session)
    call = call_in(run, 5)
    evidence = call_in(run, 1).session_index
    first = mark(
        small_session,
        members["reviewer"],
        call.session_index,
        evidence_call_indexes=[evidence, evidence],
        note="  loops on the same grep  ",
    )
    assert first.run == run and first.agent_id == run.agent_id
    assert first.context_tokens == call.context_tokens > 0
    assert first.model == call.model and first.agent_index == call.agent_index
    assert first.evidence_call_indexes == [evidence] and first.note == "loops on the same grep"
    event = AuditEvent.objects.get(action="divergence.mark")
    assert event.object_id == str(first.pk) and event.data["call_index"] == call.session_index


def test_a_second_mark_replaces_the_first_and_keeps_history(small_session, members):
    run = main_run(small_session)
    user = members["reviewer"]
    first = mark(small_session, user, call_in(run, 5).session_index)
    second = mark(
        small_session, user, call_in(run, 9).session_index, failure_class="retrieval_failure"
    )
    first.refresh_from_db()
    assert first.replaced_at is not None and second.replaces == first
    assert first.replaced_by == second
    current = Divergence.objects.filter(run=run, annotator=user, replaced_at__isnull=True)
    assert list(current) == [second]
    assert AuditEvent.objects.filter(action="divergence.replace", object_id=str(second.pk)).exists()
    same = mark(
        small_session, user, call_in(run, 9).session_index, failure_class="retrieval_failure"
    )
    assert same.pk == second.pk and same.unchanged
    assert Divergence.objects.filter(run=run, annotator=user).count() == 2
    # Another annotator's mark on the same run is independent.
    other = mark(small_session, members["admin"], call_in(run, 5).session_index)
    assert other.replaces is None
    assert Divergence.objects.filter(run=run, replaced_at__isnull=True).count() == 2


def test_bad_input_names_the_field_and_saves_nothing(small_session, other_session, members):
    run = main_run(small_session)
    user = members["reviewer"]
    step = call_in(run, 6).session_index

    def error(**kwargs):
        values = {"failure_class": "repetition", "confidence": "low", "call_index": step}
        values.update(kwargs)
        with pytest.raises(InputError) as caught:
            services.divergence_mark(session=small_session, annotator=user, **values)
        return caught.value.field_errors

    assert "outside session" in error(call_index=small_session.call_count + 5)["call_index"][0]
    assert "Unknown class 'nonsense'" in error(failure_class="nonsense")["failure_class"][0]
    assert "confidence" in error(confidence="very")
    assert error(failure_class="other")["other_text"] == [
        "Say what went wrong when the class is 'other' (in other_text, or in the note)."
    ]
    assert "other_text" in error(failure_class="other", other_text=" ", note="\n ")
    later = error(evidence_call_indexes=[step + 1])["evidence_call_indexes"][0]
    assert "before the divergence" in later
    assert (
        "before the divergence" in error(evidence_call_indexes=[step])["evidence_call_indexes"][0]
    )
    assert "not a call index" in error(evidence_call_indexes=[-1])["evidence_call_indexes"][0]
    other_run = Run.objects.filter(session=small_session).exclude(pk=run.pk).first()
    outside = error(run=other_run)["call_index"][0]
    assert f"outside run {other_run.pk}" in outside
    subagent = Run.objects.filter(session=small_session, agent__kind="subagent").first()
    assert "another agent" in error(agent=subagent.agent)["call_index"][0]
    assert not Divergence.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="divergence").exists()


def test_other_without_other_text_takes_the_note(small_session, members):
    run = main_run(small_session)
    step = call_in(run, 6).session_index
    first = mark(
        small_session, members["reviewer"], step, failure_class="other", note=" Went off-task "
    )
    assert (first.other_text, first.note, first.class_label) == (
        "Went off-task",
        "Went off-task",
        "Other: Went off-task",
    )
    long = mark(small_session, members["editor"], step, failure_class="other", note="x" * 700)
    assert long.other_text == "x" * 499 + "…" and long.note == "x" * 700
    final = services.divergence_adjudicate(
        run=run,
        adjudicator=members["admin"],
        call_index=step,
        failure_class="other",
        confidence="high",
        note="Both saw it drift",
    )
    assert (final.other_text, final.note) == ("Both saw it drift", "Both saw it drift")
    with pytest.raises(InputError) as caught:
        services.divergence_adjudicate(
            run=run,
            adjudicator=members["admin"],
            call_index=step,
            failure_class="other",
            confidence="high",
        )
    assert list(caught.value.field_errors) == ["other_text"]


def test_viewers_and_outsiders_cannot_mark(small_session, members, outsider):
    step = call_in(main_run(small_session), 3).session_index
    for user in (members["viewer"], outsider):
        with pytest.raises(Forbidden):
            mark(small_session, user, step)
    assert mark(small_session, members["editor"], step).pk  # editors annotate


def test_adjudication_adopts_or_states_a_final_mark(small_session, members):
    run = main_run(small_session)
    a = mark(small_session, members["reviewer"], call_in(run, 4).session_index)
    mark(
        small_session,
        members["editor"],
        call_in(run, 20).session_index,
        failure_class="other",
        other_text="gave up",
    )
    with pytest.raises(Forbidden):
        services.divergence_adjudicate(run=run, adjudicator=members["reviewer"], adopt=a)
    final = services.divergence_adjudicate(run=run, adjudicator=members["admin"], adopt=a)
    assert final.kind == "adjudication" and final.based_on == a
    assert (final.call_index, final.failure_class) == (a.call_index, a.failure_class)
    own = services.divergence_adjudicate(
        run=run,
        adjudicator=members["admin"],
        call_index=call_in(run, 6).session_index,
        failure_class="harness_truncation",
        confidence="high",
    )
    final.refresh_from_db()
    assert final.replaced_at is not None and own.replaces == final
    marks = selectors.run_marks(run=run, user=members["admin"])
    assert marks.final == own and len(marks.marks) == 2 and marks.history == [final]
    assert AuditEvent.objects.filter(action="divergence.adjudicate").count() == 2


# --- queues -----------------------------------------------------------------


def build(small_session, members, **extra):
    values = {
        "workspace": small_session.workspace,
        "actor": members["reviewer"],
        "name": "Big runs",
        "runs": Run.objects.filter(session=small_session, agent__kind="main"),
        "criteria": {"agent_kind": "main"},
        "sample_size": 3,
        "annotators": [members["reviewer"], members["editor"]],
        "annotators_per_run": 2,
        "seed": 42,
    }
    values.update(extra)
    return services.queue_build(**values)


def test_queue_build_samples_reproducibly_and_checks_its_input(small_session, members):
    runs = Run.objects.filter(session=small_session, agent__kind="main")
    assert runs.count() >= 3
    queue = build(small_session, members)
    again = build(small_session, members, name="Again")
    picked = list(queue.items.values_list("run_id", flat=True))
    assert picked == list(again.items.values_list("run_id", flat=True))  # same seed, same sample
    assert queue.matched_runs == runs.count() and queue.sample_size == 3
    assert QueueSlot.objects.filter(item__queue=queue).count() == 6
    event = AuditEvent.objects.get(action="annotation_queue.build", object_id=str(queue.pk))
    assert event.data["seed"] == 42 and event.data["annotators"] == ["reviewer-a", "editor-a"]
    with pytest.raises(Forbidden):
        build(small_session, members, actor=members["editor"])
    with pytest.raises(InputError) as caught:
        build(small_session, members, annotators=[members["reviewer"]], name="")
    assert set(caught.value.field_errors) == {"name", "annotators"}
    with pytest.raises(InputError) as caught:
        build(small_session, members, annotators=[members["viewer"], members["editor"]])
    assert "viewer-a" in caught.value.field_errors["annotators"][0]
    with pytest.raises(InputError) as caught:
        build(small_session, members, runs=runs.filter(max_context__gt=10**9))
    assert "No run matches" in caught.value.field_errors["criteria"][0]


def test_queue_hands_out_each_place_once_and_tracks_outcomes(small_session, members):
    queue = build(small_session, members, sample_size=2)
    reviewer, editor, admin = members["reviewer"], members["editor"], members["admin"]
    first = services.queue_next(queue=queue, user=reviewer)
    assert services.queue_next(queue=queue, user=reviewer) == first  # repeat: same run
    other = services.queue_next(queue=queue, user=editor)
    assert other.item == first.item and other.pk != first.pk  # second place of the same run
    with pytest.raises(Forbidden):
        services.queue_next(queue=queue, user=admin)  # not one of the queue's annotators
    run = first.item.run
    mark(small_session, reviewer, call_in(run, 2).session_index)
    first.refresh_from_db()
    assert first.finished_at is not None and first.outcome == SlotOutcome.MARKED
    services.queue_no_divergence(queue=queue, user=editor)
    other.refresh_from_db()
    assert other.outcome == SlotOutcome.NO_DIVERGENCE
    second = services.queue_next(queue=queue, user=reviewer)
    assert second.item.position == 1
    services.queue_skip(queue=queue, user=reviewer, reason="cannot judge")
    assert services.queue_next(queue=queue, user=reviewer) is None  # skipped run not offered again
    taken = services.queue_next(queue=queue, user=editor)
    assert taken.item == second.item
    progress = selectors.queue_progress(queue=queue)
    assert (progress.items, progress.places, progress.finished, progress.assigned) == (2, 4, 2, 1)
    assert progress.complete_items == 1
    actions = list(
        AuditEvent.objects.filter(action__startswith="annotation_queue").values_list(
            "action", flat=True
        )
    )
    assert actions.count("annotation_queue.assign") == 4
    assert "annotation_queue.skip" in actions and "annotation_queue.no_divergence" in actions


def test_a_run_already_marked_counts_as_done_when_handed_out(small_session, members):
    queue = build(small_session, members, sample_size=1)
    run = queue.items.get().run
    mark(small_session, members["reviewer"], call_in(run, 1).session_index)
    assert services.queue_next(queue=queue, user=members["reviewer"]) is None
    slot = QueueSlot.objects.get(item__queue=queue, annotator=members["reviewer"])
    assert slot.outcome == SlotOutcome.MARKED


def test_queue_kappa_from_marks_is_the_hand_computed_value(small_session, members):
    """Two annotators on four runs: classes (repetition, repetition), (repetition, none),
    (retrieval_failure, retrieval_failure), (none, none). p_o = 3/4; marginals: A = rep 2,
    retr 1, none 1; B = rep 1, retr 1, none 2; p_e = (2·1 + 1·1 + 1·2)/16 = 5/16;
    κ = (3/4 − 5/16)/(1 − 5/16) = 7/11."""
    runs = Run.objects.filter(session=small_session, agent__kind="main").order_by("index")[:4]
    queue = build(
        small_session, members, runs=Run.objects.filter(pk__in=[r.pk for r in runs]), sample_size=4
    )
    a, b = members["reviewer"], members["editor"]
    plan = {
        0: ("repetition", "repetition"),
        1: ("repetition", None),
        2: ("retrieval_failure", "retrieval_failure"),
        3: (None, None),
    }
    for position, (class_a, class_b) in plan.items():
        run = queue.items.get(position=position).run
        for user, cls in ((a, class_a), (b, class_b)):
            slot = services.queue_next(queue=queue, user=user)
            assert slot.item.run == run
            if cls is None:
                services.queue_no_divergence(queue=queue, user=user)
            else:
                mark(
                    small_session,
                    user,
                    call_in(run, 3 if user == a else 4).session_index,
                    failure_class=cls,
                )
    agreement = selectors.queue_agreement(queue=queue)
    assert agreement.kappa.method == "cohen" and agreement.kappa.items == 4
    assert agreement.kappa.kappa == pytest.approx(7 / 11)
    assert agreement.kappa.observed_agreement == pytest.approx(3 / 4)
    # Steps 3 and 4 of the same run are one step apart: within ±3, not the same step.
    assert agreement.steps.items == 2 and agreement.steps.same_step == 0
    assert agreement.steps.within_window == 2
    strict = selectors.queue_agreement(queue=queue, window=0)
    assert strict.steps.within_window == 0


def test_calls_are_not_keyed_by_foreign_key(small_session, members):
    """Marks survive the calls table being rebuilt: they name calls by session index."""
    run = main_run(small_session)
    step = call_in(run, 2).session_index
    m = mark(small_session, members["reviewer"], step)
    assert Call.objects.filter(session=small_session, session_index=m.call_index).exists()
    assert not [
        f for f in Divergence._meta.get_fields() if getattr(f, "related_model", None) is Call
    ]


def test_marks_visible_to_hides_others_marks_until_you_mark(small_session, members, workspace):
    from governance.models import Membership
    from traces.annotations.analysis.agreement import Rating

    run = main_run(small_session)
    theirs = mark(small_session, members["editor"], call_in(run, 2).session_index)
    member = {
        role: Membership.objects.get(workspace=workspace, user=u) for role, u in members.items()
    }
    scope = selectors.scope_for(agent=run.agent, run=run)

    def scope_marks():
        return selectors.marks_in_scope(scope=scope)

    blind = selectors.marks_visible_to(membership=member["reviewer"], marks=scope_marks())
    assert (blind.marks, blind.hidden, blind.revealed) == ([], 1, False)
    asked = selectors.marks_visible_to(
        membership=member["reviewer"], marks=scope_marks(), asked=True
    )
    assert ([m.pk for m in asked.marks], asked.hidden, asked.revealed) == ([theirs.pk], 0, True)
    for role in ("viewer", "admin"):  # cannot mark, or adjudicates: sees every mark
        seen = selectors.marks_visible_to(membership=member[role], marks=scope_marks())
        assert ([m.pk for m in seen.marks], seen.hidden, seen.revealed) == ([theirs.pk], 0, True)
    own = selectors.marks_visible_to(membership=member["editor"], marks=scope_marks())
    assert ([m.pk for m in own.marks], own.hidden, own.revealed) == ([theirs.pk], 0, True)

    mine = mark(small_session, members["reviewer"], call_in(run, 3).session_index)
    after = selectors.marks_visible_to(membership=member["reviewer"], marks=scope_marks())
    assert sorted(m.pk for m in after.marks) == sorted([theirs.pk, mine.pk])
    assert (after.hidden, after.revealed) == (0, True)

    # Queue ratings: hidden while the run can still come to you, shown once you rated or it cannot.
    ratings = [Rating(members["editor"].pk, 4, "repetition")]
    queued = selectors.marks_visible_to(membership=member["reviewer"], marks=ratings)
    assert (queued.marks, queued.hidden, queued.revealed) == ([], 1, False)
    full = selectors.marks_visible_to(
        membership=member["reviewer"], marks=ratings, can_still_mark=False
    )
    assert (full.marks, full.hidden, full.revealed) == (ratings, 0, True)
    rated = [*ratings, Rating(members["reviewer"].pk, None, "none")]
    assert selectors.marks_visible_to(membership=member["reviewer"], marks=rated).revealed is True
