"""Writes for qualification: configurations, workloads, sweeps and their trials, the analysis
cache, operating limits and their review, and budget checks recorded as assembly audits.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict

import orjson
from django.core.exceptions import PermissionDenied
from django.core.files.base import ContentFile
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import F
from django.utils import timezone

from governance.api.exceptions import Conflict
from governance.models import Job, Role
from governance.services import (
    InputError,
    JobReporter,
    audit_record,
    job_create,
    job_enqueue,
    job_run,
)
from qualification import selectors
from qualification.analysis.limits import (
    RESERVE_ACTIONS,
    SEED_004_STAGES,
    LimitSpec,
    StageBudget,
    check_budget,
)
from qualification.analysis.sweep import AnalysisParams, analyse_sweep
from qualification.analysis.tokens import format_tokens
from qualification.formats.trials import ParsedTrials, parse_trials
from qualification.models import (
    AssemblyAudit,
    FamilyKind,
    LimitStatus,
    ModelConfiguration,
    OperatingLimit,
    Qualification,
    QualificationAnalysis,
    QualificationStatus,
    Task,
    TaskFamily,
    Trial,
    TrialUpload,
    Workload,
)

UPLOAD_JOB = "trial_upload"
ANALYSIS_JOB = "qualification_analysis"
MAX_STRATA = 16
MAX_PROMPT_CHARS = 2_000_000

DEFAULT_FAMILIES = [
    ("retrieval", FamilyKind.RETRIEVAL),
    ("aggregation", FamilyKind.AGGREGATION),
    ("retention", FamilyKind.RETENTION),
    ("long_code", FamilyKind.LONG_CODE),
    ("tool_trajectory", FamilyKind.TOOL_TRAJECTORY),
    ("code_change", FamilyKind.CODE_CHANGE),
]


def _fingerprint(data) -> str:
    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


def configuration_fingerprint(pinned: dict) -> str:
    """sha256 of the pinned fields as canonical JSON: any change gives a new fingerprint."""
    return _fingerprint(pinned)


# --- configurations and workloads ------------------------------------------------


def configuration_get_or_create(
    *,
    workspace,
    model_name: str,
    model_version: str,
    decoding: dict | None = None,
    harness_version: str = "",
    prompt_version: str = "",
    evaluator_version: str = "",
    actor=None,
) -> ModelConfiguration:
    if not model_name.strip() or not model_version.strip():
        raise InputError("model: name and version are both required")
    if decoding is not None and not isinstance(decoding, dict):
        raise InputError('configuration.decoding: must be an object, e.g. {"temperature": 0}')
    pinned = {
        "model_name": model_name.strip(),
        "model_version": model_version.strip(),
        "decoding": decoding or {},
        "harness_version": harness_version.strip(),
        "prompt_version": prompt_version.strip(),
        "evaluator_version": evaluator_version.strip(),
    }
    fingerprint = configuration_fingerprint(pinned)
    existing = ModelConfiguration.objects.filter(
        workspace=workspace, fingerprint=fingerprint
    ).first()
    if existing:
        return existing
    with transaction.atomic():
        config = ModelConfiguration(
            workspace=workspace, fingerprint=fingerprint, created_by=_user(actor), **pinned
        )
        config.full_clean(exclude=["workspace"])
        config.save()
        audit_record(
            workspace=workspace,
            actor=actor,
            action="model_configuration.create",
            obj=config,
            data={"fingerprint": fingerprint, **pinned},
        )
    return config


def _family_specs(families) -> list[tuple[str, str, str]]:
    """[(key, kind, label)] from strings or {key, kind, label} objects, validated."""
    kinds = set(FamilyKind.values)
    specs = []
    for position, item in enumerate(families or []):
        if isinstance(item, str):
            item = {"key": item}
        if not isinstance(item, dict) or not str(item.get("key", "")).strip():
            raise InputError(f'workload.families[{position}]: needs a key, e.g. "retrieval"')
        key = str(item["key"]).strip().lower()
        if not key.replace("_", "").replace("-", "").isalnum() or len(key) > 64:
            raise InputError(
                f"workload.families[{position}]: {key!r} must be a slug (letters, digits, _ or -)"
            )
        kind = str(item.get("kind") or (key if key in kinds else FamilyKind.CUSTOM))
        if kind not in kinds:
            raise InputError(
                f"workload.families[{position}].kind: {kind!r} is not one of {', '.join(sorted(kinds))}"
            )
        specs.append((key, kind, str(item.get("label", ""))[:200]))
    keys = [s[0] for s in specs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise InputError(f"workload.families: {', '.join(duplicates)} listed twice")
    return specs


def workload_get_or_create(
    *, workspace, name: str, version: str, families=None, description: str = "", actor=None
) -> Workload:
    """Find or create a workload version. New workloads default to the six standard families;
    families given for an existing workload are added (never removed)."""
    if not name.strip() or not str(version).strip():
        raise InputError("workload: name and version are both required")
    specs = _family_specs(families) if families else None
    with transaction.atomic():
        workload, created = Workload.objects.get_or_create(
            workspace=workspace,
            name=name.strip(),
            version=str(version).strip(),
            defaults={"description": description},
        )
        if created:
            specs = specs or [(key, kind, "") for key, kind in DEFAULT_FAMILIES]
        existing = set(workload.families.values_list("key", flat=True))
        added = [s for s in specs or [] if s[0] not in existing]
        TaskFamily.objects.bulk_create(
            [
                TaskFamily(workspace=workspace, workload=workload, key=k, kind=kind, label=label)
                for k, kind, label in added
            ]
        )
        if created or added:
            audit_record(
                workspace=workspace,
                actor=actor,
                action="workload.create" if created else "workload.add_families",
                obj=workload,
                data={"families": [s[0] for s in added]},
            )
    return workload


# --- qualifications ----------------------------------------------------------------


def _user(actor):
    return actor if getattr(actor, "pk", None) else None


def _clean_strata(strata) -> list[int]:
    if strata in (None, ""):
        return []
    if isinstance(strata, str):
        strata = [s.strip() for s in strata.replace(";", ",").split(",") if s.strip()]
    if not isinstance(strata, list | tuple):
        raise InputError("strata: give a list of context sizes in tokens, e.g. [8000, 32000]")
    cleaned = []
    for value in strata:
        text = str(value).strip().lower().replace("_", "")
        multiplier = 1
        if text.endswith("k"):
            text, multiplier = text[:-1], 1000
        try:
            number = float(text) * multiplier
        except ValueError:
            raise InputError(f"strata: {value!r} is not a number of tokens") from None
        if number <= 0 or number != int(number):
            raise InputError(f"strata: {value!r} must be a positive whole number of tokens")
        cleaned.append(int(number))
    if len(set(cleaned)) != len(cleaned):
        raise InputError("strata: each context size may appear only once")
    if len(cleaned) > MAX_STRATA:
        raise InputError(f"strata: at most {MAX_STRATA} strata")
    return sorted(cleaned)


def _validate_analysis(threshold, consequence, overrides) -> AnalysisParams:
    try:
        threshold = float(threshold)
    except (TypeError, ValueError):
        raise InputError("threshold: must be a number between 0 and 1, e.g. 0.85") from None
    if not isinstance(overrides, dict):
        raise InputError("analysis_params: must be an object of parameter overrides")
    try:
        return AnalysisParams.for_qualification(
            threshold=threshold, consequence=consequence, overrides=overrides
        )
    except (ValueError, TypeError) as exc:
        raise InputError(str(exc)) from None


def qualification_create(
    *,
    workspace,
    name: str,
    model: dict,
    configuration: dict | None,
    workload: dict,
    threshold: float,
    consequence: str = "medium",
    strata=None,
    supersedes: Qualification | None = None,
    analysis_params: dict | None = None,
    notes: str = "",
    actor=None,
) -> Qualification:
    """Register a sweep with its pinned configuration and pre-registered θ.

    Naming `supersedes` makes this a requalification: the previous sweep of the same model and
    workload is marked superseded (its curves are kept and overlaid).
    """
    if not name.strip():
        raise InputError("name: required")
    _validate_analysis(threshold, consequence, analysis_params or {})
    configuration = configuration or {}
    unknown = sorted(
        set(configuration) - {"decoding", "harness_version", "prompt_version", "evaluator_version"}
    )
    if unknown:
        raise InputError(
            f"configuration.{unknown[0]}: unknown field; pinned fields are decoding, "
            "harness_version, prompt_version and evaluator_version"
        )
    with transaction.atomic():
        config = configuration_get_or_create(
            workspace=workspace,
            model_name=str(model.get("name", "")),
            model_version=str(model.get("version", "")),
            decoding=configuration.get("decoding"),
            harness_version=str(configuration.get("harness_version", "")),
            prompt_version=str(configuration.get("prompt_version", "")),
            evaluator_version=str(configuration.get("evaluator_version", "")),
            actor=actor,
        )
        work = workload_get_or_create(
            workspace=workspace,
            name=str(workload.get("name", "")),
            version=str(workload.get("version", "")),
            families=workload.get("families"),
            actor=actor,
        )
        previous = None
        if supersedes is not None:
            previous = (
                Qualification.objects.select_for_update()
                .select_related("configuration", "workload")
                .get(pk=supersedes.pk, workspace=workspace)
            )
            if previous.configuration.model_name != config.model_name:
                raise InputError(
                    f"supersedes: #{previous.pk} qualifies {previous.configuration.model_name}, "
                    f"not {config.model_name}"
                )
            if previous.workload.name != work.name:
                raise InputError(
                    f"supersedes: #{previous.pk} runs workload {previous.workload.name}, "
                    f"not {work.name}"
                )
            if hasattr(previous, "superseded_by"):
                raise Conflict(
                    f"#{previous.pk} is already superseded by #{previous.superseded_by.pk}; "
                    "supersede the newest qualification instead"
                )
        qualification = Qualification(
            workspace=workspace,
            name=name.strip(),
            configuration=config,
            workload=work,
            strata=_clean_strata(strata),
            threshold=float(threshold),
            consequence=consequence,
            analysis_params=analysis_params or {},
            supersedes=previous,
            notes=notes,
            created_by=_user(actor),
        )
        qualification.full_clean(exclude=["workspace", "configuration", "workload", "supersedes"])
        qualification.save()
        if previous is not None:
            Qualification.objects.filter(pk=previous.pk).update(
                status=QualificationStatus.SUPERSEDED,
                locked_at=previous.locked_at or timezone.now(),
            )
            audit_record(
                workspace=workspace,
                actor=actor,
                action="qualification.supersede",
                obj=previous,
                data={"superseded_by": qualification.pk},
            )
        audit_record(
            workspace=workspace,
            actor=actor,
            action="qualification.create",
            obj=qualification,
            data={
                "configuration": config.fingerprint,
                "workload": str(work),
                "threshold": qualification.threshold,
                "consequence": consequence,
                "strata": qualification.strata,
                "supersedes": previous.pk if previous else None,
                "analysis_params": qualification.analysis_params,
            },
        )
    return qualification


PRE_REGISTERED = {"threshold", "consequence", "analysis_params", "strata"}


def qualification_update(*, qualification: Qualification, actor, **changes) -> Qualification:
    """Rename or annotate at any time; θ, consequence, strata and parameters only before trials."""
    allowed = {"name", "notes"} | PRE_REGISTERED
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise InputError(f"{unknown[0]}: cannot be changed")
    with transaction.atomic():
        current = Qualification.objects.select_for_update().get(pk=qualification.pk)
        touched = PRE_REGISTERED & set(changes)
        if touched and current.trials.exists():
            raise Conflict(
                f"{', '.join(sorted(touched))} were pre-registered and trials exist; "
                "create a new qualification to change them"
            )
        before = {k: getattr(current, k) for k in changes}
        if "strata" in changes:
            changes["strata"] = _clean_strata(changes["strata"])
        _validate_analysis(
            changes.get("threshold", current.threshold),
            changes.get("consequence", current.consequence),
            changes.get("analysis_params", current.analysis_params),
        )
        for key, value in changes.items():
            setattr(current, key, value)
        current.full_clean(exclude=["workspace", "configuration", "workload", "supersedes"])
        current.save()
        audit_record(
            workspace=current.workspace,
            actor=actor,
            action="qualification.update",
            obj=current,
            data={"before": before, "after": {k: getattr(current, k) for k in changes}},
        )
    return current


def qualification_lock(*, qualification: Qualification, actor) -> Qualification:
    """No more trials: the analysis a limit relies on cannot shift under it."""
    with transaction.atomic():
        updated = Qualification.objects.filter(
            pk=qualification.pk, status=QualificationStatus.COLLECTING
        ).update(status=QualificationStatus.LOCKED, locked_at=timezone.now())
        qualification.refresh_from_db()
        if updated:
            audit_record(
                workspace=qualification.workspace,
                actor=actor,
                action="qualification.lock",
                obj=qualification,
            )
    return qualification


# --- trials ------------------------------------------------------------------------


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
            from qualification.tasks import load_trials

            job_enqueue(job=job, task=load_trials)
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
    errors: list[dict] = []

    def err(line, field, message):
        errors.append({"line": line, "field": field, "error": message})

    families = {f.key: f for f in qualification.workload.families.all()}
    known_tasks = dict(
        Task.objects.filter(workload=qualification.workload).values_list(
            "external_id", "family__key"
        )
    )
    declared = set(qualification.strata)
    existing = {}
    for task_id, stratum, repeat, upload_id, line in Trial.objects.filter(
        qualification=qualification
    ).values_list("task__external_id", "stratum_tokens", "repeat", "upload_id", "line"):
        existing[(task_id, stratum, repeat)] = (upload_id, line)
    seen: dict[tuple, int] = {}
    task_family: dict[str, tuple[str, int]] = {}
    first_line: dict[str, int] = {}
    new_tasks = set()
    for row in parsed.rows:
        first_line.setdefault(row.task_id, row.line)
        if row.family not in families:
            err(
                row.line,
                "family",
                f"unknown family {row.family!r}; workload {qualification.workload} has "
                f"{', '.join(sorted(families)) or 'no families'}",
            )
        recorded = known_tasks.get(row.task_id)
        if recorded and recorded != row.family:
            err(
                row.line,
                "family",
                f"task {row.task_id} belongs to family {recorded}, not {row.family}",
            )
        elif row.task_id in task_family and task_family[row.task_id][0] != row.family:
            family, line = task_family[row.task_id]
            err(
                row.line,
                "family",
                f"task {row.task_id} is in family {family} on line {line}, {row.family} here",
            )
        else:
            task_family.setdefault(row.task_id, (row.family, row.line))
        if recorded is None:
            new_tasks.add(row.task_id)
        if declared and row.stratum_tokens not in declared:
            err(
                row.line,
                "stratum_tokens",
                f"{row.stratum_tokens} is not a declared stratum of this qualification "
                f"({', '.join(str(s) for s in sorted(declared))})",
            )
        key = row.key
        if key in seen:
            err(
                row.line,
                "repeat",
                f"duplicate trial: task {row.task_id} at {row.stratum_tokens} tokens, repeat "
                f"{row.repeat} is already on line {seen[key]}",
            )
        else:
            seen[key] = row.line
        if key in existing:
            upload_id, line = existing[key]
            where = f" (upload #{upload_id}, line {line})" if upload_id else ""
            err(
                row.line,
                "repeat",
                f"duplicate trial: task {row.task_id} at {row.stratum_tokens} tokens, repeat "
                f"{row.repeat} is already recorded{where}",
            )
    if not partial and parsed.rows:
        cells: dict[str, set[int]] = defaultdict(set)
        for task_id, stratum, _ in existing:
            cells[task_id].add(stratum)
        for row in parsed.rows:
            cells[row.task_id].add(row.stratum_tokens)
        expected = declared or {s for strata in cells.values() for s in strata}
        for task_id in sorted(cells, key=lambda t: first_line.get(t, 0)):
            missing = sorted(expected - cells[task_id])
            if missing:
                where = first_line.get(task_id)
                err(
                    where,
                    "stratum_tokens",
                    f"unpaired task: {task_id} has no trials at "
                    f"{', '.join(format_tokens(m) for m in missing)}; every task must run at every "
                    f"stratum ({', '.join(format_tokens(s) for s in sorted(expected))}). Add the "
                    "missing rows, or send the batch as partial and complete it later",
                )
    return {"errors": errors, "families": families, "new_tasks": len(new_tasks)}


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


# --- analysis ----------------------------------------------------------------------


def qualification_analyse(
    *, qualification: Qualification, job: Job | None = None, reporter: JobReporter | None = None
) -> QualificationAnalysis:
    """The analysis of the qualification's current version, computed once and cached."""
    qualification.refresh_from_db()
    params = selectors.analysis_params_for(qualification)
    fingerprint = selectors.params_fingerprint(params)
    cached = selectors.analysis_current(qualification=qualification)
    if cached is not None:
        return cached
    started = time.perf_counter()
    for _ in range(5):
        # The trials read must belong to the version the cache row is labelled with.
        version = Qualification.objects.values_list("data_version", flat=True).get(
            pk=qualification.pk
        )
        frame = selectors.trial_frame(qualification=qualification)
        if Qualification.objects.filter(pk=qualification.pk, data_version=version).exists():
            break
    if reporter is not None:
        reporter.set_total(frame["family"].nunique() + 1, unit="families")

    def progress(done, total, label):
        if reporter is not None:
            reporter.set_done(done)

    result = analyse_sweep(frame, params, progress=progress).as_dict()
    duration = int((time.perf_counter() - started) * 1000)
    with transaction.atomic():
        analysis, _ = QualificationAnalysis.objects.get_or_create(
            workspace=qualification.workspace,
            qualification=qualification,
            data_version=version,
            params_fingerprint=fingerprint,
            defaults={
                "params": params.as_dict(),
                "result": orjson.loads(orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY)),
                "duration_ms": duration,
                "job": job,
            },
        )
        QualificationAnalysis.objects.filter(qualification=qualification).exclude(
            pk=analysis.pk
        ).filter(data_version__lt=version).delete()
    if reporter is not None:
        reporter.set_counts(
            trials=result["trials"], status=result["status"], seconds=round(duration / 1000, 2)
        )
    return analysis


