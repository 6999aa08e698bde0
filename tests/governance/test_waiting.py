"""The home page's "Waiting for you": limits and spec versions to review, annotation queues with
runs left for the member, each linked to where the work is done, scoped to the workspace."""

import re

import pytest
from django.db.models import F

from governance.models import Membership, Role
from governance.selectors import waiting_for
from governance.services import membership_set
from qualification import services as qualification_services
from qualification.analysis.simulate import simulate_sweep
from qualification.models import Qualification
from specs import services as spec_services
from specs.analysis.content import Item
from tests.annotations.conftest import ingest_synthetic
from tests.qualification.conftest import FLAT_THEN_DROP, STRATA, to_csv
from traces.annotations import services as annotation_services
from traces.models import Run
from traces.synthetic import CorpusParams

pytestmark = pytest.mark.django_db

HOME = "/w/team-a/"


def proposed_limit(workspace, members, run_on_commit, *, actor="editor"):
    qualification = qualification_services.qualification_create(
        workspace=workspace,
        name="Sweep",
        model={"name": "model-x", "version": "1"},
        configuration={"decoding": {"temperature": 0}},
        workload={"name": "repo", "version": "1", "families": list(FLAT_THEN_DROP)},
        threshold=0.85,
        consequence="medium",
        strata=STRATA,
        actor=members["editor"],
    )
    rows = simulate_sweep(FLAT_THEN_DROP, STRATA, tasks=12, repeats=3, seed=3)
    with run_on_commit():
        qualification_services.trial_batch_submit(
            qualification=qualification,
            content=to_csv(rows),
            filename="sweep.csv",
            actor=members["editor"],
            run_now=True,
        )
    qualification.refresh_from_db()
    return qualification_services.operating_limit_propose(
        qualification=qualification,
        actor=members[actor],
        name=f"Limit by {actor}",
        values={"max_context_tokens": 16000},  # a small sweep proposes none by itself
    )


def version_in_review(workspace, members, *, author="editor", slug="payments"):
    spec = spec_services.spec_create(
        workspace=workspace,
        title=f"Spec {slug}",
        slug=slug,
        consequence="high",
        actor=members["editor"],
    )
    version = spec_services.spec_version_create(
        spec=spec,
        author=members[author],
        supersedes=None,
        items=[Item("api-compat", "requirement", "The public API stays compatible.")],
    )
    return spec_services.spec_version_submit(version=version, actor=members[author])


def queue_for(workspace, members, *, annotators=("reviewer", "editor"), name="Big runs"):
    session = ingest_synthetic(
        workspace, CorpusParams(sessions=1, steps_per_session=(30, 30), seed=11), name=name
    )[0]
    return annotation_services.queue_build(
        workspace=workspace,
        actor=members["reviewer"],
        name=name,
        runs=Run.objects.filter(session=session),
        criteria={},
        sample_size=2,
        annotators=[members[a] for a in annotators],
        annotators_per_run=1,
        seed=42,
    )


def membership(members, role):
    return Membership.objects.get(user=members[role], workspace__slug="team-a")


def waiting_section(body: str) -> str:
    return re.search(r'<section class="panel waiting".*?</section>', body, re.S).group(0)


def test_a_reviewer_sees_each_kind_with_a_link_to_where_it_is_done(
    client_for, workspace, members, run_on_commit
):
    limit = proposed_limit(workspace, members, run_on_commit)
    version = version_in_review(workspace, members)
    queue = queue_for(workspace, members)
    waiting = waiting_for(membership=membership(members, "reviewer"))
    assert waiting.limits == [limit] and waiting.spec_versions == [version]
    assert [(w.queue, w.left, w.open_run) for w in waiting.queues] == [(queue, 2, None)]

    section = waiting_section(client_for("reviewer").get(HOME).content.decode())
    assert '<span class="count">3</span>' in section
    assert (
        f'<a href="/w/team-a/qualification/limits/{limit.pk}/">Limit #{limit.pk} awaits your '
        "review</a>" in section
    )
    assert (
        f'<a href="/w/team-a/specs/versions/{version.pk}/">Spec payments v1 awaits your review</a>'
        in section
    )
    assert f'<a href="/w/team-a/annotations/queues/{queue.pk}/">Big runs</a>' in section
    assert "2 runs left for you" in section
    assert "Nothing is waiting for you" not in section


