"""The qualification part of seed_demo adds a realistic sweep and a requalification, and
running it twice adds nothing. (It runs this app's `seed` the way seed_demo does, so another
app's demo cannot mask a failure here.)"""

import io

import pytest

from governance.management.commands.seed_demo import DEMO_USERS
from governance.services import membership_set, user_get_or_create, workspace_create
from qualification import demo, selectors
from qualification.models import (
    AssemblyAudit,
    OperatingLimit,
    Qualification,
    QualificationAnalysis,
    Trial,
)

pytestmark = pytest.mark.django_db(transaction=True)


def counts():
    return [
        model.objects.count()
        for model in (Qualification, Trial, QualificationAnalysis, OperatingLimit, AssemblyAudit)
    ]


def seed(workspace, users):
    demo.seed(workspace=workspace, users=users, stdout=io.StringIO())


def test_demo_seed_is_realistic_and_idempotent():
    workspace = workspace_create(slug="demo", name="Demo team")
    users = {}
    for username, (role, password) in DEMO_USERS.items():
        users[username] = user_get_or_create(username=username, password=password)
        membership_set(workspace=workspace, user=users[username], role=role)
    seed(workspace, users)
    first = counts()
    assert first == [2, 12000, 2, 2, 6]
    original, requalified = Qualification.objects.order_by("pk")
    assert requalified.supersedes == original and original.status == "superseded"
    assert original.configuration.fingerprint != requalified.configuration.fingerprint
    result = selectors.analysis_current(qualification=original).result
    assert result["status"] == "ok" and len(result["families"]) == 5
    assert {len(f["strata"]) for f in result["families"]} == {6}
    assert {f["tasks"] for f in result["families"]} == {40}
    assert result["proposed_limit_tokens"] == 32000
    later = selectors.analysis_current(qualification=requalified).result
    assert later["proposed_limit_tokens"] == 16000
    assert (
        Trial.objects.exclude(failure_class="").count()
        == Trial.objects.filter(task_correct=False).count()
    )
    active, successor = OperatingLimit.objects.order_by("pk")
    assert active.status == "approved" and successor.status == "proposed"
    assert successor.supersedes == active
    assert active.created_by.username == "editor" and active.approved_by.username == "reviewer"
    assert selectors.requalification_status(limit=active).due
    assert {a.verdict for a in AssemblyAudit.objects.all()} == {"within", "over"}

    seed(workspace, users)
    assert counts() == first
