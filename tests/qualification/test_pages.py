"""Pages: forms that validate inline, roles checked on the server, 404 across workspaces,
escaped user text, CSV downloads and the dashboard card."""

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from governance.models import Job
from governance.services import job_run
from qualification import services
from qualification.analysis.simulate import simulate_sweep
from qualification.models import AssemblyAudit, OperatingLimit, Qualification
from tests.qualification.conftest import STRATA, to_csv

pytestmark = pytest.mark.django_db

BASE = "/w/team-a/qualification"


def test_empty_list_says_what_to_do_next(client_for):
    page = client_for("editor").get(f"{BASE}/sweeps/").content.decode()
    assert "No qualifications yet" in page and f'href="{BASE}/sweeps/new/"' in page
    viewer_page = client_for("viewer").get(f"{BASE}/sweeps/").content.decode()
    assert "No qualifications yet" in viewer_page and "New qualification</a>" not in viewer_page
    assert client_for("viewer").get(f"{BASE}/").url == f"{BASE}/sweeps/"


def test_create_form_validates_inline_and_creates(client_for, workspace):
    client = client_for("editor")
    form = {
        "name": "Form sweep", "model_name": "m", "model_version": "1", "decoding": '{"temperature": 0}',
        "workload_name": "w", "workload_version": "1", "families": ["retrieval", "code_change"],
        "custom_families": "flaky_tests", "strata": "8k, 16k, 32k", "threshold": "1.5",
        "consequence": "medium", "analysis_params": "{}",
    }  # fmt: skip
    response = client.post(f"{BASE}/sweeps/new/", form)
    assert response.status_code == 400
    assert "Ensure this value is less than or equal to 0.99" in response.content.decode()
    response = client.post(
        f"{BASE}/sweeps/new/", {**form, "threshold": "0.85", "strata": "8k, big"}
    )
    assert (
        response.status_code == 400
        and "&#x27;big&#x27; is not a number of tokens" in response.content.decode()
    )
    response = client.post(
        f"{BASE}/sweeps/new/", {**form, "threshold": "0.85", "analysis_params": '{"knee": 1}'}
    )
    assert response.status_code == 400 and "unknown parameter" in response.content.decode()
    response = client.post(f"{BASE}/sweeps/new/", {**form, "threshold": "0.85"})
    qualification = Qualification.objects.get()
    assert response.status_code == 302 and response.url == f"{BASE}/sweeps/{qualification.pk}/"
    assert qualification.strata == [8000, 16000, 32000]
    assert sorted(qualification.workload.families.values_list("key", flat=True)) == [
        "code_change", "flaky_tests", "retrieval",
    ]  # fmt: skip
    prefilled = client.get(f"{BASE}/sweeps/new/?supersedes={qualification.pk}").content.decode()
    assert 'value="Form sweep (requalification)"' in prefilled


def test_min_repeats_below_three_is_an_inline_error_on_the_parameters(client_for):
    form = {
        "name": "Thin sweep", "model_name": "m", "model_version": "1", "decoding": "{}",
        "workload_name": "w", "workload_version": "1", "families": ["retrieval"],
        "strata": "8k, 16k", "threshold": "0.85", "consequence": "low",
        "analysis_params": '{"min_repeats": 1}',
    }  # fmt: skip
    response = client_for("editor").post(f"{BASE}/sweeps/new/", form)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == ["analysis_params"]
    assert errors["analysis_params"][0].startswith(
        "min_repeats: must be a whole number of at least 3"
    )
    assert '<p class="error" role="alert">min_repeats: must be a whole number of at least 3' in (
        response.content.decode()
    )
    assert not Qualification.objects.exists()


def test_viewers_cannot_create_or_upload(client_for, make_qualification):
    qualification = make_qualification()
    viewer = client_for("viewer")
    assert viewer.post(f"{BASE}/sweeps/new/", {}).status_code == 403
    upload = SimpleUploadedFile("t.csv", b"task_id\n")
    assert (
        viewer.post(f"{BASE}/sweeps/{qualification.pk}/upload/", {"file": upload}).status_code
        == 403
    )
    assert viewer.get(f"{BASE}/sweeps/{qualification.pk}/propose-limit/").status_code == 403
    assert viewer.get(f"{BASE}/sweeps/{qualification.pk}/analyse/").status_code == 405


