"""The browsable API's filter forms list nothing from another workspace."""

import pytest

from qualification.contextfiles import services
from tests.contextfiles.conftest import AGENTS_MD

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("endpoint", ["command-verifications", "context-file-evaluations"])
def test_filter_form_lists_no_other_workspaces_files(
    endpoint, api_for, outsider, other_workspace, run_on_commit
):
    with run_on_commit():
        services.context_file_import(
            workspace=other_workspace,
            repository="rival/secret-repo",
            path="CLAUDE.md",
            revision="c0ffee1",
            text=AGENTS_MD,
            actor=outsider,
        )
    response = api_for("viewer").get(f"/api/v1/{endpoint}/", {"format": "api"})
    assert response.status_code == 200
    assert "rival/secret-repo" not in response.content.decode()