def test_nobody_is_asked_to_review_their_own_work(client_for, workspace, members, run_on_commit):
    proposed_limit(workspace, members, run_on_commit, actor="reviewer")
    version_in_review(workspace, members, author="reviewer")
    waiting = waiting_for(membership=membership(members, "reviewer"))
    assert (waiting.limits, waiting.spec_versions, waiting.queues) == ([], [], [])
    # The admin, who wrote neither, reviews both.
    admin = waiting_for(membership=membership(members, "admin"))
    assert len(admin.limits) == 1 and len(admin.spec_versions) == 1


def test_a_proposal_that_can_no_longer_be_approved_is_not_waiting(
    workspace, members, run_on_commit
):
    """New trials after the proposal make its approval a 409: nobody is asked to review it."""
    limit = proposed_limit(workspace, members, run_on_commit)
    assert [row.pk for row in waiting_for(membership=membership(members, "admin")).limits] == [
        limit.pk
    ]
    qualification = limit.qualification
    # What a later trial batch does to the qualification (see trial_batch_load).
    Qualification.objects.filter(pk=qualification.pk).update(data_version=F("data_version") + 1)
    qualification.refresh_from_db()
    assert qualification.data_version != limit.analysis_data_version
    assert waiting_for(membership=membership(members, "admin")).limits == []


def test_an_editor_sees_their_queue_runs_but_no_reviews(
    client_for, workspace, members, run_on_commit
):
    version_in_review(workspace, members, author="reviewer")
    queue = queue_for(workspace, members)
    slot = annotation_services.queue_next(queue=queue, user=members["editor"])
    waiting = waiting_for(membership=membership(members, "editor"))
    assert waiting.limits == [] and waiting.spec_versions == []
    assert [(w.queue, w.left, w.open_run) for w in waiting.queues] == [(queue, 1, slot)]
    section = waiting_section(client_for("editor").get(HOME).content.decode())
    assert "you have a run open, and 1 run left for you" in section
    # Once every run is taken or done, and when the queue closes, it stops waiting.
    annotation_services.queue_no_divergence(queue=queue, user=members["editor"])
    annotation_services.queue_next(queue=queue, user=members["reviewer"])
    assert waiting_for(membership=membership(members, "editor")).queues == []
    annotation_services.queue_set_status(queue=queue, actor=members["reviewer"], status="closed")
    assert waiting_for(membership=membership(members, "reviewer")).queues == []


def test_the_empty_state_says_what_to_do_next(client_for, workspace, members):
    for role, hint in (
        ("reviewer", 'href="/w/team-a/specs/review/">spec review queue</a>'),
        ("editor", 'href="/w/team-a/qualification/sweeps/">qualification</a>'),
        ("viewer", 'href="/w/team-a/qualification/limits/">operating limits</a>'),
    ):
        section = waiting_section(client_for(role).get(HOME).content.decode())
        assert '<p class="empty-title">Nothing is waiting for you.</p>' in section, role
        assert hint in section, role


def test_only_the_members_workspace_counts(workspace, other_workspace, members):
    version_in_review(workspace, members)
    membership_set(workspace=other_workspace, user=members["reviewer"], role=Role.REVIEWER)
    elsewhere = waiting_for(
        membership=Membership.objects.get(user=members["reviewer"], workspace=other_workspace)
    )
    assert elsewhere.count == 0
    assert len(waiting_for(membership=membership(members, "reviewer")).spec_versions) == 1