def test_detail_shows_the_numbers_with_their_uncertainty(client_for, loaded_qualification):
    page = client_for("viewer").get(f"{BASE}/sweeps/{loaded_qualification.pk}/").content.decode()
    assert 'data-testid="proposed-limit">16k<' in page
    assert "code_change is the weakest family" in page
    assert 'data-testid="weakest-reason">code_change has the smallest basis (32k).<' in page
    assert 'ECL <span class="muted small">fixed-sequence</span>' in page
    assert 'id="decline-curves-data"' in page and 'id="four-outcomes-data"' in page
    assert "n tasks: code_change 40, retrieval 40" in page  # the caption carries n and method
    assert "two-sided 90% task-clustered interval" in page
    assert "bootstrap_replicates" in page  # parameters are shown
    assert "Propose operating limit" not in page  # viewers cannot propose


def test_bad_upload_through_the_page_reports_lines_on_its_job(
    client_for, make_qualification, planted_rows, run_on_commit
):
    qualification = make_qualification()
    rows = [dict(r) for r in planted_rows]
    rows[0]["family"] = "unknown_family"
    upload = SimpleUploadedFile("bad.csv", to_csv(rows), content_type="text/csv")
    with run_on_commit():
        response = client_for("editor").post(
            f"{BASE}/sweeps/{qualification.pk}/upload/", {"file": upload}
        )
    assert response.status_code == 302
    job = Job.objects.get(kind="trial_upload")
    assert job.status == "failed" and job.errors[0]["line"] == 2
    assert "unknown family 'unknown_family'" in job.errors[0]["error"]
    job_page = client_for("editor").get(f"/w/team-a/jobs/{job.pk}/").content.decode()
    assert "bad.csv" in job_page and "nothing was saved" in job_page


def test_empty_file_is_an_inline_error(client_for, make_qualification):
    qualification = make_qualification()
    upload = SimpleUploadedFile("empty.csv", b"", content_type="text/csv")
    response = client_for("editor").post(
        f"{BASE}/sweeps/{qualification.pk}/upload/", {"file": upload}
    )
    assert (
        response.status_code == 400 and "The submitted file is empty" in response.content.decode()
    )


def test_user_text_is_escaped(client_for, make_qualification):
    qualification = make_qualification(name="<script>alert(1)</script>", notes="<b>x</b>")
    for url in (f"{BASE}/sweeps/", f"{BASE}/sweeps/{qualification.pk}/"):
        page = client_for("viewer").get(url).content.decode()
        assert "<script>alert(1)</script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_other_workspaces_pages_are_404(loaded_qualification, members, outsider):
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["editor"]
    )
    stranger = Client()
    stranger.force_login(outsider)
    for url in (
        f"{BASE}/sweeps/",
        f"/w/team-b/qualification/sweeps/{loaded_qualification.pk}/",
        f"/w/team-b/qualification/sweeps/{loaded_qualification.pk}/trials.csv",
        f"/w/team-b/qualification/limits/{limit.pk}/",
        f"/w/team-b/qualification/sweeps/{loaded_qualification.pk}/propose-limit/",
    ):
        assert stranger.get(url).status_code == 404, url
    assert stranger.post(f"/w/team-b/qualification/limits/{limit.pk}/approve/").status_code == 404


