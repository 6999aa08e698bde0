"""Real PostgreSQL connections: two trial batches racing for the same cells, and upload
progress that other connections see while the all-or-nothing insert is still open."""

import threading

import pytest
from django.db import connection

from governance.models import AuditEvent, Job, JobStatus
from qualification import services
from qualification.models import Trial, TrialUpload
from tests.qualification.conftest import to_csv

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def in_own_connection(call):
    """Run `call` in a thread, so on a connection of its own, and return what it returned."""
    out = {}

    def run():
        try:
            out["value"] = call()
        except BaseException as exc:  # re-raised in the test's thread
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the thread is stuck"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_two_batches_racing_for_the_same_trials_one_loads_the_other_saves_nothing(
    make_qualification, planted_rows, members, monkeypatch
):
    qualification = make_qualification()
    # Both batches finish their checks (no stored duplicates yet) before either inserts; the
    # qualification row lock then orders the inserts and the unique cell constraint stops the
    # second. Different bytes (one reversed), the same 2,000 trials.
    checked = threading.Barrier(2, timeout=30)
    check = services._check_against_database

    def check_then_wait(qualification, parsed, *, partial):
        result = check(qualification, parsed, partial=partial)
        checked.wait()
        return result

    monkeypatch.setattr(services.trials, "_check_against_database", check_then_wait)
    batches = {"a.csv": to_csv(planted_rows), "b.csv": to_csv(list(reversed(planted_rows)))}
    uploads = {}

    def submit(name):
        try:
            uploads[name] = services.trial_batch_submit(
                qualification=qualification,
                content=batches[name],
                filename=name,
                actor=members["editor"],
                partial=True,  # no analysis job: the race is about the insert
                run_now=True,
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(name,)) for name in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert set(uploads) == {"a.csv", "b.csv"}

    by_status = {}
    for name, upload in uploads.items():
        upload.refresh_from_db()
        by_status.setdefault(upload.status, []).append((name, upload))
    assert sorted(by_status) == [TrialUpload.Status.LOADED, TrialUpload.Status.REJECTED]
    (_, winner), (loser_name, loser) = by_status["loaded"][0], by_status["rejected"][0]
    assert winner.rows_loaded == 2000
    loser_job = Job.objects.get(pk=loser.job_id)
    assert loser_job.status == JobStatus.FAILED
    assert loser_job.error == (
        f"{loser_name}: another batch recorded some of these trials at the same time; nothing "
        "was saved. Upload it again to see which."
    )
    assert loser_job.progress_done == 0
    assert Job.objects.get(pk=winner.job_id).status == JobStatus.SUCCEEDED
    assert Trial.objects.filter(qualification=qualification).count() == 2000
    assert set(Trial.objects.values_list("upload_id", flat=True).distinct()) == {winner.pk}
    qualification.refresh_from_db()
    assert qualification.data_version == 1  # only the winner bumped it
    assert AuditEvent.objects.filter(action="trial_upload.reject", object_id=str(loser.pk)).exists()


def test_upload_progress_is_visible_to_other_connections_before_the_rows_are(
    make_qualification, planted_rows, members, monkeypatch
):
    qualification = make_qualification()
    monkeypatch.setattr(services.trials, "TRIAL_INSERT_BATCH", 500)
    seen = []
    report = services._SavedRowsProgress.report

    def watched(self, done):
        report(self, done)
        job_id = self.reporter.job.pk
        seen.append(
            in_own_connection(
                lambda: (
                    Job.objects.values_list("progress_done", "progress_total").get(pk=job_id),
                    Trial.objects.filter(qualification=qualification).count(),
                )
            )
        )

    monkeypatch.setattr(services._SavedRowsProgress, "report", watched)
    upload = services.trial_batch_submit(
        qualification=qualification,
        content=to_csv(planted_rows),
        filename="sweep.csv",
        actor=members["editor"],
        partial=True,
        run_now=True,
    )
    assert upload.status == "loaded"
    # Another connection sees the job advance batch by batch, and none of the rows until the
    # whole batch commits.
    assert seen == [((500, 2000), 0), ((1000, 2000), 0), ((1500, 2000), 0), ((2000, 2000), 0)]
    assert in_own_connection(lambda: Trial.objects.filter(qualification=qualification).count()) == (
        2000
    )
