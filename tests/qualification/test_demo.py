"""seed_demo adds a realistic sweep and a requalification, and running it twice adds nothing."""

import io

import pytest
from django.core.management import call_command

from qualification import selectors
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


def test_seed_demo_is_realistic_and_idempotent():
    call_command("seed_demo", stdout=io.StringIO())
    first = counts()
    assert first == [2, 12000, 2, 2, 6]
    original, requalified = Qualification.objects.order_by("pk")
    assert requalified.supersedes == original and original.status == "superseded"
    assert original.configuration.fingerprint != requalified.configuration.fingerprint
    result = selectors.analysis_current(qualification=original).result
    assert result["status"] == "ok" and len(result["families"]) == 5
    assert {len(f["strata"]) for f in result["families"]} == {6}
    assert result["proposed_limit_tokens"] == 32000
    assert (
        selectors.analysis_current(qualification=requalified).result["proposed_limit_tokens"]
        == 16000
    )
    active, successor = OperatingLimit.objects.order_by("pk")
    assert active.status == "approved" and successor.status == "proposed"
    assert successor.supersedes == active
    assert active.created_by.username == "editor" and active.approved_by.username == "reviewer"
    assert selectors.requalification_status(limit=active).due
    assert {a.verdict for a in AssemblyAudit.objects.all()} == {"within", "over"}

    call_command("seed_demo", stdout=io.StringIO())
    assert counts() == first
