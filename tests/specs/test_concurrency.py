"""Two real PostgreSQL connections racing to approve: exactly one wins, the other gets 409."""

import threading
import time

import pytest
from django.db import connection, transaction

from specs import services
from specs.analysis.content import Item
from specs.models import Spec, SpecVersion, VersionStatus
from tests.specs.conftest import BASE_ITEMS

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def race(calls):
    """Run each call in its own thread (own connection), released together by a barrier."""
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_concurrent_approvals_through_the_api_one_wins_one_409(authoritative, members, api_for):
    spec, _v1 = authoritative()
    reviewer, admin = api_for("reviewer"), api_for("admin")
    for round_ in range(3):
        base = SpecVersion.objects.get(spec=spec, status=VersionStatus.AUTHORITATIVE)
        rivals = []
        for index in range(2):
            version = services.spec_version_create(
                spec=spec,
                author=members["editor"],
                supersedes=base,
                # Each rival keeps every settled item of the base: dropping one would need
                # acknowledging, which is not what this test races.
                items=[*base.as_items(), Item(f"r{round_}-{index}", "requirement", "x")],
            )
            services.spec_version_submit(version=version, actor=members["editor"])
            rivals.append(version)
        responses = race(
            [
                lambda c=reviewer, v=rivals[0]: c.post(
                    f"/api/v1/spec-versions/{v.pk}/approve/", {}, format="json"
                ),
                lambda c=admin, v=rivals[1]: c.post(
                    f"/api/v1/spec-versions/{v.pk}/approve/", {}, format="json"
                ),
            ]
        )
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 409], [r.content for r in responses]
        winner = next(r for r in responses if r.status_code == 200).json()
        loser = next(r for r in responses if r.status_code == 409).json()
        assert loser["code"] == "stale_base"
        assert loser["current_version"]["id"] == winner["id"]
        authoritative_now = SpecVersion.objects.filter(
            spec=spec, status=VersionStatus.AUTHORITATIVE
        )
        assert list(authoritative_now.values_list("pk", flat=True)) == [winner["id"]]
        assert SpecVersion.objects.get(pk=base.pk).status == VersionStatus.SUPERSEDED


def test_the_same_version_approved_twice_at_once(authoritative, members, api_for):
    spec, v1 = authoritative()
    version = services.spec_version_create(
        spec=spec,
        author=members["editor"],
        supersedes=v1,
        items=[*BASE_ITEMS, Item("extra", "requirement", "x")],
    )
    services.spec_version_submit(version=version, actor=members["editor"])
    reviewer, admin = api_for("reviewer"), api_for("admin")
    url = f"/api/v1/spec-versions/{version.pk}/approve/"
    responses = race(
        [lambda: reviewer.post(url, {}, format="json"), lambda: admin.post(url, {}, format="json")]
    )
    assert sorted(r.status_code for r in responses) == [200, 409]
    loser = next(r for r in responses if r.status_code == 409).json()
    assert "was already approved by" in loser["detail"]
    assert SpecVersion.objects.filter(spec=spec, status=VersionStatus.AUTHORITATIVE).count() == 1


def test_approval_waits_for_the_spec_row_lock(authoritative, members):
    """While another transaction holds the spec row, an approval blocks, then sees its result."""
    spec, v1 = authoritative()
    rivals = []
    for key in ("a", "b"):
        version = services.spec_version_create(
            spec=spec,
            author=members["editor"],
            supersedes=v1,
            items=[*BASE_ITEMS, Item(key, "requirement", key)],
        )
        services.spec_version_submit(version=version, actor=members["editor"])
        rivals.append(version)
    holding = threading.Event()
    release = threading.Event()
    outcome = {}

    def first():
        try:
            with transaction.atomic():
                Spec.objects.select_for_update().get(pk=spec.pk)
                holding.set()
                release.wait(10)
                services.spec_version_approve(
                    version=rivals[0], reviewer=members["reviewer"], acknowledged_resolutions=[]
                )
        finally:
            connection.close()

    def second():
        holding.wait(10)
        try:
            services.spec_version_approve(
                version=rivals[1], reviewer=members["admin"], acknowledged_resolutions=[]
            )
            outcome["second"] = "won"
        except services.StaleBase as exc:
            outcome["second"] = exc
        finally:
            outcome["finished_at"] = time.monotonic()
            connection.close()

    a, b = threading.Thread(target=first), threading.Thread(target=second)
    a.start()
    b.start()
    holding.wait(10)
    time.sleep(0.5)
    assert "finished_at" not in outcome, "the second approval did not wait for the lock"
    released_at = time.monotonic()
    release.set()
    a.join(15)
    b.join(15)
    assert outcome["finished_at"] >= released_at
    assert isinstance(outcome["second"], services.StaleBase)
    assert outcome["second"].current.pk == rivals[0].pk
    assert SpecVersion.objects.get(pk=rivals[1].pk).status == VersionStatus.IN_REVIEW
