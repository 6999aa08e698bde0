"""The survival audit end to end: the PostCompact hook stores a summary and audits it against
the governing spec; people correct verdicts and the corrections outlive re-runs; pages and the
API show it; another workspace's audit is a 404."""

from __future__ import annotations

import re
import time

import pytest
from django.test import TestCase
from statsmodels.stats.proportion import proportion_confint

from governance.models import AuditEvent, Job
from specs import services
from specs.models import SurvivalAudit, SurvivalVerdict
from specs.selectors.survival import spec_for_session, survival_by_trigger
from tests.specs.survival_planted import KEPT, LOST, PLANTED_ITEMS, PLANTED_SUMMARY, PROJECT
from tests.traces.factories import (
    claude_boundary,
    claude_session,
    claude_user,
    write_lines,
)
from traces.annotations.models import Divergence
from traces.models import Compaction, Session
from traces.services import ingest_paths

pytestmark = pytest.mark.django_db


def governing_spec(workspace, members, *, project=PROJECT, slug="ingest", items=PLANTED_ITEMS):
    spec = services.spec_create(
        workspace=workspace, title=f"Ingest {slug}", slug=slug, consequence="low",
        actor=members["editor"], project=project,
    )  # fmt: skip
    version = services.spec_version_create(
        spec=spec, author=members["editor"], supersedes=None, items=items, note="first"
    )
    services.spec_version_submit(version=version, actor=members["editor"])
    version.refresh_from_db()
    return spec, version


def ingested_session(workspace, tmp_path, *, session="sess-1", triggers=("auto",)) -> Session:
    """A Claude Code session in /work/project with one compaction per trigger, between calls."""
    lines = claude_session(3 + 3 * len(triggers), session=session)
    lines[0] = claude_user("Please fix the failing test", t=0, session=session, cwd=PROJECT)
    for n, trigger in enumerate(triggers):
        calls_before = 3 * (n + 1)
        position = 1 + 3 * calls_before + n
        lines.insert(
            position,
            claude_boundary(
                t=10 * (calls_before - 1) + 7, pre=40_000, trigger=trigger, session=session,
                uuid=f"cb-{session}-{n}",
            ),
        )  # fmt: skip
    path = tmp_path / f"{session}.jsonl"
    write_lines(path, lines)
    ingest_paths(workspace=workspace, paths=[str(path)])
    return Session.objects.get(workspace=workspace, external_id=session)


def post_compact(api, summary=PLANTED_SUMMARY, *, session="sess-1", trigger="auto", n=1):
    """Send a PostCompact through the API; its audit job runs once the request commits."""
    event = {
        "event_id": f"post-{session}-{n}",
        "event": "PostCompact",
        "occurred_at": "2026-03-01T09:10:00Z",
        "payload": {
            "session_id": session, "hook_event_name": "PostCompact", "trigger": trigger,
            "compact_summary": summary,
        },
    }  # fmt: skip
    with TestCase.captureOnCommitCallbacks(execute=True) as queued:
        answer = api.post("/api/v1/hooks/", {"events": [event]}, format="json")
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    # The audit left the request: a job, queued after the commit, one per stored summary of a
    # governed session.
    jobs = Job.objects.filter(kind="survival_audit").order_by("-pk")
    if body["summaries_stored"] and jobs.exists():
        if not queued:  # a transactional test: the commit queued it to the Celery worker
            _wait_until_finished(jobs[0])
        job = Job.objects.get(pk=jobs[0].pk)
        assert len(queued) <= 1 and job.status == "succeeded", job.error
    return body


