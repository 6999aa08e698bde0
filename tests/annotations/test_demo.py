"""seed_demo's annotations part: annotated runs by several annotators (agreeing and not), a
final mark, a queue with kappa; idempotent; and, with the qualification demo, the production
against the lab comparison it was built to show."""

import io

import pytest

from qualification import demo as qualification_demo
from traces import demo as traces_demo
from traces.annotations import demo, selectors
from traces.annotations.models import AnnotationQueue, Divergence, MarkKind

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_users(members):
    return {
        "admin": members["admin"],
        "reviewer": members["reviewer"],
        "editor": members["editor"],
        "viewer": members["viewer"],
    }


def test_seed_adds_annotated_runs_idempotently(workspace, demo_users, client_for):
    traces_demo.seed(workspace=workspace, users=demo_users, stdout=io.StringIO())  # runs first
    out = io.StringIO()
    demo.seed(workspace=workspace, users=demo_users, stdout=out)
    marks = Divergence.objects.filter(workspace=workspace)
    count = marks.count()
    annotators = set(marks.filter(kind=MarkKind.MARK).values_list("annotator__username", flat=True))
    assert annotators == {"admin-a", "reviewer-a", "editor-a"}
    assert marks.filter(kind=MarkKind.ADJUDICATION).count() == 1
    points, resolution = selectors.resolved(marks=selectors.divergences_for(workspace=workspace))
    assert resolution.how["unanimous"] >= 5 and resolution.how["adjudicated"] == 1
    assert resolution.disputed_runs  # some annotators disagree
    queue = AnnotationQueue.objects.get(workspace=workspace)
    agreement = selectors.queue_agreement(queue=queue)
    assert agreement.kappa.method == "cohen" and agreement.kappa.items >= 4
    assert agreement.kappa.kappa is not None
    assert "annotations:" in out.getvalue()

    demo.seed(workspace=workspace, users=demo_users, stdout=io.StringIO())
    assert marks.count() == count
    assert not marks.filter(replaced_at__isnull=False).exists()
    assert AnnotationQueue.objects.filter(workspace=workspace).count() == 1

    qualification_demo.seed(workspace=workspace, users=demo_users, stdout=io.StringIO())
    report = selectors.lab_report(workspace=workspace, points=points, model=demo.DEMO_MODEL)
    assert report.reference is not None and report.comparison.reference_kind == "ECL"
    assert report.comparison.verdict == "earlier"
    page = (
        client_for("viewer").get(f"/w/{workspace.slug}/annotations/divergences/").content.decode()
    )
    assert "Production diverges earlier than the lab predicted" in page
    assert f"n = {len(report.contexts)} annotated runs" in page
    other = (
        client_for("viewer")
        .get(f"/w/{workspace.slug}/annotations/divergences/", {"lab_model": "claude-opus-9"})
        .content.decode()
    )
    assert "No qualification for this model" in other
