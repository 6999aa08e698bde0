"""Retention: expiry dates from the policy, the scheduled purge, policy changes, the audit."""

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from artifacts import selectors, services, tasks
from artifacts.models import Artifact, ArtifactPolicy
from artifacts.storage import INCOMING
from governance.celery import app as celery_app
from governance.errors import InputError
from governance.models import AuditEvent
from tests.artifacts.conftest import artifact_files

pytestmark = pytest.mark.django_db


def content_path(artifact) -> Path:
    return Path(default_storage.path(artifact.storage_name))


def test_expiry_comes_from_the_workspace_policy(store, workspace):
    services.artifact_policy_update(workspace=workspace, actor=None, retention_days=3)
    before = timezone.now()
    artifact = store(b"x\n")
    assert before + timedelta(days=3) <= artifact.expires_at <= timezone.now() + timedelta(days=3)


def test_purge_expires_due_artifacts_and_removes_their_content(store, run_on_commit):
    due, kept, deleted = (
        store(b"due\n", tool_call_id="1"),
        store(b"kept\n", tool_call_id="2"),
        store(b"deleted\n", tool_call_id="3"),
    )
    Artifact.objects.filter(pk=due.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    services.artifact_delete(artifact=deleted, actor=None)  # content purge deferred to commit
    report = services.artifacts_purge()
    assert (report.expired, report.purged) == (1, 2)
    due.refresh_from_db()
    assert (due.state, due.gone_at, due.line_index) == ("expired", due.expires_at, b"")
    assert due.purged_at is not None
    assert not content_path(due).exists() and not content_path(deleted).exists()
    assert content_path(kept).exists()
    assert AuditEvent.objects.filter(action="artifact.expire", object_id=str(due.pk)).exists()
    again = services.artifacts_purge()
    assert (again.expired, again.purged) == (0, 0)


def test_purge_removes_only_stale_staged_writes(workspace, store):
    store(b"x\n")
    incoming = Path(default_storage.path(INCOMING))
    stale, fresh = incoming / "old.part", incoming / "new.part"
    stale.write_bytes(b"half a write")
    fresh.write_bytes(b"in progress")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(stale, (day_ago, day_ago))
    assert services.artifacts_purge().stale_staging == 1
    assert not stale.exists() and fresh.exists()


def test_the_purge_is_in_celery_beats_schedule():
    entry = celery_app.conf.beat_schedule[tasks.PURGE_TASK]
    assert entry["task"] == "artifacts.purge"
    assert entry["schedule"] == tasks.PURGE_EVERY_SECONDS
    assert entry["options"]["queue"] == "maintenance"
    assert tasks.purge_artifacts.name in celery_app.tasks
    assert json.loads(json.dumps(entry["args"])) == []


def test_purge_task_runs_the_service(store):
    artifact = store(b"x\n")
    Artifact.objects.filter(pk=artifact.pk).update(expires_at=timezone.now() - timedelta(hours=1))
    result = tasks.purge_artifacts.apply().get()
    assert result == {"expired": 1, "purged": 1, "stale_staging": 0, "failed": 0}
    assert not content_path(artifact).exists()


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_purges_on_the_maintenance_queue(celery_worker, workspace, members):
    artifact = services.artifact_write(
        workspace=workspace, source=b"old\n", run_id="r", command="c"
    )
    Artifact.objects.filter(pk=artifact.pk).update(expires_at=timezone.now() - timedelta(hours=1))
    replies = celery_app.control.add_consumer("maintenance", reply=True, timeout=5)
    assert replies, "the test worker did not answer the control message"
    tasks.purge_artifacts.delay()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        artifact.refresh_from_db()
        if artifact.purged_at:
            break
        time.sleep(0.2)
    assert artifact.state == "expired" and artifact.purged_at is not None
    assert not content_path(artifact).exists()


def test_expired_artifact_answers_410_before_the_purge_runs(api_for, store):
    artifact = store(b"x\n")
    Artifact.objects.filter(pk=artifact.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = api_for("viewer").get(f"/api/v1/artifacts/{artifact.pk}/tail/")
    assert response.status_code == 410
    artifact.refresh_from_db()
    assert artifact.state == "expired"


def test_the_list_shows_a_lapsed_artifact_as_expired_before_the_purge_runs(
    api_for, client_for, store, workspace
):
    lapsed, live = store(b"old\n", tool_call_id="old"), store(b"new\n", tool_call_id="new")
    expired_at = timezone.now() - timedelta(minutes=5)
    Artifact.objects.filter(pk=lapsed.pk).update(expires_at=expired_at)
    api = api_for("viewer")

    rows = {row["id"]: row for row in api.get("/api/v1/artifacts/").json()["results"]}
    old, new = rows[str(lapsed.pk)], rows[str(live.pk)]
    assert (old["state"], old["status"], old["links"]) == ("expired", "expired", {})
    assert old["gone_at"] == expired_at.isoformat().replace("+00:00", "Z")
    assert (new["state"], new["status"], new["gone_at"]) == ("available", "available", None)
    assert sorted(new["links"]) == ["content", "head", "range", "search", "tail"]

    def listed(status):
        return [
            row["id"] for row in api.get("/api/v1/artifacts/", {"status": status}).json()["results"]
        ]

    assert listed("expired") == [str(lapsed.pk)]
    assert listed("available") == [str(live.pk)]
    assert selectors.artifact_totals(workspace=workspace)["count"] == 1  # the dashboard's count

    html = client_for("viewer").get(f"/w/{workspace.slug}/artifacts/").content.decode()
    (old_row,) = [row for row in html.split("<tr") if f"/artifacts/{lapsed.pk}/" in row]
    assert 'class="art-gone"' in old_row and 'class="badge status-expired">expired<' in old_row
    assert f"expired {expired_at:%Y-%m-%d}" in old_row
    lapsed.refresh_from_db()
    assert lapsed.state == "available"  # computed when read; marking it is the purge's job


def test_a_retry_after_expiry_stores_afresh(store):
    first = store(b"same\n", tool_call_id="c")
    Artifact.objects.filter(pk=first.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    second = store(b"same\n", tool_call_id="c")
    assert second.pk != first.pk
    first.refresh_from_db()
    assert first.state == "expired"


def test_policy_is_created_with_defaults_and_changes_are_audited(workspace, members):
    policy = services.artifact_policy_for(workspace=workspace)
    assert (policy.retention_days, policy.max_read_lines) == (30, 2000)
    assert services.artifact_policy_for(workspace=workspace).pk == policy.pk
    services.artifact_policy_update(
        workspace=workspace,
        actor=members["admin"],
        retention_days=7,
        disabled_rules=["jwt"],
        custom_rules=[{"name": "ticket", "pattern": "TICKET-[0-9]{1,9}"}],
    )
    event = AuditEvent.objects.get(action="artifact_policy.update")
    assert event.actor == members["admin"]
    assert event.data["changed"]["retention_days"] == {"from": 30, "to": 7}
    assert "jwt" not in [rule.name for rule in ArtifactPolicy.objects.get().redaction_rules()]
    out, counts = (
        ArtifactPolicy.objects.get()
        .redactor()
        .redact(b"see TICKET-123 and eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijk")
    )
    assert out.startswith(b"see [REDACTED:ticket] and eyJ")
    assert counts == {"ticket": 1}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"retention_days": 0}, "retention_days"),
        ({"max_read_lines": 0}, "max_read_lines"),
        ({"disabled_rules": ["no_such_rule"]}, "disabled_rules"),
        ({"custom_rules": [{"name": "x", "pattern": ".+"}]}, "custom_rules"),
        ({"custom_rules": [{"pattern": "a{1,2}"}]}, "custom_rules"),
    ],
)
def test_bad_policy_changes_are_refused(workspace, changes, field):
    with pytest.raises(InputError) as exc:
        services.artifact_policy_update(workspace=workspace, actor=None, **changes)
    assert field in exc.value.field_errors
    assert not AuditEvent.objects.filter(action="artifact_policy.update").exists()


