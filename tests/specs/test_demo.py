"""seed_demo adds a spec with three versions and restart packages, and is safe to run twice."""

import io

import pytest
from django.core.management import call_command

from governance.models import Workspace
from specs import selectors
from specs.models import RestartPackage, Spec, SpecVersion, VersionStatus

pytestmark = pytest.mark.django_db


def test_seed_demo_is_idempotent_and_shows_a_living_product():
    call_command("seed_demo", stdout=io.StringIO())
    workspace = Workspace.objects.get(slug="demo")
    refunds = Spec.objects.get(workspace=workspace, slug="refund-api-migration")
    chain = list(
        refunds.versions.order_by("number").values_list("number", "status", "supersedes__number")
    )
    assert chain == [(1, "superseded", None), (2, "superseded", 1), (3, "authoritative", 2)]
    v2 = refunds.versions.get(number=2)
    assert v2.acknowledged_resolutions == ["key-scope"] and v2.reviewer.username == "reviewer"
    packages = RestartPackage.objects.filter(workspace=workspace).order_by("pk")
    assert [p.is_superseded for p in packages] == [True, False]
    assert all(p.verifications.count() == 2 for p in packages)
    pending = SpecVersion.objects.get(workspace=workspace, status=VersionStatus.IN_REVIEW)
    assert pending.spec.slug == "artifact-retention"
    assert [r["key"] for r in selectors.pending_resolutions(version=pending)] == [
        "retention-period"
    ]
    low = Spec.objects.get(workspace=workspace, slug="repository-conventions")
    assert low.versions.get().status == VersionStatus.AUTHORITATIVE
    for version in SpecVersion.objects.filter(workspace=workspace):
        assert selectors.fingerprint_verified(version=version)
    counts = (Spec.objects.count(), SpecVersion.objects.count(), RestartPackage.objects.count())
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert (
        Spec.objects.count(),
        SpecVersion.objects.count(),
        RestartPackage.objects.count(),
    ) == counts
    assert "specifications already present" in out.getvalue()
