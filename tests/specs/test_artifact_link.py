"""Restart-package verification output lives in the artifact store, redacted, behind a pointer."""

import hashlib

import pytest

from artifacts.models import Artifact
from specs.models import Verification
from tests.specs.test_api import approved, package_body  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_verification_output_is_an_artifact_and_secrets_are_redacted(api_for, approved):  # noqa: F811
    _spec, v1 = approved
    api = api_for("editor")
    body = package_body(v1["id"])
    output = f"FAILED test_refund\nusing token {SECRET}\n1 failed\n"
    body["handoff"]["verifications"][0]["output"] = output
    response = api.post("/api/v1/restart-packages/", body, format="json")
    assert response.status_code == 201, response.json()
    package_id = response.json()["id"]
    verification = Verification.objects.get(package_id=package_id, position=0)
    artifact = verification.artifact
    assert isinstance(artifact, Artifact)
    assert (artifact.run_id, artifact.tool_call_id, artifact.command, artifact.exit_status) == (
        f"restart-package-{package_id}", "verification-1", "pytest -q", 1,
    )  # fmt: skip
    assert artifact.redaction_count >= 1
    assert SECRET not in verification.output.content
    # The package's copy and the artifact hold the same bytes: one fingerprint resolves both.
    assert (
        verification.output.sha256
        == artifact.sha256
        == hashlib.sha256(verification.output.content.encode()).hexdigest()
    )
    exported = api.get(f"/api/v1/restart-packages/{package_id}/export/?format=json").json()
    pointer = exported["handoff"]["verifications"][0]["output"]
    assert pointer["artifact"]["id"] == str(artifact.pk)
    assert pointer["artifact"]["url"].endswith(f"/artifacts/{artifact.pk}/")
    assert pointer["artifact"]["redactions"] == artifact.redaction_count
    assert SECRET not in str(exported)
    markdown = api.get(f"/api/v1/restart-packages/{package_id}/export/?format=md").content.decode()
    assert f"artifact {artifact.pk}" in markdown
    tail = api.get(f"/api/v1/artifacts/{artifact.pk}/tail/?lines=2").json()
    assert "1 failed" in str(tail)
