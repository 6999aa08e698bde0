"""The context-file pages through Django's test client: rendering, forms, roles, scoping."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from qualification.contextfiles import services
from qualification.contextfiles.models import ContextFile, Evaluation, Instruction, Trial
from tests.contextfiles.conftest import AGENTS_MD, table_tasks, trials_csv

pytestmark = pytest.mark.django_db


def url(workspace, tail=""):
    return f"/w/{workspace.slug}/context-files/{tail}"


def test_empty_list_says_what_to_do(client_for, workspace):
    response = client_for("editor").get(url(workspace))
    assert response.status_code == 200
    assert (
        b"No context files yet" in response.content and b"Import a context file" in response.content
    )


def test_import_form_inline_errors_and_success(client_for, workspace, run_on_commit):
    client = client_for("editor")
    response = client.post(
        url(workspace, "import/"), {"repository": "acme/shop", "path": "AGENTS.md"}
    )
    assert response.status_code == 400 and b"Upload the file or paste its text." in response.content
    upload = SimpleUploadedFile("AGENTS.md", AGENTS_MD.encode())
    with run_on_commit():
        response = client.post(
            url(workspace, "import/"),
            {
                "repository": "acme/shop",
                "path": "AGENTS.md",
                "revision": "c0ffee1",
                "upload": upload,
            },
        )
    file = ContextFile.objects.get()
    assert response.status_code == 302 and response["Location"] == url(
        workspace, f"{file.pk}/?revision=1"
    )
    clash = client.post(
        url(workspace, "import/"),
        {
            "repository": "acme/shop",
            "path": "AGENTS.md",
            "revision": "c0ffee1",
            "text": "- other\n",
        },
    )
    assert clash.status_code == 400 and b"already imported with different text" in clash.content


def test_file_page_shows_highlights_ledger_findings_and_escapes_file_text(
    client_for, workspace, members, run_on_commit
):
    hostile = AGENTS_MD + "\n- Never paste <script>alert('x')</script> into `docs/x.md`.\n"
    with run_on_commit():
        result = services.context_file_import(
            workspace=workspace,
            repository="acme/shop",
            path="AGENTS.md",
            text=hostile,
            actor=members["editor"],
        )
    response = client_for("viewer").get(url(workspace, f"{result.context_file.pk}/"))
    body = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert" not in body and "&lt;script&gt;alert" in body
    assert (
        'class="cf-block cat-build_test"' in body
        and 'class="cf-block cat-failure_prevention"' in body
    )
    assert "Claims “6 rules” but the section “Rules” has 6." not in body  # the added rule makes 6
    assert "Drift checks" in body and "never" in body
    assert (
        "hx-get" not in body.split('id="ledger-h"')[1].split("</table>")[0]
    )  # viewers get no Edit


def test_revision_pages_and_diff(client_for, workspace, members, run_on_commit):
    with run_on_commit():
        services.context_file_import(
            workspace=workspace,
            repository="r",
            path="AGENTS.md",
            revision="a",
            text="- Run `make test`.\n- Old rule.\n",
            actor=members["editor"],
        )
        second = services.context_file_import(
            workspace=workspace,
            repository="r",
            path="AGENTS.md",
            revision="b",
            text="- Run `make test` twice.\n- New rule here.\n",
            actor=members["editor"],
        )
    body = client_for("viewer").get(url(workspace, f"{second.context_file.pk}/")).content.decode()
    assert "<ins>" in body and "twice" in body and "1 removed" in body and "1 added" in body
    old = (
        client_for("viewer")
        .get(url(workspace, f"{second.context_file.pk}/?revision=1"))
        .content.decode()
    )
    assert "not the latest" in old and "first imported revision" in old
    assert (
        client_for("viewer")
        .get(url(workspace, f"{second.context_file.pk}/?revision=7"))
        .status_code
        == 404
    )


def test_ledger_edit_without_javascript(client_for, imported, workspace):
    client = client_for("editor")
    instruction = imported.revision.instructions.get(position=2)
    edit_url = url(workspace, f"{imported.context_file.pk}/instructions/{instruction.pk}/")
    page = client.get(edit_url + "?edit=1")
    assert page.status_code == 200 and b"Save the ledger entry" in page.content
    bad = client.post(
        edit_url,
        {"category": "build_test", "last_reviewed_on": "2026-05-01", "review_due_on": "2026-01-01"},
    )
    assert (
        bad.status_code == 400 and b"The next review cannot be before the last one." in bad.content
    )
    good = client.post(
        edit_url, {"category": "build_test", "owner": "platform", "reason": "CI parity"}
    )
    assert good.status_code == 302 and good["Location"].endswith(f"#ledger-{instruction.pk}")
    instruction.refresh_from_db()
    assert instruction.owner == "platform"


def test_ledger_edit_with_htmx_returns_the_row(client_for, imported, workspace):
    client = client_for("editor")
    instruction = imported.revision.instructions.get(position=2)
    edit_url = url(workspace, f"{imported.context_file.pk}/instructions/{instruction.pk}/")
    form = client.get(edit_url + "?edit=1", HTTP_HX_REQUEST="true")
    assert form.status_code == 200 and form.content.decode().lstrip().startswith(
        f'<tr id="ledger-{instruction.pk}"'
    )
    error = client.post(edit_url, {"category": "nonsense"}, HTTP_HX_REQUEST="true")
    assert (
        error.status_code == 200
        and b"cf-editing" in error.content
        and b"Select a valid choice" in error.content
    )
    saved = client.post(
        edit_url,
        {"category": "failure_prevention", "owner": "qa", "reason": "r"},
        HTTP_HX_REQUEST="true",
    )
    assert saved["HX-Trigger"] == "ledgerChanged"
    assert b"cf-editing" not in saved.content and b"qa" in saved.content
    summary = client.get(
        url(workspace, f"{imported.context_file.pk}/?region=flag_summary"), HTTP_HX_REQUEST="true"
    )
    assert summary.content.decode().lstrip().startswith('<div id="flag-summary"')


def test_viewers_cannot_edit_and_other_workspaces_get_404(
    client_for, imported, workspace, outsider
):
    from django.test import Client

    instruction = imported.revision.instructions.get(position=2)
    edit_url = url(workspace, f"{imported.context_file.pk}/instructions/{instruction.pk}/")
    viewer = client_for("viewer")
    assert viewer.get(edit_url + "?edit=1").status_code == 403
    assert viewer.post(edit_url, {"category": "build_test", "owner": "x"}).status_code == 403
    stranger = Client()
    stranger.force_login(outsider)
    assert stranger.get(url(workspace, f"{imported.context_file.pk}/")).status_code == 404
    outsider_ws = "team-b"
    assert (
        stranger.get(f"/w/{outsider_ws}/context-files/{imported.context_file.pk}/").status_code
        == 404
    )
    assert (
        stranger.get(
            f"/w/{outsider_ws}/context-files/{imported.context_file.pk}/instructions/{instruction.pk}/"
        ).status_code
        == 404
    )


def test_evaluation_pages_register_upload_lock_supersede_and_decide(
    client_for, imported, workspace
):
    editor = client_for("editor")
    form = editor.get(url(workspace, f"evaluations/new/?file={imported.context_file.pk}"))
    assert form.status_code == 200 and b"Pre-register" in form.content
    data = {
        "file": imported.context_file.pk,
        "name": "vs no file",
        "revision": imported.revision.pk,
        "primary_metric": "task success",
        "cost_measures": ["input_tokens"],
        "model_name": "m",
        "model_version": "1",
        "harness_version": "h",
        "decoding": "{not json",
        "task_set_version": "t",
        "delta_pp": "5",
        "target_power": "0.8",
        "ablations": ["failure_prevention"],
    }
    bad = editor.post(url(workspace, "evaluations/new/"), data)
    assert bad.status_code == 400 and b"Not JSON" in bad.content
    created = editor.post(
        url(workspace, "evaluations/new/"), data | {"decoding": '{"temperature": 0}'}
    )
    evaluation = Evaluation.objects.get()
    assert created.status_code == 302 and evaluation.margin == 0.10
    detail = url(workspace, f"evaluations/{evaluation.pk}/")
    empty = editor.get(detail)
    assert b"No results yet" in empty.content and b"open until the first trial" in empty.content

    broken = editor.post(detail + "trials/", {"text": "task_id,arm,success\nt1,full,true\n"})
    assert (
        broken.status_code == 400
        and b"Nothing was saved." in broken.content
        and b"baseline" in broken.content
    )
    csv = trials_csv(table_tasks(30, 12, 3, 5), arms=("full", "only-failure-prevention"))
    uploaded = editor.post(
        detail + "trials/", {"file": SimpleUploadedFile("t.csv", csv.encode(), "text/csv")}
    )
    assert uploaded.status_code == 302 and Trial.objects.count() == 150
    page = editor.get(detail).content.decode()
    assert "Registration locked" in page and 'data-figure="forest-data"' in page
    assert "What this evaluation could resolve" in page and "power to detect" in page
    assert "CSV" in page
    csv_download = editor.get(url(workspace, f"evaluations/{evaluation.pk}/trials.csv"))
    assert csv_download.status_code == 200 and csv_download.content.decode().count("\n") == 151

    change = editor.get(url(workspace, f"evaluations/{evaluation.pk}/change/"))
    assert b"This registration is locked" in change.content
    superseding = editor.post(
        url(workspace, f"evaluations/{evaluation.pk}/change/"),
        data | {"decoding": '{"temperature": 0}', "delta_pp": "0", "reason": "rule fixed"},
    )
    successor = Evaluation.objects.exclude(pk=evaluation.pk).get()
    assert superseding.status_code == 302 and successor.supersedes_id == evaluation.pk
    old_page = editor.get(detail).content.decode()
    assert "superseded" in old_page and f"evaluation #{successor.pk}" in old_page
    new_page = editor.get(url(workspace, f"evaluations/{successor.pk}/")).content.decode()
    assert "superseded registration #" in new_page and "rule fixed" in new_page
    assert editor.get(url(workspace, f"evaluations/{evaluation.pk}/change/")).status_code == 403

    decision = {"action": "keep", "rationale": "helps"}
    assert editor.post(detail + "decisions/", decision).status_code == 403
    reviewer = client_for("reviewer")
    missing = reviewer.post(detail + "decisions/", {"action": "keep"})
    assert missing.status_code == 400 and b"This field is required" in missing.content
    assert reviewer.post(detail + "decisions/", decision).status_code == 302
    assert b"verdict then:" in reviewer.get(detail).content


def test_calculator_page(client_for, workspace):
    client = client_for("viewer")
    page = client.get(
        url(
            workspace,
            "calculator/?both=59&with_only=6&without_only=16&neither=80&delta_pp=5&margin_pp=10",
        )
    )
    body = page.content.decode()
    assert "−6.2 pp" in body and "−11.9 to −0.5 pp" in body and ">hurts<" in body
    assert "within margin</span>" not in body
    small = client.get(
        url(
            workspace,
            "calculator/?both=700&with_only=20&without_only=70&neither=210&delta_pp=5&margin_pp=10",
        )
    ).content.decode()
    assert ">hurts<" in small and ">within margin</span>" in small and ">equivalent<" not in small
    empty = client.get(
        url(
            workspace,
            "calculator/?both=0&with_only=0&without_only=0&neither=0&delta_pp=5&margin_pp=10",
        )
    )
    assert b"The table is empty" in empty.content


def test_listing_upload_page(client_for, workspace):
    client = client_for("editor")
    bad = client.post(
        url(workspace, "listings/"),
        {"repository": "r", "file": SimpleUploadedFile("l.bin", b"\xff\xfe")},
    )
    assert bad.status_code == 400 and b"not UTF-8" in bad.content
    ok = client.post(
        url(workspace, "listings/"),
        {"repository": "r", "file": SimpleUploadedFile("l.txt", b"a/b.py\n")},
    )
    assert ok.status_code == 302
    assert b"file list" in client.get(url(workspace, "listings/")).content


def test_dashboard_card_and_navigation(client_for, imported, workspace):
    body = client_for("viewer").get(f"/w/{workspace.slug}/").content.decode()
    assert "Context files" in body and "Flagged instructions" in body and "Latest verdict" in body
    assert f'href="/w/{workspace.slug}/context-files/"' in body
    assert Instruction.objects.count() == 15


def test_write_forms_are_not_offered_to_viewers(client_for, imported, workspace):
    viewer = client_for("viewer")
    assert viewer.get(url(workspace, "import/")).status_code == 403
    assert (
        viewer.get(url(workspace, f"evaluations/new/?file={imported.context_file.pk}")).status_code
        == 403
    )
    assert viewer.post(url(workspace, "listings/"), {"repository": "r"}).status_code == 403
    assert (
        viewer.post(url(workspace, f"{imported.context_file.pk}/drift-checks/")).status_code == 403
    )
    assert (
        viewer.post(
            url(workspace, f"{imported.context_file.pk}/verifications/"),
            {"command": "make test", "passed": "1"},
        ).status_code
        == 403
    )


def test_file_page_query_count_does_not_grow_with_instructions(
    client_for, workspace, members, django_assert_max_num_queries
):
    text = "## Rules\n" + "".join(
        f"- Never do thing number {i} in `src/{i}.py`.\n" for i in range(120)
    )
    result = services.context_file_import(
        workspace=workspace, repository="r", path="AGENTS.md", text=text, actor=members["editor"]
    )
    client = client_for("viewer")
    with django_assert_max_num_queries(40):
        response = client.get(url(workspace, f"{result.context_file.pk}/"))
    assert response.status_code == 200 and response.content.count(b'class="cf-row"') == 120


def test_drift_section_polls_while_running_and_stops_when_the_job_ends(
    client_for, imported, workspace
):
    from governance.models import Job, JobStatus
    from qualification.contextfiles import selectors

    check = selectors.latest_drift_check(revision=imported.revision)
    page_url = url(workspace, f"{imported.context_file.pk}/?region=drift")
    client = client_for("viewer")
    done = client.get(page_url, HTTP_HX_REQUEST="true").content.decode()
    assert done.lstrip().startswith('<section id="drift"') and "every 1s" not in done
    type(check).objects.filter(pk=check.pk).update(finished_at=None)
    Job.objects.filter(pk=check.job_id).update(status=JobStatus.RUNNING, progress_done=2)
    running = client.get(page_url, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 1s"' in running and "2 / 6 checks" in running
    Job.objects.filter(pk=check.job_id).update(status=JobStatus.FAILED, error="InputError: boom")
    failed = client.get(page_url, HTTP_HX_REQUEST="true").content.decode()
    assert "every 1s" not in failed and "The check failed: InputError: boom" in failed


def test_review_interval_is_set_audited_and_validated(client_for, imported, workspace):
    from governance.models import AuditEvent

    client = client_for("editor")
    settings_url = url(workspace, f"{imported.context_file.pk}/settings/")
    assert client.post(settings_url, {"review_interval_days": "90"}).status_code == 302
    imported.context_file.refresh_from_db()
    assert imported.context_file.review_interval_days == 90
    assert AuditEvent.objects.get(action="context_file.update").data == {
        "review_interval_days": [180, 90]
    }
    client.post(settings_url, {"review_interval_days": "0"})
    imported.context_file.refresh_from_db()
    assert imported.context_file.review_interval_days == 90
    assert (
        client_for("viewer").post(settings_url, {"review_interval_days": "30"}).status_code == 403
    )
