"""Creating an audit samples and builds packets through its job; judgments are validated."""

from __future__ import annotations

from collections import Counter

import pytest

from governance.errors import Forbidden, InputError
from governance.models import AuditEvent, Job
from tests.audit.test_analysis import ref_bounds
from tests.audit.test_strata import reference_strata
from traces.audit import selectors, services
from traces.audit.analysis.sampling import band_of
from traces.audit.models import Audit, AuditPacket, AuditStatus, AuditStep, Judgment
from traces.ingest.writes import decompress_text
from traces.models import Call, CallText

pytestmark = pytest.mark.django_db


def test_create_builds_one_packet_per_sampled_run(audit, all_strata, workspace):
    assert audit.status == AuditStatus.OPEN
    job = Job.objects.get(pk=audit.job_id)
    assert job.status == "succeeded" and job.progress_done == audit.packet_count
    packets = list(AuditPacket.objects.filter(audit=audit))
    assert len({p.run_id for p in packets}) == len(packets) == audit.packet_count
    _, drawable, _ = reference_strata(workspace, exclude_forks=True)
    drawn = Counter()
    for packet in packets:
        run = packet.run
        assert packet.task_type == run.task_type
        assert band_of(run.median_context) == packet.band  # the run's band, shown beside it
        steps = list(packet.steps.all())
        assert len(steps) >= 1
        assert len(packet.item_tokens) == packet.item_count
        per_band = Counter(step.band for step in steps)
        assert max(per_band.values()) <= 3
        for step in steps:
            call = Call.objects.get(agent=run.agent, session_index=step.call_index)
            assert run.first_call_index <= step.call_index <= run.last_call_index
            assert step.window_tokens == call.context_tokens
            assert step.had_through_item <= packet.item_count
            low, high = ref_bounds(step.band)
            assert low <= call.context_tokens < high
            drawn[f"{run.task_type}|{step.band}"] += 1
    assert dict(drawn) == {k: min(2, drawable[k]) for k in all_strata}
    assert audit.step_count == AuditStep.objects.filter(packet__audit=audit).count()
    assert AuditEvent.objects.filter(action="audit.create", object_id=str(audit.pk)).exists()


def test_the_same_seed_draws_the_same_sample(audit, members, workspace, run_on_commit):
    with run_on_commit():
        again = services.audit_create(
            workspace=workspace, actor=members["admin"], name="Again",
            strata_sizes=audit.strata_sizes, seed=audit.seed,
        )  # fmt: skip
    first = list(
        AuditStep.objects.filter(packet__audit=audit).values_list("packet__run_id", "call_index")
    )
    second = list(
        AuditStep.objects.filter(packet__audit=again).values_list("packet__run_id", "call_index")
    )
    assert first == second and first


def test_packet_items_match_the_stored_call_text(audit):
    packet = AuditPacket.objects.filter(audit=audit, item_count__gt=3).first()
    data = selectors.packet_dict(packet)
    run = packet.run
    first_call = Call.objects.filter(agent=run.agent, session_index=run.first_call_index).get()
    text = CallText.objects.filter(call=first_call).first()
    stored = decompress_text(text.data)
    prompt_items = [i for i in data["items"] if i["kind"] == "operator_message"]
    if stored.get("prompt"):
        assert prompt_items[0]["text"] == stored["prompt"]
        assert data["directive"] == stored["prompt"]
    assert [i["id"] for i in data["items"]] == list(range(1, packet.item_count + 1))
    assert [i["tokens"] for i in data["items"]] == packet.item_tokens
    assert all(s["step_id"] for s in data["steps"])
    if run.started_by_id:
        assert data["summary_label"].startswith("Inherited compaction summary: a lossy digest")


def test_unknown_stratum_and_empty_strata_are_refused(workspace, members, corpus):
    with pytest.raises(InputError, match="'nonsense\\|<50k' is not a stratum"):
        services.audit_create(
            workspace=workspace, actor=members["reviewer"], name="x",
            strata_sizes={"nonsense|<50k": 2},
        )  # fmt: skip
    with pytest.raises(InputError, match="not a whole number"):
        services.audit_create(
            workspace=workspace, actor=members["reviewer"], name="x",
            strata_sizes={"building|<50k": "two"},
        )  # fmt: skip
    with pytest.raises(InputError, match="no steps in the chosen strata"):
        services.audit_create(
            workspace=workspace, actor=members["reviewer"], name="x",
            strata_sizes={"pr_to_merge|≥600k": 3},
        )  # fmt: skip
    assert not Audit.objects.exists()


def test_an_editor_cannot_create(workspace, members, all_strata):
    with pytest.raises(Forbidden):
        services.audit_create(
            workspace=workspace, actor=members["editor"], name="x", strata_sizes=all_strata
        )


def _step(audit, min_items=2):
    return (
        AuditStep.objects.filter(packet__audit=audit, had_through_item__gte=min_items)
        .select_related("packet__audit")
        .first()
    )