def test_propose_edit_and_approve_through_the_pages(client_for, loaded_qualification, members):
    editor, reviewer = client_for("editor"), client_for("reviewer")
    form_page = editor.get(
        f"{BASE}/sweeps/{loaded_qualification.pk}/propose-limit/"
    ).content.decode()
    assert 'name="max_context_tokens" value="16000"' in form_page
    assert 'value="ticket_parsing"' in form_page  # seed 004's stages are offered
    form = {
        "name": "Agents", "max_context_tokens": "16000", "reserve_tokens": "4000",
        "max_initial_assembly_tokens": "14000", "reserve_action": "escalate", "rationale": "r",
        "sources-TOTAL_FORMS": "1", "sources-INITIAL_FORMS": "0", "sources-0-source": "system",
        "sources-0-tokens": "3000", "stages-TOTAL_FORMS": "1", "stages-INITIAL_FORMS": "0",
        "stages-0-key": "plan", "stages-0-max_tokens": "9000",
    }  # fmt: skip
    response = editor.post(f"{BASE}/sweeps/{loaded_qualification.pk}/propose-limit/", form)
    assert response.status_code == 400 and "At most 12,000" in response.content.decode()
    response = editor.post(
        f"{BASE}/sweeps/{loaded_qualification.pk}/propose-limit/",
        {**form, "max_initial_assembly_tokens": "12000"},
    )
    limit = OperatingLimit.objects.get()
    assert response.status_code == 302
    assert limit.source_limits == {"system": 3000} and limit.stage_budgets[0]["max_tokens"] == 9000
    # The proposer sees why they cannot approve; a forced POST is refused on the server.
    own = editor.get(f"{BASE}/limits/{limit.pk}/").content.decode()
    assert "Approve limit" not in own
    assert editor.post(f"{BASE}/limits/{limit.pk}/approve/").status_code == 403
    page = reviewer.get(f"{BASE}/limits/{limit.pk}/").content.decode()
    assert "Approve limit" in page
    assert reviewer.post(f"{BASE}/limits/{limit.pk}/approve/", {"confirm": "on"}).status_code == 302
    limit.refresh_from_db()
    assert limit.status == "approved" and limit.approved_by == members["reviewer"]
    edit = editor.get(f"{BASE}/limits/{limit.pk}/edit/")
    assert edit.status_code == 302  # approved limits are immutable


def test_self_approval_by_a_reviewer_shows_the_reason(client_for, loaded_qualification, members):
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["reviewer"]
    )
    response = client_for("reviewer").post(f"{BASE}/limits/{limit.pk}/approve/")
    assert response.status_code == 403
    assert "another reviewer must approve it" in response.content.decode()
    limit.refresh_from_db()
    assert limit.status == "proposed"