def _wait_until_finished(job, seconds=30.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in ("succeeded", "failed"):
            return
        time.sleep(0.1)


@pytest.fixture
def planted(workspace, members, tmp_path, api_for):
    """The planted summary arrives through the PostCompact hook of a governed session."""
    spec, version = governing_spec(workspace, members)
    session = ingested_session(workspace, tmp_path)
    assert post_compact(api_for("editor"))["summaries_stored"] == 1
    compaction = session.compactions.get()
    return spec, version, session, compaction


def verdicts_of(compaction) -> dict[str, SurvivalVerdict]:
    audit = SurvivalAudit.objects.get(compaction=compaction)
    return {v.key: v for v in audit.verdicts.all()}


def test_the_hook_audits_the_planted_summary(planted, members):
    spec, version, session, compaction = planted
    assert session.project == PROJECT and spec_for_session(session=session) == spec
    verdicts = verdicts_of(compaction)
    assert set(verdicts) == KEPT | LOST  # the open question is not a settled item
    assert {k for k, v in verdicts.items() if v.kept} == KEPT
    assert verdicts["limit.operating"].reason == "number 115000 missing"
    assert verdicts["limit.operating"].missing == ["number 115000"]
    assert verdicts["ui.theme"].reason == "0 of 8 words found (0%), below 60%"
    assert [v.position for v in verdicts.values()] == list(range(5))
    job = Job.objects.get(kind="survival_audit")  # run after the hook's request committed
    assert (job.status, job.params, job.counts) == (
        "succeeded",
        {"compaction": compaction.pk},
        {"audited": 1, "kept": 3, "lost": 2},
    )
    assert job.created_by == members["editor"]
    audit = SurvivalAudit.objects.get(compaction=compaction)
    assert (audit.spec_version, audit.method, audit.threshold) == (version, "survival@1", 0.6)
    event = AuditEvent.objects.get(action="survival_audit.run")
    assert event.data["kept"] == 3 and event.data["lost"] == 2
    assert event.actor == members["editor"]


def test_a_correction_survives_re_runs_and_can_be_withdrawn(planted, client_for, api_for):
    _spec, _version, session, compaction = planted
    lost = verdicts_of(compaction)["limit.operating"]
    url = f"/w/team-a/specs/survival/verdicts/{lost.pk}/correct/"
    answer = client_for("editor").post(
        url, {"verdict": "kept", "note": "115k is the same limit"}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 200
    html = answer.content.decode()
    assert 'id="survival"' in html and "limit.operating: kept (your correction)." in html
    assert "<html" not in html  # the section alone, for htmx
    # Re-run from the API, and again through the hook with a new summary.
    run = api_for("editor").post(
        "/api/v1/survival-verdicts/run/", {"session": session.pk}, format="json"
    )
    assert run.status_code == 200 and run.json() == {"compactions": 1, "audited": 1, "skipped": 0}
    row = SurvivalVerdict.objects.get(pk=lost.pk)
    assert (row.kept, row.corrected_kept, row.final_kept) == (False, True, True)
    assert row.correction_note == "115k is the same limit"
    assert row.corrected_by.username == "editor-a" and row.corrected_at is not None
    compaction.compact_summary = ""
    compaction.save(update_fields=["compact_summary"])
    post_compact(api_for("editor"), PLANTED_SUMMARY.replace("about 115k", "115000"), n=2)
    row.refresh_from_db()
    assert (row.kept, row.corrected_kept, row.missing) == (True, True, [])
    assert SurvivalVerdict.objects.filter(audit__compaction=compaction).count() == 5
    # Withdrawn: the computed verdict stands again.
    api = api_for("editor")
    answer = api.post(f"/api/v1/survival-verdicts/{row.pk}/correct/", {"verdict": "computed"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["verdict"] == body["computed"] == "kept" and body["correction"] is None
    actions = list(
        AuditEvent.objects.filter(action="survival_verdict.correct")
        .order_by("id")
        .values_list("data", flat=True)
    )
    assert [(a["from"], a["to"]) for a in actions] == [(None, "kept"), ("kept", "computed")]


def test_corrections_need_an_editor_and_a_valid_verdict(planted, client_for, api_for):
    _spec, _version, _session, compaction = planted
    row = verdicts_of(compaction)["ui.theme"]
    url = f"/w/team-a/specs/survival/verdicts/{row.pk}/correct/"
    assert client_for("viewer").post(url, {"verdict": "kept"}).status_code == 403
    api_url = f"/api/v1/survival-verdicts/{row.pk}/correct/"
    assert api_for("viewer").post(api_url, {"verdict": "kept"}).status_code == 403
    assert api_for("viewer").get(api_url.replace("correct/", "")).status_code == 200
    bad = api_for("editor").post(api_url, {"verdict": "maybe"})
    assert bad.status_code == 400 and "verdict" in bad.json()
    page = client_for("editor").post(url, {"verdict": "maybe"}, HTTP_HX_REQUEST="true")
    assert page.status_code == 400 and "Choose kept, lost or computed." in page.content.decode()
    plain = client_for("editor").post(url, {"verdict": "lost"})
    assert plain.status_code == 302 and plain["Location"].endswith("#survival")
    row.refresh_from_db()
    assert row.corrected_kept is False and row.kept is False
    assert SurvivalVerdict.objects.filter(corrected_kept__isnull=False).count() == 1


def test_another_workspace_sees_a_404(planted, outsider, other_workspace):
    from django.test import Client
    from rest_framework.test import APIClient

    from governance.services import api_token_create

    _spec, _version, session, compaction = planted
    row = verdicts_of(compaction)["ui.theme"]
    client = Client()
    client.force_login(outsider)
    for url in (
        f"/w/team-b/specs/survival/verdicts/{row.pk}/correct/",
        f"/w/team-b/specs/survival/sessions/{session.pk}/run/",
    ):
        assert client.post(url, {"verdict": "kept"}).status_code == 404, url
    assert client.post(f"/w/team-a/specs/survival/verdicts/{row.pk}/correct/").status_code == 404
    api = APIClient()
    token = api_token_create(workspace=other_workspace, user=outsider, name="t").plaintext
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get(f"/api/v1/survival-verdicts/{row.pk}/").status_code == 404
    assert (
        api.post(f"/api/v1/survival-verdicts/{row.pk}/correct/", {"verdict": "kept"}).status_code
        == 404
    )
    assert api.get("/api/v1/survival-verdicts/").json()["count"] == 0
    run = api.post("/api/v1/survival-verdicts/run/", {"session": session.pk}, format="json")
    assert run.status_code == 404
    row.refresh_from_db()
    assert row.corrected_kept is None


def test_api_lists_verdicts_by_session_and_compaction(planted, api_for):
    _spec, _version, session, compaction = planted
    api = api_for("viewer")
    rows = api.get("/api/v1/survival-verdicts/", {"session": session.pk}).json()
    assert rows["count"] == 5
    assert [r["key"] for r in rows["results"]] == [
        "upload.retries", "auth.tokens", "limit.operating", "storage.raw", "ui.theme",
    ]  # the version's order: requirements, constraints, decisions  # fmt: skip
    first = rows["results"][2]
    assert first["verdict"] == first["computed"] == "lost" and first["correction"] is None
    assert first["reason"] == "number 115000 missing" and first["trigger"] == "auto"
    assert (first["spec"], first["spec_version"], first["compaction"]) == (
        "ingest",
        1,
        compaction.pk,
    )
    assert (
        api.get("/api/v1/survival-verdicts/", {"compaction": compaction.pk + 999}).json()["count"]
        == 0
    )
    assert api.get("/api/v1/survival-verdicts/", {"session": "x"}).status_code == 400


def test_session_page_lists_compactions_with_kept_and_lost(planted, client_for, members, workspace):
    _spec, _version, session, _compaction = planted
    html = client_for("viewer").get(f"/w/team-a/traces/sessions/{session.pk}/").content.decode()
    section = html[html.index('id="survival"') :]
    assert "What each compaction kept of the spec" in section
    assert re.search(r'data-testid="survival-kept">3 of 5<', section)
    assert re.search(r'data-testid="survival-lost">2<', section)
    assert "number 115000 missing" in section
    assert "Mark kept" not in section  # viewers do not correct
    assert (
        "Mark kept"
        in client_for("editor").get(f"/w/team-a/traces/sessions/{session.pk}/").content.decode()
    )
    assert 'data-testid="survival-divergence"' not in section


def test_a_lost_item_links_to_the_later_divergence_that_names_it(planted, client_for, members):
    _spec, _version, session, compaction = planted
    run = session.runs.filter(started_by=compaction).get()
    call = run.first_call_index + 1
    Divergence.objects.create(
        workspace=session.workspace, session=session, agent=run.agent, run=run,
        annotator=members["admin"], call_index=call, agent_index=call, failure_class="other",
        other_text="forgot UI.THEME", confidence="high", context_tokens=1000,
    )  # fmt: skip
    earlier = session.runs.exclude(pk=run.pk).filter(agent=run.agent).first()
    Divergence.objects.create(
        workspace=session.workspace, session=session, agent=earlier.agent, run=earlier,
        annotator=members["reviewer"], call_index=earlier.first_call_index, agent_index=0,
        failure_class="other", other_text="limit.operating", confidence="high",
        context_tokens=1000,
    )  # fmt: skip
    html = client_for("admin").get(f"/w/team-a/traces/sessions/{session.pk}/").content.decode()
    links = re.findall(r'data-testid="survival-divergence" href="([^"]+)">([^<]+)<', html)
    assert links == [
        (
            f"/w/team-a/annotations/sessions/{session.pk}/runs/{run.pk}/?at={call}#step-{call}",
            f"First divergence at call {call} names it (Other: forgot UI.THEME)",
        )
    ]  # the earlier mark names limit.operating, but comes before the compaction


def test_trace_viewer_shows_survival_at_the_compaction_marker(planted, client_for):
    _spec, _version, session, compaction = planted
    run = session.runs.filter(started_by=compaction).get()
    html = (
        client_for("viewer")
        .get(f"/w/team-a/annotations/sessions/{session.pk}/agents/{run.agent_id}/")
        .content.decode()
    )
    marker = html[html.index('class="compaction-sep"') :]
    marker = marker[: marker.index("</li>")]
    assert "Spec items kept: 3 of 5" in marker
    assert (
        'lost: <span class="mono">limit.operating</span>, <span class="mono">ui.theme</span>'
        in marker
    )
    assert f"#survival-detail-{compaction.pk}" in marker


def test_sessions_without_a_governing_spec_are_not_audited(
    workspace, members, tmp_path, api_for, client_for
):
    governing_spec(workspace, members, project="/work/project-b")
    session = ingested_session(workspace, tmp_path)
    post_compact(api_for("editor"))
    assert not SurvivalAudit.objects.exists()
    assert not Job.objects.filter(kind="survival_audit").exists()  # nothing to audit: no job
    html = client_for("editor").get(f"/w/team-a/traces/sessions/{session.pk}/").content.decode()
    assert "No specification governs this project" in html
    assert "/work/project" in html


def test_the_longest_project_path_governs(workspace, members, tmp_path):
    outer, _ = governing_spec(workspace, members, project="/work", slug="outer")
    inner, _ = governing_spec(workspace, members, project="/work/project/", slug="inner")
    session = ingested_session(workspace, tmp_path)
    assert spec_for_session(session=session) == inner
    session.project = "/work/projects"
    assert spec_for_session(session=session) == outer
    session.project = "/elsewhere"
    assert spec_for_session(session=session) is None


def test_existing_compactions_are_audited_on_request(workspace, members, tmp_path, client_for):
    session = ingested_session(workspace, tmp_path, triggers=("auto", "manual"))
    first, second = session.compactions.order_by("timestamp")
    Compaction.objects.filter(pk=first.pk).update(compact_summary=PLANTED_SUMMARY)
    Compaction.objects.filter(pk=second.pk).update(
        compact_summary="Only the theme: dark colour scheme chosen by each operator of the dashboard."
    )
    html = client_for("editor").get(f"/w/team-a/traces/sessions/{session.pk}/").content.decode()
    assert "No specification governs this project" in html
    governing_spec(workspace, members)
    html = client_for("editor").get(f"/w/team-a/traces/sessions/{session.pk}/").content.decode()
    assert (
        "No compaction summary audited yet" in html
        and "2 summaries of this session are waiting" in html
    )
    answer = client_for("editor").post(
        f"/w/team-a/specs/survival/sessions/{session.pk}/run/", HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 200
    assert "Audited 2 of 2 compaction summaries." in answer.content.decode()
    summary = survival_by_trigger(workspace=workspace)
    shares = {row.trigger: row for row in summary.by_trigger}
    assert (
        shares["auto"].compactions,
        shares["auto"].share["count"],
        shares["auto"].share["n"],
    ) == (1, 3, 5)
    assert (shares["manual"].share["count"], shares["manual"].share["n"]) == (1, 5)
    low, high = proportion_confint(4, 10, alpha=0.05, method="wilson")
    assert summary.overall.share["ci"] == pytest.approx([low, high])
    lost = {(item.key, item.lost, item.audited) for item in summary.lost_most}
    assert lost == {
        ("limit.operating", 2, 2),
        ("upload.retries", 1, 2),
        ("storage.raw", 1, 2),
        ("auth.tokens", 1, 2),
        ("ui.theme", 1, 2),
    }


def test_analytics_page_shows_shares_with_interval_and_method(
    workspace, members, tmp_path, api_for, client_for
):
    html = client_for("viewer").get("/w/team-a/analytics/compaction-survival/").content.decode()
    assert "No compaction has been audited yet" in html
    governing_spec(workspace, members)
    ingested_session(workspace, tmp_path)
    post_compact(api_for("editor"))
    html = client_for("viewer").get("/w/team-a/analytics/compaction-survival/").content.decode()
    low, high = proportion_confint(3, 5, alpha=0.05, method="wilson")
    row = re.search(r'data-trigger="auto">(.*?)</tr>', html, re.S).group(1)
    assert "60.0%" in row and f"[{100 * low:.1f}%, {100 * high:.1f}%]" in row
    assert "3 of n = 5 items" in row
    assert "Wilson score interval" in html and ">Survival</a>" in html
    lost = re.findall(r'data-testid="survival-lost-item" data-key="([^"]+)"', html)
    assert sorted(lost) == sorted(LOST)
    assert "number 115000 missing (1)" in html


def test_a_spec_project_is_set_through_the_api_and_the_settings_page(api_for, client_for):
    created = api_for("editor").post(
        "/api/v1/specs/",
        {"title": "Ingest", "consequence": "low", "project": " /work/project "},
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["project"] == "/work/project"
    patched = api_for("reviewer").patch(
        f"/api/v1/specs/{body['id']}/", {"project": "/work/other"}, format="json"
    )
    assert patched.status_code == 200 and patched.json()["project"] == "/work/other"
    event = AuditEvent.objects.get(action="spec.update")
    assert event.data == {"project": {"from": "/work/project", "to": "/work/other"}}
    reviewer = client_for("reviewer")
    form = reviewer.get("/w/team-a/specs/ingest/edit/").content.decode()
    assert 'name="project"' in form and 'value="/work/other"' in form
    saved = reviewer.post(
        "/w/team-a/specs/ingest/edit/",
        {"title": "Ingest", "consequence": "low", "summary": "", "owner": "", "project": "/srv/x"},
    )
    assert saved.status_code == 302
    page = reviewer.get("/w/team-a/specs/ingest/").content.decode()
    assert 'data-testid="spec-project">/srv/x<' in page