def test_judgment_ids_are_checked_against_what_the_step_had(audit, members):
    step = _step(audit)
    beyond = step.had_through_item + 1
    with pytest.raises(InputError) as caught:
        services.judgment_record(
            step=step, actor=members["editor"], judge_kind="human",
            active_item_ids=[1, beyond, 0], verbatim_needed=False,
            counterfactual="unaffected", confidence="high",
        )  # fmt: skip
    assert caught.value.payload == {"field": "active_item_ids", "invalid_ids": [beyond, 0]}
    assert f"{beyond}, 0" in caught.value.message
    assert not Judgment.objects.exists()


def test_judging_again_replaces_and_tokens_come_from_items(audit, members):
    step = _step(audit)
    sizes = step.packet.item_tokens
    first = services.judgment_record(
        step=step, actor=members["editor"], judge_kind="human", active_item_ids=[1, 2],
        helpful_item_ids=[2], verbatim_needed=True, counterfactual="slightly_degraded",
        confidence="medium",
    )  # fmt: skip
    again = services.judgment_record(
        step=step, actor=members["editor"], judge_kind="human", active_item_ids=[2],
        verbatim_needed=False, counterfactual="unaffected", confidence="high",
    )  # fmt: skip
    assert first.created and not again.created and first.pk == again.pk
    row = selectors.judgment_dict(Judgment.objects.get(pk=again.pk))
    assert row["active_tokens"] == sizes[1]
    assert row["judge_label"] == members["editor"].username
    results = selectors.audit_results(audit=audit)
    assert results.n_steps == 1
    band = next(b for b in results.bands if b.band == step.band)
    assert band.active_tokens.value == sizes[1]
    assert band.active_share.value == pytest.approx(sizes[1] / step.window_tokens)


def test_a_closed_audit_takes_no_judgments(audit, members):
    services.audit_set_status(audit=audit, actor=members["reviewer"], status="closed")
    with pytest.raises(InputError, match="takes no judgments"):
        services.judgment_record(
            step=_step(audit), actor=members["editor"], judge_kind="llm", judge_label="j",
            active_item_ids=[], verbatim_needed=False, counterfactual="unaffected",
            confidence="low",
        )  # fmt: skip


def test_a_job_sent_again_keeps_the_judgments(audit, members):
    from governance.services import JobReporter

    step = _step(audit)
    services.judgment_record(
        step=step, actor=members["editor"], judge_kind="human", active_item_ids=[1],
        verbatim_needed=False, counterfactual="unaffected", confidence="high",
    )  # fmt: skip
    job = Job.objects.get(pk=audit.job_id)
    services.audit_build_run(job, JobReporter(job))
    assert Judgment.objects.filter(step=step).count() == 1


def test_demo_seeds_an_audit_with_two_judges_once(workspace, members, corpus):
    import io

    from traces.audit import demo

    demo.seed(workspace=workspace, users=members, stdout=io.StringIO())
    demo.seed(workspace=workspace, users=members, stdout=io.StringIO())
    audit = Audit.objects.get(workspace=workspace, name=demo.DEMO_NAME)
    assert audit.status == AuditStatus.OPEN and audit.job_id is None
    judged = Judgment.objects.filter(step__packet__audit=audit)
    assert judged.count() == 2 * demo.JUDGED_STEPS
    agreement = selectors.audit_results(audit=audit).agreement
    assert agreement.steps == demo.JUDGED_STEPS


def test_a_build_that_fails_marks_the_audit_failed(workspace, members, corpus):
    from governance.services import job_create, job_run

    broken = Audit.objects.create(
        workspace=workspace, name="broken", strata_sizes={"qa|<50k": -1}, seed=1
    )
    job = job_create(workspace=workspace, kind="audit_build", params={"audit_id": broken.pk})
    with pytest.raises(ValueError):
        job_run(job_id=job.pk, work=services.audit_build_run)
    broken.refresh_from_db()
    job.refresh_from_db()
    assert broken.status == AuditStatus.FAILED and job.status == "failed"
    assert "size must be 0 or more" in job.error


def test_judgment_fields_are_checked(audit, members):
    step = _step(audit)
    base = {
        "step": step, "actor": members["editor"], "judge_kind": "llm", "judge_label": "j",
        "active_item_ids": [], "verbatim_needed": False, "counterfactual": "unaffected",
        "confidence": "high",
    }  # fmt: skip
    for change, message in (
        ({"counterfactual": "fine"}, "counterfactual: use one of unaffected"),
        ({"confidence": "sure"}, "confidence: use one of low"),
        ({"judge_label": " "}, "judge_label: name the LLM judge"),
        ({"judge_kind": "robot"}, "judge_kind: use one of human, llm"),
        ({"active_item_ids": "1,2"}, "active_item_ids: give a list"),
    ):
        with pytest.raises(InputError, match=message):
            services.judgment_record(**{**base, **change})
    with pytest.raises(Forbidden):
        services.judgment_record(**{**base, "actor": members["viewer"]})
    assert not Judgment.objects.exists()
