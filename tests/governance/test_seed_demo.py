"""`seed_demo`, run once for this module: each app's part of the demo workspace, and that a
second run adds nothing.

seed_demo takes 5-15 s on a shared machine. Four tests used to run it (most of them twice),
each in its own rolled-back transaction. Here the `seeded` fixture runs it twice per module,
inside one outer transaction that it rolls back after the last test of the module. Each test
still runs in a savepoint of its own (the ordinary `db` fixture), so whatever a test writes
is undone before the next one, and nothing of the demo reaches any other module.

The per-app `demo.seed` tests (qualification, context files, artifacts) stay with their apps:
they run one app's part alone, so that another app's demo cannot mask a failure.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command
from django.db import transaction
from django.test import Client, override_settings

from artifacts.models import Artifact
from governance.celery import app as celery_app
from governance.models import Membership, Role, Workspace
from specs import selectors as spec_selectors
from specs.models import RestartPackage, Spec, SpecVersion, VersionStatus
from traces.annotations import demo as annotations_demo
from traces.annotations import selectors as annotation_selectors
from traces.annotations.demo_runs import demo_runs
from traces.annotations.models import AnnotationQueue, Divergence, MarkKind
from traces.models import Call, Session

pytestmark = pytest.mark.django_db

FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@dataclass(frozen=True)
class Seeded:
    first_output: str
    second_output: str
    counts_after_first: dict[str, int]
    counts_after_second: dict[str, int]


def model_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def count(counts: dict[str, int], *models) -> tuple[int, ...]:
    return tuple(counts[model._meta.label] for model in models)


@pytest.fixture(scope="module")
def media_root(tmp_path_factory):
    return tmp_path_factory.mktemp("seed-demo-media")


@pytest.fixture(scope="module")
def seeded(django_db_setup, django_db_blocker, media_root) -> Seeded:
    """seed_demo, run twice inside one transaction that is rolled back after the module."""
    outer = transaction.atomic()
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True  # as the autouse _tasks_in_process does per test
    try:
        with (
            django_db_blocker.unblock(),
            override_settings(MEDIA_ROOT=media_root, PASSWORD_HASHERS=FAST_HASHERS),
        ):
            outer.__enter__()
            try:
                first, second = io.StringIO(), io.StringIO()
                call_command("seed_demo", stdout=first)
                after_first = model_counts()
                call_command("seed_demo", stdout=second)
                after_second = model_counts()
            except BaseException:
                transaction.set_rollback(True)
                outer.__exit__(None, None, None)
                raise
    finally:
        celery_app.conf.task_always_eager = eager
    yield Seeded(first.getvalue(), second.getvalue(), after_first, after_second)
    with django_db_blocker.unblock():
        transaction.set_rollback(True)
        outer.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _test_settings(settings, media_root):
    """Replaces the suite's autouse fixture of this name: the same settings, except that
    MEDIA_ROOT stays where the seeded demo wrote its files."""
    settings.MEDIA_ROOT = media_root
    settings.PASSWORD_HASHERS = FAST_HASHERS
    cache.clear()
    yield


@pytest.fixture
def demo(seeded) -> Workspace:
    return Workspace.objects.get(slug="demo")


def test_seed_demo_is_idempotent(seeded, demo):
    assert "admin-demo-pass" in seeded.first_output
    assert "viewer-demo-pass" in seeded.first_output
    assert count(seeded.counts_after_second, Workspace, Membership) == count(
        seeded.counts_after_first, Workspace, Membership
    )
    roles = dict(
        Membership.objects.filter(workspace__slug="demo").values_list("user__username", "role")
    )
    assert roles == {
        "admin": Role.ADMIN,
        "reviewer": Role.REVIEWER,
        "editor": Role.EDITOR,
        "viewer": Role.VIEWER,
    }


def test_specs_part_shows_a_living_product_and_is_idempotent(seeded, demo):
    refunds = Spec.objects.get(workspace=demo, slug="refund-api-migration")
    chain = list(
        refunds.versions.order_by("number").values_list("number", "status", "supersedes__number")
    )
    assert chain == [(1, "superseded", None), (2, "superseded", 1), (3, "authoritative", 2)]
    v2 = refunds.versions.get(number=2)
    assert v2.acknowledged_resolutions == ["key-scope"] and v2.reviewer.username == "reviewer"
    packages = RestartPackage.objects.filter(workspace=demo).order_by("pk")
    assert [p.is_superseded for p in packages] == [True, False]
    assert all(p.verifications.count() == 2 for p in packages)
    pending = SpecVersion.objects.get(workspace=demo, status=VersionStatus.IN_REVIEW)
    assert pending.spec.slug == "artifact-retention"
    assert [r["key"] for r in spec_selectors.pending_resolutions(version=pending)] == [
        "retention-period"
    ]
    low = Spec.objects.get(workspace=demo, slug="repository-conventions")
    assert low.versions.get().status == VersionStatus.AUTHORITATIVE
    for version in SpecVersion.objects.filter(workspace=demo):
        assert spec_selectors.fingerprint_verified(version=version)
    models = (Spec, SpecVersion, RestartPackage)
    assert count(seeded.counts_after_second, *models) == count(seeded.counts_after_first, *models)
    assert "specifications already present" in seeded.second_output


def test_artifacts_part(seeded, demo):
    demo_artifacts = Artifact.objects.filter(workspace=demo).exclude(
        run_id__startswith="restart-package-"
    )
    assert demo_artifacts.count() == 5
    # Restart packages in the demo keep their verification output as artifacts too.
    assert Artifact.objects.filter(workspace=demo, run_id__startswith="restart-package-").exists()


def test_annotations_part_annotated_runs_idempotently_and_the_lab_verdict(seeded, demo):
    """Annotated runs by several annotators (agreeing and not), a final mark, a queue with
    kappa; idempotent; and, with the qualification demo, the production against the lab
    comparison it was built to show."""
    marks = Divergence.objects.filter(workspace=demo)
    annotators = set(marks.filter(kind=MarkKind.MARK).values_list("annotator__username", flat=True))
    assert annotators == {"admin", "reviewer", "editor"}
    assert marks.filter(kind=MarkKind.ADJUDICATION).count() == 1
    points, resolution = annotation_selectors.resolved(
        marks=annotation_selectors.divergences_for(workspace=demo)
    )
    assert resolution.how["unanimous"] >= 5 and resolution.how["adjudicated"] == 1
    assert resolution.disputed_runs  # some annotators disagree
    queue = AnnotationQueue.objects.get(workspace=demo, name=annotations_demo.QUEUE_NAME)
    agreement = annotation_selectors.queue_agreement(queue=queue)
    assert agreement.kappa.method == "cohen" and agreement.kappa.items >= 4
    assert agreement.kappa.kappa is not None
    assert "  annotations: " in seeded.first_output

    # The second run added no mark, replaced none, and built no second queue.
    assert count(seeded.counts_after_second, Divergence) == count(
        seeded.counts_after_first, Divergence
    )
    assert not marks.filter(replaced_at__isnull=False).exists()
    assert AnnotationQueue.objects.filter(workspace=demo).count() == 2

    report = annotation_selectors.lab_report(
        workspace=demo, points=points, model=annotations_demo.DEMO_MODEL
    )
    assert report.reference is not None and report.comparison.reference_kind == "ECL"
    assert report.comparison.verdict == "earlier"
    viewer = Client()
    viewer.force_login(get_user_model().objects.get(username="viewer"))
    page = viewer.get(f"/w/{demo.slug}/annotations/divergences/").content.decode()
    assert "Production diverges earlier than the lab predicted" in page
    assert f"n = {len(report.contexts)} annotated runs" in page
    other = viewer.get(
        f"/w/{demo.slug}/annotations/divergences/", {"lab_model": "claude-opus-9"}
    ).content.decode()
    assert "No qualification for this model" in other


def test_annotations_part_has_runs_that_go_wrong_for_the_annotators(seeded, demo):
    """Four hand-written runs that go wrong, queued unmarked for the reviewer and the editor,
    ingested once."""
    queue = AnnotationQueue.objects.get(workspace=demo, name=annotations_demo.READ_QUEUE_NAME)
    assert set(queue.members.values_list("user__username", flat=True)) == {"reviewer", "editor"}
    written = demo_runs()
    assert {item.run_id for item in queue.items.all()} == {
        annotations_demo.run_holding_divergence(demo, run).pk for run in written
    }
    sessions = Session.objects.filter(
        workspace=demo, external_id__in=[r.session_id for r in written]
    )
    assert sorted(sessions.values_list("call_count", flat=True)) == sorted(r.calls for r in written)
    assert not Divergence.objects.filter(session__in=sessions).exists()  # blind: nothing pre-marked
    assert "4 demo runs that go wrong" in seeded.first_output
    assert "4 demo runs that go wrong (0 new calls)" in seeded.second_output
    assert count(seeded.counts_after_second, Session, Call) == count(
        seeded.counts_after_first, Session, Call
    )


def test_pricing_part_prices_every_demo_call_once(seeded, demo):
    from traces.pricing import selectors as pricing_selectors
    from traces.pricing.models import ModelPrice, PriceTableVersion

    version = pricing_selectors.price_table_current(workspace=demo)
    assert version.number == 1 and version.prices.count() == 13
    assert "price table already present" in seeded.second_output
    assert count(seeded.counts_after_second, PriceTableVersion, ModelPrice) == count(
        seeded.counts_after_first, PriceTableVersion, ModelPrice
    )
    summary = pricing_selectors.calls_cost(
        workspace=demo, calls=Call.objects.filter(workspace=demo)
    )
    assert summary.calls > 0 and summary.priced_calls > 0 and summary.usd > 0
    assert summary.source == "price table v1"
    # The Codex fixtures use models newer than the list prices (gpt-5.2-codex …): they show
    # "no price", never $0, and nothing the list does price is left unpriced.
    table = pricing_selectors.current_table(workspace=demo)
    assert all(table.price_for(model) is None for model in summary.unpriced_models)
    assert not any(model.startswith("claude") for model in summary.unpriced_models)