def test_budget_check_form_records_an_audit(client_for, loaded_qualification, members):
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["editor"]
    )
    services.operating_limit_approve(
        limit=limit,
        reviewer=members["reviewer"],
        membership=members["reviewer"].memberships.get(),
        confirmed=True,
    )
    form = {
        "allocation-TOTAL_FORMS": "2", "allocation-INITIAL_FORMS": "0",
        "allocation-0-source": "system", "allocation-0-tokens": "3000",
        "allocation-1-source": "retrieved_files", "allocation-1-tokens": "11000",
        "stage": "", "run_ref": "r-9", "assembled_prompt": "<prompt>", "omissions": "truncated: big.py\nlockfile",
    }  # fmt: skip
    response = client_for("editor").post(
        f"{BASE}/limits/{limit.pk}/check/", form, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="check-section"' in body and "<html" not in body  # just the region for htmx
    assert "14,000</strong> of 12,000" in body
    assert 'id="recent-checks" hx-swap-oob="true"' in body and "r-9" in body  # the list updates too
    audit = AssemblyAudit.objects.get()
    assert audit.verdict == "over" and audit.source == "web"
    assert audit.omissions == [
        {"decision": "truncated", "note": "big.py"},
        {"decision": "omitted", "note": "lockfile"},
    ]
    detail = client_for("viewer").get(f"{BASE}/audits/{audit.pk}/").content.decode()
    assert "&lt;prompt&gt;" in detail and 'id="allocation-data"' in detail
    listing = client_for("viewer").get(f"{BASE}/audits/?verdict=over").content.decode()
    assert f'href="{BASE}/audits/{audit.pk}/"' in listing


def test_csv_downloads(client_for, loaded_qualification):
    client = client_for("viewer")
    trials = b"".join(
        client.get(f"{BASE}/sweeps/{loaded_qualification.pk}/trials.csv").streaming_content
    )
    rows = list(csv.DictReader(io.StringIO(trials.decode())))
    assert len(rows) == 2000 and rows[0]["family"] == "code_change"
    results = client.get(f"{BASE}/sweeps/{loaded_qualification.pk}/results.csv").content.decode()
    lines = list(csv.DictReader(io.StringIO(results)))
    assert {r["family"] for r in lines} == {"code_change", "retrieval", "overall"}
    first = next(r for r in lines if r["family"] == "code_change")
    assert first["tokens"] == "8000" and float(first["ci_low"]) < float(first["accuracy"])


def test_dashboard_card(client_for, loaded_qualification):
    page = client_for("viewer").get("/w/team-a/").content.decode()
    assert "Requalification due" in page and "Qualifications" in page


def test_analysis_region_polls_until_the_job_finishes(client_for, loaded_qualification):
    Qualification.objects.filter(pk=loaded_qualification.pk).update(data_version=2)
    client = client_for("viewer")
    url = f"{BASE}/sweeps/{loaded_qualification.pk}/?region=analysis"
    # A GET only reads: the new version is shown as not analysed, with a button, and no job.
    jobs = Job.objects.filter(kind="qualification_analysis").count()
    missing = client.get(url, HTTP_HX_REQUEST="true")
    body = missing.content.decode()
    assert missing.status_code == 286 and "hx-trigger" not in body
    assert "Showing the analysis of trial version 1; version 2 is not analysed yet." in body
    assert "Analyse version 2" in body
    assert Job.objects.filter(kind="qualification_analysis").count() == jobs
    assert client.post(f"{BASE}/sweeps/{loaded_qualification.pk}/analyse/").status_code == 302
    # The new version's analysis is queued (not run yet): the region shows progress and polls,
    # and the previous version's results stay visible, marked as such.
    pending = client.get(url, HTTP_HX_REQUEST="true")
    body = pending.content.decode()
    assert pending.status_code == 200 and 'hx-trigger="every 1s"' in body
    assert "Analysing…" in body and "Showing the analysis of trial version 1" in body
    job = Job.objects.filter(kind="qualification_analysis").latest("pk")
    assert job.params == {"qualification_id": loaded_qualification.pk, "data_version": 2}
    job_run(job_id=job.pk, work=services.qualification_analysis_run)  # what the worker does
    done = client.get(url, HTTP_HX_REQUEST="true")
    assert done.status_code == 286  # htmx stops polling
    assert "hx-trigger" not in done.content.decode() and "Analysing…" not in done.content.decode()


def test_trial_list_filters_and_lock(client_for, loaded_qualification):
    viewer, editor = client_for("viewer"), client_for("editor")
    url = f"{BASE}/sweeps/{loaded_qualification.pk}/trials/"
    page = viewer.get(url + "?family=retrieval&stratum=8000&task_correct=false").content.decode()
    failing = loaded_qualification.trials.filter(
        task__family__key="retrieval", stratum_tokens=8000, task_correct=False
    ).count()
    assert f"{failing} in all" in page and "code_change" not in page.split("<tbody>")[1]
    assert viewer.post(f"{BASE}/sweeps/{loaded_qualification.pk}/lock/").status_code == 403
    assert editor.post(f"{BASE}/sweeps/{loaded_qualification.pk}/lock/").status_code == 302
    loaded_qualification.refresh_from_db()
    assert loaded_qualification.status == "locked" and loaded_qualification.locked_at
    detail = editor.get(f"{BASE}/sweeps/{loaded_qualification.pk}/").content.decode()
    assert "takes no more trials" in detail and "Upload trials</button>" not in detail


def test_requalification_page_states_the_shift_in_ecl_and_knee(
    client_for, loaded_qualification, make_qualification, members, run_on_commit
):
    newer = make_qualification(
        name="Sweep B", configuration={"decoding": {"temperature": 0}, "harness_version": "h2"},
        supersedes=loaded_qualification,
    )  # fmt: skip
    # code_change now declines one stratum earlier: ECL and knee move from 32k to 16K.
    rows = simulate_sweep(
        {"retrieval": [0.97, 0.97, 0.97, 0.96, 0.95], "code_change": [0.97, 0.97, 0.72, 0.5, 0.4]},
        STRATA, tasks=40, repeats=5, seed=3,
    )  # fmt: skip
    with run_on_commit():
        upload = services.trial_batch_submit(
            qualification=newer, content=to_csv(rows), filename="b.csv",
            actor=members["editor"], run_now=True,
        )  # fmt: skip
    assert upload.status == "loaded"
    page = client_for("viewer").get(f"{BASE}/sweeps/{newer.pk}/").content.decode()
    assert f"Requalification: what moved since #{loaded_qualification.pk}" in page
    assert (
        "<tr><td>code_change</td><td>32k → <strong>16k</strong></td><td>−1 doubling</td>"
        "<td>32k → 16k</td><td>32k → <strong>16k</strong></td><td>−1 doubling</td></tr>"
    ) in page
    assert (
        "<tr><td>retrieval</td><td>≥ 128k (largest tested) → <strong>≥ 128k (largest tested)"
        "</strong></td><td>no change</td><td>128k → 128k</td><td>– → <strong>–</strong></td>"
        "<td>–</td></tr>"
    ) in page
    assert "Grey dashed curves: superseded qualification" in page
    old_page = client_for("viewer").get(f"{BASE}/sweeps/{loaded_qualification.pk}/").content
    assert f'Superseded by <a href="{BASE}/sweeps/{newer.pk}/">#{newer.pk} Sweep B</a>' in (
        old_page.decode()
    )


def test_requalification_due_badge_on_the_limit_list_and_page(
    client_for, loaded_qualification, make_qualification, members
):
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["editor"]
    )
    services.operating_limit_approve(
        limit=limit,
        reviewer=members["reviewer"],
        membership=members["reviewer"].memberships.get(),
        confirmed=True,
    )
    viewer = client_for("viewer")
    before = viewer.get(f"{BASE}/limits/").content.decode()
    assert (
        "requalification due" not in before and '<span class="muted small">current</span>' in before
    )
    newer = make_qualification(
        name="Sweep B", configuration={"decoding": {"temperature": 0}, "harness_version": "h2"},
        supersedes=loaded_qualification,
    )  # fmt: skip
    listing = viewer.get(f"{BASE}/limits/").content.decode()
    assert (
        '<span class="badge status-over" title="The latest qualification (Sweep B) ran under a '
        'different configuration">requalification due</span>'
    ) in listing
    detail = viewer.get(f"{BASE}/limits/{limit.pk}/").content.decode()
    assert "<strong>Requalification due.</strong>" in detail
    assert f'href="{BASE}/sweeps/{newer.pk}/">#{newer.pk} Sweep B</a>' in detail
    assert "<li><code>harness_version</code>: h1 → h2</li>" in detail
    assert "Propose a new limit from the requalification once it is analysed." in detail