def test_settings_page_is_admin_only_for_changes(client_for, workspace):
    page = f"/w/{workspace.slug}/artifacts/settings/"
    assert client_for("viewer").get(page).status_code == 200
    assert client_for("editor").post(page, {"retention_days": 5}).status_code == 403
    response = client_for("admin").post(
        page,
        {
            "retention_days": 5, "max_artifact_bytes": 10**6, "max_read_lines": 100,
            "max_read_bytes": 4096, "max_search_matches": 10, "max_search_context": 3,
            "search_timeout_ms": 500, "max_content_bytes": 10**6,
            "enabled_rules": ["private_key", "github_token"],
            "custom_rules_text": "ticket: TICKET-[0-9]{1,9}\n",
        },
    )  # fmt: skip
    assert response.status_code == 302
    policy = ArtifactPolicy.objects.get(workspace=workspace)
    assert (policy.retention_days, policy.max_read_bytes) == (5, 4096)
    assert "jwt" in policy.disabled_rules and "github_token" not in policy.disabled_rules
    assert policy.custom_rules == [{"name": "ticket", "pattern": "TICKET-[0-9]{1,9}"}]


def test_no_files_are_left_behind_by_a_round_trip(store, run_on_commit):
    artifact = store(b"x\n")
    with run_on_commit():
        services.artifact_delete(artifact=artifact, actor=None)
    assert [p for p in artifact_files() if p.suffix != ".part"] == []