def analysis_request(*, qualification: Qualification, actor=None) -> Job | None:
    """Queue the analysis of the current version unless it is cached or already queued."""
    if selectors.analysis_current(qualification=qualification) is not None:
        return None
    pending = selectors.analysis_job_pending(qualification=qualification)
    if pending is not None:
        return pending
    from qualification.tasks import analyse_qualification

    job = job_create(
        workspace=qualification.workspace,
        kind=ANALYSIS_JOB,
        user=actor,
        label=f"Analyse {qualification.name} (version {qualification.data_version})"[:300],
        params={"qualification_id": qualification.pk, "data_version": qualification.data_version},
    )
    job_enqueue(job=job, task=analyse_qualification)
    return job


class AnalysisPending(Conflict):
    """The analysis of the current trials is not cached yet; `job` is computing it."""

    default_code = "analysis_pending"

    def __init__(self, *, qualification: Qualification, job: Job):
        self.qualification, self.job = qualification, job
        super().__init__(
            f"The analysis of {qualification.name} (trial version {qualification.data_version}) "
            f"is not ready: job #{job.pk} is computing it. Try again when it has finished."
        )


def analysis_get_or_request(
    *, qualification: Qualification, actor=None
) -> tuple[QualificationAnalysis | None, Job | None]:
    """The cached analysis of the current trials, or the job computing it (queued if need be).

    Requests never compute an analysis themselves: it runs as a job (METHODS' bootstrap takes
    seconds), so a cache miss answers with the job to wait for.
    """
    analysis = selectors.analysis_current(qualification=qualification)
    if analysis is not None:
        return analysis, None
    job = analysis_request(qualification=qualification, actor=actor)
    if job is None:  # cached between the two reads
        return selectors.analysis_current(qualification=qualification), None
    return None, job