def test_proposing_on_a_cache_miss_queues_the_analysis_and_says_so(
    client_for, loaded_qualification
):
    Qualification.objects.filter(pk=loaded_qualification.pk).update(data_version=2)
    form = {
        "name": "Agents", "max_context_tokens": "16000", "reserve_tokens": "4000",
        "max_initial_assembly_tokens": "12000", "reserve_action": "escalate", "rationale": "r",
        "sources-TOTAL_FORMS": "0", "sources-INITIAL_FORMS": "0",
        "stages-TOTAL_FORMS": "0", "stages-INITIAL_FORMS": "0",
    }  # fmt: skip
    response = client_for("editor").post(
        f"{BASE}/sweeps/{loaded_qualification.pk}/propose-limit/", form
    )
    assert response.status_code == 400
    job = Job.objects.get(kind="qualification_analysis", params__data_version=2)
    assert job.status == "queued"
    assert (
        f"The analysis of Sweep A (trial version 2) is not ready: job #{job.pk} is computing it."
        in response.content.decode()
    )
    assert not OperatingLimit.objects.exists()


def test_sweeps_sort_by_the_same_names_on_the_page_and_the_api(
    make_qualification, client_for, api_for
):
    for name in ("Sweep B", "Sweep A", "Sweep C"):
        make_qualification(name=name)
    page = client_for("viewer").get(f"{BASE}/sweeps/?sort=-name").content.decode()
    assert page.index("Sweep C") < page.index("Sweep B") < page.index("Sweep A")
    api = api_for("viewer")
    names = [q["name"] for q in api.get("/api/v1/qualifications/?sort=-name").json()["results"]]
    assert names == ["Sweep C", "Sweep B", "Sweep A"]
    names = [q["name"] for q in api.get("/api/v1/qualifications/?sort=trials").json()["results"]]
    assert sorted(names) == ["Sweep A", "Sweep B", "Sweep C"]  # the annotation sorts too
