"""Trial batches: upload, validation against stored trials, the all-or-nothing load."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from django.core.files.base import ContentFile
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import F

import numfmt
from governance.errors import Conflict
from governance.models import Job
from governance.services import (
    InputError,
    JobReporter,
    audit_record,
    job_create,
    job_enqueue,
    job_run,
)
from qualification.formats.trials import ParsedTrials, parse_trials
from qualification.models import Qualification, Task, Trial, TrialUpload
from qualification.services._common import _user
from qualification.services.analysis import analysis_request

UPLOAD_JOB = "trial_upload"


def trial_batch_submit(
    *,
    qualification: Qualification,
    content: bytes,
    filename: str,
    content_type: str = "",
    source: str = "web",
    partial: bool = False,
    actor=None,
    run_now: bool = False,
) -> TrialUpload:
    """Keep the raw batch, then load it in a job (queued, or here and now with `run_now`).

    The same bytes loaded into the same qualification before are not loaded again.
    """
    if not qualification.accepts_trials:
        raise Conflict(
            f"{qualification.name} is {qualification.get_status_display()}: it takes no more "
            "trials. Create a requalification to add evidence."
        )
    if not content:
        raise InputError(f"{filename or 'the upload'}: the file is empty")
    sha256 = hashlib.sha256(content).hexdigest()
    already = TrialUpload.objects.filter(
        qualification=qualification, sha256=sha256, status=TrialUpload.Status.LOADED
    ).first()
    if already is not None:
        return already
    with transaction.atomic():
        job = job_create(
            workspace=qualification.workspace,
            kind=UPLOAD_JOB,
            user=actor,
            label=f"Trials for {qualification.name}: {filename}"[:300],
            params={"qualification_id": qualification.pk},
        )
        upload = TrialUpload(
            workspace=qualification.workspace,
            qualification=qualification,
            original_name=filename[:300] or "trials",
            sha256=sha256,
            size=len(content),
            source=source,
            partial=partial,
            job=job,
            uploaded_by=_user(actor),
        )
        # Server-chosen storage name: never a client-supplied path.
        upload.file.save(f"{sha256}.bin", ContentFile(content), save=False)
        upload.save()
        job.params = {"qualification_id": qualification.pk, "upload_id": upload.pk}
        job.save(update_fields=["params"])
        audit_record(
            workspace=qualification.workspace,
            actor=actor,
            action="trial_upload.create",
            obj=upload,
            data={"qualification": qualification.pk, "bytes": len(content), "source": source},
        )
        if not run_now:
            job_enqueue(job=job, task="qualification.load_trials")
    if run_now:
        job_run(job_id=job.pk, work=trial_upload_process)
        upload.refresh_from_db()
        qualification.refresh_from_db()
    return upload


# Rows per INSERT while loading a batch; progress is reported after each.
TRIAL_INSERT_BATCH = 1000


class _SavedRowsProgress:
    """Rows saved so far, visible to whoever polls the job while the all-or-nothing insert's
    transaction is still open.

    That transaction's writes stay invisible to other connections until it commits, so on
    PostgreSQL the job row is updated through a second, autocommitting connection, with SKIP
    LOCKED so that it never waits on the job row. SQLite has one writer at a time: there the
    job's own connection writes it.
    """

    def __init__(self, reporter: JobReporter):
        self.reporter = reporter
        self._side = None
        if connection.vendor == "postgresql":
            self._side = connections.create_connection(DEFAULT_DB_ALIAS)

    def report(self, done: int) -> None:
        self.reporter.job.progress_done = done
        if self._side is None:
            self.reporter.flush(force=True)
            return
        quote = self._side.ops.quote_name
        table = quote(Job._meta.db_table)
        pk, column = quote(Job._meta.pk.column), quote(Job._meta.get_field("progress_done").column)
        with self._side.cursor() as cursor:
            # Identifiers come from the model's metadata; the values are parameters.
            cursor.execute(
                f"UPDATE {table} SET {column} = %s WHERE {pk} = "  # noqa: S608
                f"(SELECT {pk} FROM {table} WHERE {pk} = %s FOR UPDATE SKIP LOCKED)",
                [done, self.reporter.job.pk],
            )

    def close(self) -> None:
        if self._side is not None:
            self._side.close()


def _upload_reject(*, upload: TrialUpload, job: Job, data: dict) -> None:
    with transaction.atomic():
        TrialUpload.objects.filter(pk=upload.pk).update(status=TrialUpload.Status.REJECTED)
        audit_record(
            workspace=upload.workspace,
            actor=job.created_by,
            action="trial_upload.reject",
            obj=upload,
            data=data,
        )


def trial_upload_process(job: Job, reporter: JobReporter) -> None:
    """Job work: parse, check everything, then save all rows or none.

    Progress counts rows saved: 0 while the batch is checked, then up by TRIAL_INSERT_BATCH as
    the insert proceeds, and back to 0 if it is rolled back.
    """
    upload = TrialUpload.objects.select_related("qualification__workload").get(
        pk=job.params["upload_id"], workspace=job.workspace
    )
    if upload.status == TrialUpload.Status.LOADED:
        return
    qualification = upload.qualification
    name = upload.original_name
    with upload.file.open("rb") as handle:
        content = handle.read()
    parsed = parse_trials(content, filename=name)
    reporter.set_total(parsed.records, unit="rows saved")
    errors = [e.as_dict() for e in parsed.errors]
    checked = _check_against_database(qualification, parsed, partial=upload.partial)
    errors += checked["errors"]
    reporter.set_counts(
        rows=parsed.records,
        format=parsed.format,
        unknown_fields=", ".join(parsed.unknown_fields) or "none",
    )
    if errors:
        errors.sort(key=lambda e: (e["line"] is None, e["line"] or 0))
        for entry in errors:
            label = f"{entry['field']}: " if entry.get("field") else ""
            reporter.error(f"{label}{entry['error']}", file=name, line=entry["line"])
        _upload_reject(upload=upload, job=job, data={"problems": len(errors), "first": errors[0]})
        raise InputError(
            f"{name}: {len(errors)} problem{'s' if len(errors) != 1 else ''} found; nothing was "
            "saved. Fix the lines listed and upload the file again."
        )
    progress = _SavedRowsProgress(reporter)
    try:
        _trials_save(upload, parsed, checked, job=job, reporter=reporter, progress=progress)
    except InputError as exc:
        # Rolled back: nothing of this batch is saved, whatever the progress said.
        reporter.job.progress_done = 0
        _upload_reject(upload=upload, job=job, data={"reason": str(exc)})
        raise
    finally:
        progress.close()


def _trials_save(upload, parsed, checked, *, job, reporter, progress) -> None:
    """Insert every row of a checked batch in one transaction (all or none)."""
    qualification = upload.qualification
    with transaction.atomic():
        locked = Qualification.objects.select_for_update().get(pk=qualification.pk)
        if not locked.accepts_trials:
            raise InputError(f"{locked.name} stopped accepting trials before this batch loaded")
        tasks = _tasks_for(qualification, checked["families"], parsed)
        sessions = _sessions_for(qualification.workspace, parsed)
        trials = [
            Trial(
                workspace=qualification.workspace,
                qualification=qualification,
                task=tasks[row.task_id],
                stratum_tokens=row.stratum_tokens,
                repeat=row.repeat,
                retrieval_correct=row.retrieval_correct,
                task_correct=row.task_correct,
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                model_calls=row.model_calls,
                tool_calls=row.tool_calls,
                cost_usd=row.cost_usd,
                latency_ms=row.latency_ms,
                failure_class=row.failure_class,
                session_ref=row.session_id,
                session_id=sessions.get(row.session_id),
                upload=upload,
                line=row.line,
                extra=row.extra,
            )
            for row in parsed.rows
        ]
        try:
            for start in range(0, len(trials), TRIAL_INSERT_BATCH):
                batch = trials[start : start + TRIAL_INSERT_BATCH]
                Trial.objects.bulk_create(batch, batch_size=TRIAL_INSERT_BATCH)
                progress.report(start + len(batch))
        except IntegrityError as exc:
            # Checked against the database before this transaction, so a unique-cell clash
            # here means a concurrent batch committed the same trials in between.
            raise InputError(
                f"{upload.original_name}: another batch recorded some of these trials at the "
                "same time; nothing was saved. Upload it again to see which."
            ) from exc
        Qualification.objects.filter(pk=qualification.pk).update(data_version=F("data_version") + 1)
        TrialUpload.objects.filter(pk=upload.pk).update(
            status=TrialUpload.Status.LOADED, rows_loaded=len(trials)
        )
        linked = sum(1 for row in parsed.rows if row.session_id and row.session_id in sessions)
        named = sum(1 for row in parsed.rows if row.session_id)
        reporter.set_counts(
            trials_saved=len(trials),
            tasks_new=checked["new_tasks"],
            sessions_linked=linked,
            sessions_not_found=named - linked,
        )
        audit_record(
            workspace=qualification.workspace,
            actor=job.created_by,
            action="qualification.trials_add",
            obj=qualification,
            data={"upload": upload.pk, "trials": len(trials), "partial": upload.partial},
        )
        if not upload.partial:
            qualification.refresh_from_db()
            analysis_request(qualification=qualification, actor=job.created_by)


def _check_against_database(qualification: Qualification, parsed: ParsedTrials, *, partial):
    """Families, task–family consistency, declared strata, duplicates and pairing."""
    check = _TrialsCheck(qualification)
    for row in parsed.rows:
        check.first_line.setdefault(row.task_id, row.line)
        check.family(row)
        check.stratum(row)
        check.duplicate(row)
    if not partial and parsed.rows:
        check.pairing(parsed.rows)
    return {
        "errors": check.errors,
        "families": check.families,
        "new_tasks": len(check.new_tasks),
    }


class _TrialsCheck:
    """The checks of one batch of trial rows against the qualification's data, in the order
    of the rows; `errors` collects {"line", "field", "error"}."""

    def __init__(self, qualification: Qualification):
        self.qualification = qualification
        self.errors: list[dict] = []
        self.families = {f.key: f for f in qualification.workload.families.all()}
        self.known_tasks = dict(
            Task.objects.filter(workload=qualification.workload).values_list(
                "external_id", "family__key"
            )
        )
        self.declared = set(qualification.strata)
        self.existing = {
            (task_id, stratum, repeat): (upload_id, line)
            for task_id, stratum, repeat, upload_id, line in Trial.objects.filter(
                qualification=qualification
            ).values_list("task__external_id", "stratum_tokens", "repeat", "upload_id", "line")
        }
        self.seen: dict[tuple, int] = {}
        self.task_family: dict[str, tuple[str, int]] = {}
        self.first_line: dict[str, int] = {}
        self.new_tasks: set[str] = set()

    def err(self, line, field, message) -> None:
        self.errors.append({"line": line, "field": field, "error": message})

    def family(self, row) -> None:
        """A known family, and the same one for a task throughout (and as recorded)."""
        if row.family not in self.families:
            self.err(
                row.line,
                "family",
                f"unknown family {row.family!r}; workload {self.qualification.workload} has "
                f"{', '.join(sorted(self.families)) or 'no families'}",
            )
        recorded = self.known_tasks.get(row.task_id)
        if recorded and recorded != row.family:
            self.err(
                row.line,
                "family",
                f"task {row.task_id} belongs to family {recorded}, not {row.family}",
            )
        elif row.task_id in self.task_family and self.task_family[row.task_id][0] != row.family:
            family, line = self.task_family[row.task_id]
            self.err(
                row.line,
                "family",
                f"task {row.task_id} is in family {family} on line {line}, {row.family} here",
            )
        else:
            self.task_family.setdefault(row.task_id, (row.family, row.line))
        if recorded is None:
            self.new_tasks.add(row.task_id)

    def stratum(self, row) -> None:
        if self.declared and row.stratum_tokens not in self.declared:
            self.err(
                row.line,
                "stratum_tokens",
                f"{row.stratum_tokens} is not a declared stratum of this qualification "
                f"({', '.join(str(s) for s in sorted(self.declared))})",
            )

    def duplicate(self, row) -> None:
        """A trial (task, stratum, repeat) once in the batch and not already recorded."""
        key = row.key
        if key in self.seen:
            self.err(
                row.line,
                "repeat",
                f"duplicate trial: task {row.task_id} at {row.stratum_tokens} tokens, repeat "
                f"{row.repeat} is already on line {self.seen[key]}",
            )
        else:
            self.seen[key] = row.line
        if key in self.existing:
            upload_id, line = self.existing[key]
            where = f" (upload #{upload_id}, line {line})" if upload_id else ""
            self.err(
                row.line,
                "repeat",
                f"duplicate trial: task {row.task_id} at {row.stratum_tokens} tokens, repeat "
                f"{row.repeat} is already recorded{where}",
            )

    def pairing(self, rows) -> None:
        """With the batch complete, every task has trials at every stratum."""
        cells: dict[str, set[int]] = defaultdict(set)
        for task_id, stratum, _ in self.existing:
            cells[task_id].add(stratum)
        for row in rows:
            cells[row.task_id].add(row.stratum_tokens)
        expected = self.declared or {s for strata in cells.values() for s in strata}
        for task_id in sorted(cells, key=lambda t: self.first_line.get(t, 0)):
            missing = sorted(expected - cells[task_id])
            if missing:
                self.err(
                    self.first_line.get(task_id),
                    "stratum_tokens",
                    f"unpaired task: {task_id} has no trials at "
                    f"{', '.join(numfmt.tokens(m) for m in missing)}; every task must run at every "
                    f"stratum ({', '.join(numfmt.tokens(s) for s in sorted(expected))}). Add the "
                    "missing rows, or send the batch as partial and complete it later",
                )


def _tasks_for(qualification, families, parsed) -> dict[str, Task]:
    wanted = {row.task_id: row.family for row in parsed.rows}
    tasks = {
        t.external_id: t
        for t in Task.objects.filter(workload=qualification.workload, external_id__in=wanted)
    }
    missing = [
        Task(
            workspace=qualification.workspace,
            workload=qualification.workload,
            family=families[family],
            external_id=task_id,
        )
        for task_id, family in wanted.items()
        if task_id not in tasks
    ]
    Task.objects.bulk_create(missing, batch_size=2000)
    tasks.update(
        {
            t.external_id: t
            for t in Task.objects.filter(
                workload=qualification.workload, external_id__in=[m.external_id for m in missing]
            )
        }
    )
    return tasks


def _sessions_for(workspace, parsed) -> dict[str, int]:
    from traces.models import Session

    refs = {row.session_id for row in parsed.rows if row.session_id}
    if not refs:
        return {}
    return dict(
        Session.objects.filter(workspace=workspace, external_id__in=refs).values_list(
            "external_id", "pk"
        )
    )