def qualification_analysis_run(job: Job, reporter: JobReporter) -> None:
    qualification = Qualification.objects.filter(
        pk=job.params["qualification_id"], workspace=job.workspace
    ).first()
    if qualification is None:
        raise InputError("the qualification was deleted before its analysis ran")
    qualification_analyse(qualification=qualification, job=job, reporter=reporter)


# --- operating limits ----------------------------------------------------------------


def _validate_limit_values(values: dict) -> None:
    """Field-named errors for a limit's numbers, sources and stages (before the database)."""
    for name in ("max_context_tokens", "max_initial_assembly_tokens", "reserve_tokens"):
        value = values.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError(f"{name}: must be a whole number of tokens ≥ 0")
    if values["max_context_tokens"] <= 0:
        raise InputError("max_context_tokens: must be positive")
    room = values["max_context_tokens"] - values["reserve_tokens"]
    if values["max_initial_assembly_tokens"] > room:
        raise InputError(
            f"max_initial_assembly_tokens: {values['max_initial_assembly_tokens']:,} leaves less "
            f"than the reserve of {values['reserve_tokens']:,} below the maximum context of "
            f"{values['max_context_tokens']:,}; at most {max(room, 0):,}"
        )
    if values.get("reserve_action") not in RESERVE_ACTIONS:
        raise InputError(f"reserve_action: must be one of {', '.join(RESERVE_ACTIONS)}")
    sources = values.get("source_limits") or {}
    if not isinstance(sources, dict):
        raise InputError("source_limits: must be an object {source: max tokens}")
    for source, tokens in sources.items():
        if not str(source).strip() or len(str(source)) > 64:
            raise InputError("source_limits: source names must be 1–64 characters")
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise InputError(f"source_limits.{source}: must be a whole number of tokens ≥ 0")
        if tokens > values["max_context_tokens"]:
            raise InputError(
                f"source_limits.{source}: {tokens:,} exceeds the maximum context "
                f"{values['max_context_tokens']:,}"
            )
    stages = values.get("stage_budgets") or []
    if not isinstance(stages, list):
        raise InputError("stage_budgets: must be a list of stages")
    keys = set()
    for position, stage in enumerate(stages):
        where = f"stage_budgets[{position}]"
        if not isinstance(stage, dict) or not str(stage.get("key", "")).strip():
            raise InputError(f'{where}: needs a key, e.g. "code_generation"')
        key = str(stage["key"])
        if key in keys:
            raise InputError(f"{where}.key: {key!r} appears twice")
        keys.add(key)
        budget = stage.get("max_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
            raise InputError(f"{where}.max_tokens: must be a positive whole number of tokens")
        if budget > room:
            raise InputError(
                f"{where}.max_tokens: {key} at {budget:,} would eat into the reserve; at most "
                f"{room:,} (maximum context minus reserve)"
            )
        target = stage.get("target_tokens")
        if target is not None and (
            not isinstance(target, int) or isinstance(target, bool) or not 0 < target <= budget
        ):
            raise InputError(f"{where}.target_tokens: must be a whole number up to max_tokens")
        if stage.get("action") and stage["action"] not in RESERVE_ACTIONS:
            raise InputError(f"{where}.action: must be one of {', '.join(RESERVE_ACTIONS)}")


def _normalise_stages(stages) -> list[dict]:
    return [
        {
            "key": str(s["key"]).strip(),
            "label": str(s.get("label") or s["key"]).strip()[:200],
            "max_tokens": s["max_tokens"],
            "target_tokens": s.get("target_tokens"),
            "action": s.get("action") or "",
        }
        for s in stages or []
    ]


def seed_004_stages(*, room: int) -> tuple[list[dict], list[str]]:
    """Seed 004's five stages, each clamped to the room below the reserve, with notes."""
    stages, notes = [], []
    for stage in SEED_004_STAGES:
        stage = dict(stage)
        if stage["max_tokens"] > room:
            notes.append(
                f"{stage['label']}: {stage['max_tokens']:,} reduced to {room:,} to keep the reserve"
            )
            stage["max_tokens"] = room
        if stage["target_tokens"] and stage["target_tokens"] > stage["max_tokens"]:
            stage["target_tokens"] = None
        stages.append(stage)
    return stages, notes


def _justification(qualification: Qualification, analysis: QualificationAnalysis) -> dict:
    result = analysis.result
    families = []
    for family in result["families"]:
        families.append(
            {
                key: family[key]
                for key in (
                    "family",
                    "tasks",
                    "ecl_tokens",
                    "ecl_status",
                    "ecl_text",
                    "ecl_lower95_tokens",
                    "ecl_lower_tokens",
                    "ecl_lower_confidence",
                    "ecl_interval_tokens",
                    "p_ecl_at_least",
                    "knee_tokens",
                    "saturation_tokens",
                )
            }
        )
    return {
        "qualification": qualification.pk,
        "qualification_name": qualification.name,
        "data_version": analysis.data_version,
        "configuration_fingerprint": qualification.configuration.fingerprint,
        "model": f"{qualification.configuration.model_name} {qualification.configuration.model_version}",
        "workload": str(qualification.workload),
        "threshold": qualification.threshold,
        "consequence": qualification.consequence,
        "strata": result["strata"],
        "status": result["status"],
        "weakest_family": result["weakest_family"],
        "proposed_limit_tokens": result["proposed_limit_tokens"],
        "proposal": result["proposal"],
        "families": families,
        "params": result["params"],
    }


def operating_limit_propose(
    *,
    qualification: Qualification,
    actor,
    name: str = "",
    values: dict | None = None,
    use_stage_template: bool = False,
) -> OperatingLimit:
    """A proposed limit from a qualification's analysis: its proposed production limit as the
    maximum context, a quarter of it held in reserve, and the numbers that justify it.

    Needs the cached analysis of the current trials; without it, the analysis is queued and
    AnalysisPending (409) names the job.
    """
    qualification.refresh_from_db()
    if qualification.status == QualificationStatus.SUPERSEDED:
        successor = getattr(qualification, "superseded_by", None)
        raise Conflict(
            f"{qualification.name} is superseded"
            + (f" by #{successor.pk} {successor.name}" if successor else "")
            + "; propose limits from the latest qualification."
        )
    analysis, job = analysis_get_or_request(qualification=qualification, actor=actor)
    if analysis is None:
        raise AnalysisPending(qualification=qualification, job=job)
    result = analysis.result
    values = dict(values or {})
    proposed = result["proposed_limit_tokens"]
    if proposed is None and "max_context_tokens" not in values:
        raise Conflict(
            "This qualification proposes no limit: "
            + result["proposal"]["reason"]
            + " Give max_context_tokens explicitly to record a limit anyway."
        )
    max_context = values.get("max_context_tokens", proposed)
    reserve = values.get("reserve_tokens", max_context // 4 if isinstance(max_context, int) else 0)
    defaults = {
        "max_context_tokens": max_context,
        "reserve_tokens": reserve,
        "max_initial_assembly_tokens": max_context - reserve
        if isinstance(max_context, int) and isinstance(reserve, int)
        else None,
        "reserve_action": "compact",
        "source_limits": {},
        "stage_budgets": [],
        "rationale": result["proposal"]["margin_reason"],
    }
    defaults.update({k: v for k, v in values.items() if v is not None})
    notes: list[str] = []
    if use_stage_template and not values.get("stage_budgets"):
        room = defaults["max_context_tokens"] - defaults["reserve_tokens"]
        defaults["stage_budgets"], notes = seed_004_stages(room=room)
    _validate_limit_values(defaults)
    if proposed is not None and defaults["max_context_tokens"] > proposed:
        raise InputError(
            f"max_context_tokens: {defaults['max_context_tokens']:,} is above the qualification's "
            f"proposed limit of {proposed:,}; a limit may only be stricter than the evidence"
        )
    with transaction.atomic():
        predecessor = selectors.active_limit_for(
            workspace=qualification.workspace,
            model_name=qualification.configuration.model_name,
            workload_name=qualification.workload.name,
        )
        limit = OperatingLimit(
            workspace=qualification.workspace,
            name=(
                name or f"{qualification.configuration.model_name} on {qualification.workload.name}"
            )[:200],
            qualification=qualification,
            configuration_fingerprint=qualification.configuration.fingerprint,
            max_context_tokens=defaults["max_context_tokens"],
            max_initial_assembly_tokens=defaults["max_initial_assembly_tokens"],
            reserve_tokens=defaults["reserve_tokens"],
            reserve_action=defaults["reserve_action"],
            source_limits=defaults["source_limits"],
            stage_budgets=_normalise_stages(defaults["stage_budgets"]),
            rationale=defaults["rationale"],
            justification=_justification(qualification, analysis) | {"notes": notes},
            analysis_data_version=analysis.data_version,
            supersedes=predecessor,
            created_by=_user(actor),
            contributor_ids=[actor.pk] if _user(actor) else [],
        )
        limit.full_clean(exclude=["workspace", "qualification", "supersedes"])
        limit.save()
        audit_record(
            workspace=qualification.workspace,
            actor=actor,
            action="operating_limit.propose",
            obj=limit,
            data={
                "qualification": qualification.pk,
                "max_context_tokens": limit.max_context_tokens,
                "supersedes": predecessor.pk if predecessor else None,
            },
        )
    return limit


EDITABLE_LIMIT_FIELDS = {
    "name", "max_context_tokens", "max_initial_assembly_tokens", "reserve_tokens",
    "reserve_action", "source_limits", "stage_budgets", "rationale",
}  # fmt: skip


def operating_limit_update(*, limit: OperatingLimit, actor, **changes) -> OperatingLimit:
    """Edit a proposed limit. Approved limits are immutable: propose a successor instead."""
    unknown = sorted(set(changes) - EDITABLE_LIMIT_FIELDS)
    if unknown:
        raise InputError(f"{unknown[0]}: cannot be edited")
    with transaction.atomic():
        current = OperatingLimit.objects.select_for_update().get(pk=limit.pk)
        if current.status != LimitStatus.PROPOSED:
            raise Conflict(
                f"This limit is {current.status} and immutable; propose a new limit that "
                "supersedes it."
            )
        merged = {f: getattr(current, f) for f in EDITABLE_LIMIT_FIELDS} | changes
        _validate_limit_values(merged)
        proposed = current.justification.get("proposed_limit_tokens")
        if proposed is not None and merged["max_context_tokens"] > proposed:
            raise InputError(
                f"max_context_tokens: {merged['max_context_tokens']:,} is above the qualification's "
                f"proposed limit of {proposed:,}; a limit may only be stricter than the evidence"
            )
        before = {k: getattr(current, k) for k in changes}
        if "stage_budgets" in changes:
            changes["stage_budgets"] = _normalise_stages(changes["stage_budgets"])
        for key, value in changes.items():
            setattr(current, key, value)
        if _user(actor) and actor.pk not in current.contributor_ids:
            current.contributor_ids = [*current.contributor_ids, actor.pk]
        current.full_clean(exclude=["workspace", "qualification", "supersedes"])
        current.save()
        audit_record(
            workspace=current.workspace,
            actor=actor,
            action="operating_limit.update",
            obj=current,
            data={"before": before, "after": {k: getattr(current, k) for k in changes}},
        )
    return current


def operating_limit_approve(*, limit: OperatingLimit, reviewer, membership) -> OperatingLimit:
    """A reviewer who neither proposed nor edited the limit approves it; its predecessor is
    superseded in the same transaction, and its qualification takes no more trials."""
    if membership is None or membership.role < Role.REVIEWER:
        raise PermissionDenied("Approving an operating limit needs the reviewer role.")
    with transaction.atomic():
        current = OperatingLimit.objects.select_for_update().get(pk=limit.pk)
        if reviewer.pk in current.contributor_ids:
            raise PermissionDenied(
                "You proposed or edited this limit; another reviewer must approve it."
            )
        if current.status != LimitStatus.PROPOSED:
            raise Conflict(f"This limit is already {current.status}.")
        qualification = Qualification.objects.select_for_update().get(pk=current.qualification_id)
        if qualification.data_version != current.analysis_data_version:
            raise Conflict(
                "Trials were added to the qualification after this limit was proposed; "
                "withdraw it and propose again from the current analysis."
            )
        predecessor = None
        if current.supersedes_id:
            predecessor = OperatingLimit.objects.select_for_update().get(pk=current.supersedes_id)
            if predecessor.status != LimitStatus.APPROVED:
                raise Conflict(
                    f"The limit this one supersedes (#{predecessor.pk}) is {predecessor.status}; "
                    "only the active limit can be superseded."
                )
            predecessor.status = LimitStatus.SUPERSEDED
            predecessor.save(update_fields=["status", "updated_at"])
        current.status = LimitStatus.APPROVED
        current.approved_by = reviewer
        current.approved_at = timezone.now()
        current.save(update_fields=["status", "approved_by", "approved_at", "updated_at"])
        if qualification.status == QualificationStatus.COLLECTING:
            qualification_lock(qualification=qualification, actor=reviewer)
        if predecessor is not None:
            audit_record(
                workspace=current.workspace,
                actor=reviewer,
                action="operating_limit.supersede",
                obj=predecessor,
                data={"superseded_by": current.pk},
            )
        audit_record(
            workspace=current.workspace,
            actor=reviewer,
            action="operating_limit.approve",
            obj=current,
            data={
                "max_context_tokens": current.max_context_tokens,
                "qualification": current.qualification_id,
                "supersedes": predecessor.pk if predecessor else None,
            },
        )
    return current


def operating_limit_withdraw(*, limit: OperatingLimit, actor) -> OperatingLimit:
    with transaction.atomic():
        current = OperatingLimit.objects.select_for_update().get(pk=limit.pk)
        if current.status != LimitStatus.PROPOSED:
            raise Conflict(f"Only a proposed limit can be withdrawn; this one is {current.status}.")
        current.status = LimitStatus.WITHDRAWN
        current.save(update_fields=["status", "updated_at"])
        audit_record(
            workspace=current.workspace, actor=actor, action="operating_limit.withdraw", obj=current
        )
    return current


# --- budget checks -------------------------------------------------------------------


def limit_spec(limit: OperatingLimit) -> LimitSpec:
    return LimitSpec(
        max_context_tokens=limit.max_context_tokens,
        max_initial_assembly_tokens=limit.max_initial_assembly_tokens,
        reserve_tokens=limit.reserve_tokens,
        reserve_action=limit.reserve_action,
        source_limits=dict(limit.source_limits),
        stages=[
            StageBudget(
                key=s["key"],
                label=s.get("label") or s["key"],
                max_tokens=s["max_tokens"],
                target_tokens=s.get("target_tokens"),
                action=s.get("action") or "",
            )
            for s in limit.stage_budgets
        ],
    )


def _clean_allocation(allocation) -> dict[str, int]:
    if not isinstance(allocation, dict) or not allocation:
        raise InputError('allocation: give tokens by source, e.g. {"system": 3000}')
    cleaned = {}
    for source, tokens in allocation.items():
        name = str(source).strip()
        if not name or len(name) > 64:
            raise InputError("allocation: source names must be 1–64 characters")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InputError(f"allocation.{name}: must be a whole number of tokens ≥ 0")
        cleaned[name] = tokens
    return cleaned


def _clean_omissions(omissions) -> list[dict]:
    if omissions in (None, ""):
        return []
    if not isinstance(omissions, list):
        raise InputError("omissions: must be a list of truncation or omission decisions")
    cleaned = []
    for position, item in enumerate(omissions):
        if isinstance(item, str):
            item = {"note": item}
        if not isinstance(item, dict):
            raise InputError(f"omissions[{position}]: must be an object or a sentence")
        tokens = item.get("tokens")
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0
        ):
            raise InputError(f"omissions[{position}].tokens: must be a whole number ≥ 0")
        decision = item.get("decision", "omitted")
        if decision not in ("omitted", "truncated", "summarised", "summarized"):
            raise InputError(
                f"omissions[{position}].decision: must be omitted, truncated or summarised"
            )
        cleaned.append({**item, "decision": decision})
    return cleaned


def budget_check_record(
    *,
    limit: OperatingLimit,
    allocation,
    stage: str = "",
    assembled_prompt: str = "",
    omissions=None,
    run_ref: str = "",
    source: str = "api",
    actor=None,
) -> AssemblyAudit:
    """Check an assembly against an active limit and keep it as an assembly audit."""
    if limit.status != LimitStatus.APPROVED:
        successor = limit.successors.filter(status=LimitStatus.APPROVED).first()
        hint = f" Check against #{successor.pk} instead." if successor else ""
        raise Conflict(
            f"Limit #{limit.pk} is {limit.status}; budget checks run against an approved limit.{hint}"
        )
    allocation = _clean_allocation(allocation)
    omissions = _clean_omissions(omissions)
    assembled_prompt = assembled_prompt or ""
    if len(assembled_prompt) > MAX_PROMPT_CHARS:
        raise InputError(f"assembled_prompt: longer than {MAX_PROMPT_CHARS:,} characters")
    try:
        verdict = check_budget(limit_spec(limit), allocation, stage or "")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    with transaction.atomic():
        audit = AssemblyAudit.objects.create(
            workspace=limit.workspace,
            operating_limit=limit,
            stage=stage or "",
            allocation=allocation,
            total=verdict.total,
            limit=verdict.limit,
            reserve_left=verdict.reserve_left,
            verdict=verdict.verdict,
            over_sources=verdict.over_sources,
            unbudgeted_sources=verdict.unbudgeted_sources,
            reasons=verdict.reasons,
            action=verdict.action,
            above_target=verdict.above_target,
            assembled_prompt=assembled_prompt,
            prompt_sha256=hashlib.sha256(assembled_prompt.encode()).hexdigest()
            if assembled_prompt
            else "",
            prompt_chars=len(assembled_prompt),
            omissions=omissions,
            run_ref=run_ref[:200],
            source=source,
            created_by=_user(actor),
        )
        audit_record(
            workspace=limit.workspace,
            actor=actor,
            action="budget_check.record",
            obj=audit,
            data={"operating_limit": limit.pk, "verdict": verdict.verdict, "total": verdict.total},
        )
    return audit


def verdict_dict(audit: AssemblyAudit) -> dict:
    """The check's answer as the API returns it."""
    return {
        "verdict": audit.verdict,
        "total": audit.total,
        "limit": audit.limit,
        "reserve_left": audit.reserve_left,
        "over_sources": audit.over_sources,
        "action": audit.action,
    }
