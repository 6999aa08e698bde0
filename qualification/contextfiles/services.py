"""Writes for context files: imports, the ledger, listings, verifications, drift checks,
registrations (with the lock), trials and decision records. Every change is audited."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import date

from django.db import transaction
from django.utils import timezone

from governance.services import InputError, audit_record, job_create, job_enqueue
from qualification.contextfiles import selectors
from qualification.contextfiles.analysis import drift
from qualification.contextfiles.analysis.diff import ChangeKind, diff_instructions
from qualification.contextfiles.analysis.parsing import (
    Category,
    content_hash,
    estimate_tokens,
    parse_context_file,
)
from qualification.contextfiles.formats.listing import ListingError, read_listing
from qualification.contextfiles.formats.trials import (
    TrialFormatError,
    check_batch,
    read_trials,
)
from qualification.contextfiles.models import (
    CommandVerification,
    ContextFile,
    ContextFileRevision,
    DecisionRecord,
    DriftCheck,
    DriftFinding,
    Evaluation,
    EvaluationArm,
    Instruction,
    RepositoryListing,
    Trial,
)

MAX_FILE_BYTES = 512 * 1024
MAX_LISTING_BYTES = 100 * 1024 * 1024
MAX_OUTPUT_CHARS = 10_000
LEDGER_FIELDS = (
    "owner",
    "reason",
    "affects",
    "review_trigger",
    "deletion_condition",
    "last_reviewed_on",
    "review_due_on",
    "category",
)
CARRIED_FIELDS = LEDGER_FIELDS[:-1]
REGISTRATION_FIELDS = (
    "name",
    "revision_id",
    "primary_metric",
    "cost_measures",
    "model_name",
    "model_version",
    "harness_version",
    "decoding",
    "task_set_version",
    "expected_tasks",
    "delta",
    "margin",
    "target_power",
    "pilot_discordance",
    "notes",
)
COST_MEASURES = (
    "input_tokens",
    "output_tokens",
    "model_calls",
    "tool_calls",
    "cost_per_completed_task",
)
SMALL_TASK_SET = 80


class TrialUploadError(InputError):
    """A trial batch was refused; `errors` lists every problem with its line."""

    def __init__(self, message: str, errors: list[dict]):
        super().__init__(message)
        self.errors = errors


# --- context files and revisions ----------------------------------------------


@dataclass
class ImportResult:
    context_file: ContextFile
    revision: ContextFileRevision
    created: bool
    drift_check: DriftCheck | None = None


def context_file_import(
    *, workspace, repository: str, path: str, text: str, revision: str = "", actor=None
) -> ImportResult:
    """Import one revision of a file: parse it, diff it against the last, carry the ledger forward.

    Re-importing the same revision with the same text returns it unchanged.
    """
    repository, path, revision = repository.strip(), path.strip(), (revision or "").strip()
    if not repository:
        raise InputError("repository: name the repository the file belongs to")
    if not path:
        raise InputError("path: give the file's path in the repository, e.g. AGENTS.md")
    if len(repository) > 300 or len(path) > 300 or len(revision) > 100:
        raise InputError("repository and path may be 300 characters, revision 100")
    if not text or not text.strip():
        raise InputError("text: the file is empty")
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise InputError(f"text: the file is larger than {MAX_FILE_BYTES // 1024} KiB")
    if "\x00" in text:
        raise InputError("text: the file contains NUL bytes; is it a binary file?")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    digest = content_hash(text)
    revision = revision or f"sha256:{digest[:12]}"
    with transaction.atomic():
        context_file, file_created = ContextFile.objects.get_or_create(
            workspace=workspace,
            repository=repository,
            path=path,
            defaults={"created_by": actor if getattr(actor, "pk", None) else None},
        )
        context_file = ContextFile.objects.select_for_update().get(pk=context_file.pk)
        if file_created:
            audit_record(
                workspace=workspace, actor=actor, action="context_file.create", obj=context_file
            )
        existing = context_file.revisions.filter(revision=revision).first()
        if existing is not None:
            if existing.content_hash == digest:
                return ImportResult(context_file, existing, created=False)
            raise InputError(
                f"revision: {revision} of {context_file} was already imported with different "
                "text; give the new text its own revision (commit or content hash)"
            )
        previous = context_file.revisions.order_by("-number").first()
        parsed = parse_context_file(text)
        new_revision = ContextFileRevision.objects.create(
            workspace=workspace,
            context_file=context_file,
            number=(previous.number + 1) if previous else 1,
            revision=revision,
            content_hash=digest,
            text=text,
            token_estimate=parsed.tokens,
            instruction_count=len(parsed.instructions),
            previous=previous,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        old = list(previous.instructions.order_by("position")) if previous else []
        matches = {}
        if previous is not None:
            summary = diff_instructions(
                [i.text for i in old], [p.text for p in parsed.instructions]
            )
            new_revision.diff_counts = summary.counts
            new_revision.save(update_fields=["diff_counts"])
            matches = {c.new_index: c for c in summary.changes if c.new_index is not None}
        rows = []
        for index, parsed_instruction in enumerate(parsed.instructions):
            change = matches.get(index)
            before = old[change.old_index] if change and change.old_index is not None else None
            row = Instruction(
                workspace=workspace,
                revision=new_revision,
                position=parsed_instruction.position,
                section=parsed_instruction.section[:500],
                kind=parsed_instruction.kind,
                text=parsed_instruction.text,
                line_start=parsed_instruction.line_start,
                line_end=parsed_instruction.line_end,
                token_estimate=parsed_instruction.tokens,
                category=parsed_instruction.category.value,
                category_basis=parsed_instruction.category_basis[:300],
                previous=before,
                change=(change.kind.value if change else ChangeKind.ADDED.value),
            )
            if before is not None:
                for name in CARRIED_FIELDS:
                    setattr(row, name, getattr(before, name))
                if before.category_corrected:
                    row.category = before.category
                    row.category_corrected = True
                    row.category_basis = "set by a person on an earlier revision"
            rows.append(row)
        Instruction.objects.bulk_create(rows)
        audit_record(
            workspace=workspace,
            actor=actor,
            action="context_file.import_revision",
            obj=new_revision,
            data={
                "revision": revision,
                "number": new_revision.number,
                "instructions": len(rows),
                "diff": new_revision.diff_counts,
            },
        )
        listing = selectors.latest_listing(workspace=workspace, repository=repository)
        check = drift_check_start(revision=new_revision, listing=listing, actor=actor)
    return ImportResult(context_file, new_revision, created=True, drift_check=check)


def context_file_update_settings(*, context_file: ContextFile, review_interval_days: int, actor):
    if not 1 <= review_interval_days <= 3650:
        raise InputError("review_interval_days: choose between 1 and 3650 days")
    with transaction.atomic():
        before = context_file.review_interval_days
        context_file.review_interval_days = review_interval_days
        context_file.save(update_fields=["review_interval_days"])
        audit_record(
            workspace=context_file.workspace, actor=actor, action="context_file.update",
            obj=context_file, data={"review_interval_days": [before, review_interval_days]},
        )  # fmt: skip
    return context_file


# --- the ledger ----------------------------------------------------------------


def instruction_update_ledger(*, instruction: Instruction, actor, **changes) -> Instruction:
    """Edit the ledger entry (and category) of an instruction of the latest revision."""
    unknown = set(changes) - set(LEDGER_FIELDS)
    if unknown:
        raise InputError(f"not ledger fields: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        instruction = Instruction.objects.select_for_update().get(pk=instruction.pk)
        latest = selectors.latest_revision(context_file=instruction.revision.context_file)
        if latest is None or latest.pk != instruction.revision_id:
            raise InputError(
                f"this instruction belongs to revision {instruction.revision.revision}, not the "
                f"latest ({latest.revision if latest else '–'}); edit the latest revision's ledger"
            )
        diff = {}
        for name, value in changes.items():
            if name == "category":
                value = _category(value)
            elif name in {"last_reviewed_on", "review_due_on"}:
                value = _date(name, value)
            else:
                value = ("" if value is None else str(value)).strip()
                limit = 200 if name == "owner" else 5000
                if len(value) > limit:
                    raise InputError(f"{name}: at most {limit} characters")
            if getattr(instruction, name) != value:
                diff[name] = [_jsonable(getattr(instruction, name)), _jsonable(value)]
                setattr(instruction, name, value)
        open_evaluations = []
        if "category" in diff:
            open_evaluations = _evaluations_ablating(instruction)
            instruction.category_corrected = True
            instruction.category_basis = "set by a person"
        if (
            instruction.last_reviewed_on
            and instruction.review_due_on
            and instruction.review_due_on < instruction.last_reviewed_on
        ):
            raise InputError("review_due_on: the next review cannot be before the last one")
        if diff:
            instruction.save()
            for evaluation in open_evaluations:
                _rebuild_arm_estimates(evaluation)
            audit_record(
                workspace=instruction.workspace,
                actor=actor,
                action="instruction.update_ledger",
                obj=instruction,
                data={"changes": diff},
            )
    return instruction


def _evaluations_ablating(instruction: Instruction) -> list[Evaluation]:
    """A category decides which ablation arm holds the instruction. Once an evaluation of this
    revision has results its arms are pre-registered, so the category is fixed; before that,
    the open evaluations are returned so that their arms' token estimates follow."""
    evaluations = Evaluation.objects.filter(
        revision_id=instruction.revision_id, arms__kind=EvaluationArm.Kind.ABLATION
    ).distinct()
    locked = [e for e in evaluations if e.status == Evaluation.Status.LOCKED]
    if locked:
        raise InputError(
            f"category: evaluation #{locked[0].pk} has results and ablates this revision's "
            "categories, so they are fixed by its pre-registration; import a new revision to "
            "recategorise"
        )
    return [e for e in evaluations if e.status == Evaluation.Status.REGISTERED]


def _rebuild_arm_estimates(evaluation: Evaluation) -> None:
    instructions = list(evaluation.revision.instructions.values_list("category", "text"))
    for arm in evaluation.arms.filter(kind=EvaluationArm.Kind.ABLATION):
        arm.token_estimate = _arm_tokens(instructions, arm.categories)
        arm.save(update_fields=["token_estimate"])


def _arm_tokens(instructions: list[tuple[str, str]], categories: list[str]) -> int:
    return estimate_tokens("\n\n".join(t for c, t in instructions if c in categories))


def _category(value) -> str:
    try:
        return Category(str(value)).value
    except ValueError:
        names = ", ".join(c.value for c in Category)
        raise InputError(f"category: {value!r} is not one of {names}") from None


def _date(name: str, value):
    if value in (None, ""):
        return None
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise InputError(f"{name}: {value!r} is not a date (YYYY-MM-DD)") from None


def _jsonable(value):
    return value.isoformat() if isinstance(value, date) else value


# --- listings and verifications ------------------------------------------------


def listing_upload(*, workspace, repository: str, data: bytes, label: str = "", actor=None):
    """Store the paths of a repository from a file list or tarball. Same bytes: same listing."""
    repository = repository.strip()
    if not repository:
        raise InputError("repository: name the repository this listing is of")
    if not data:
        raise InputError("file: the listing is empty")
    if len(data) > MAX_LISTING_BYTES:
        raise InputError(f"file: larger than {MAX_LISTING_BYTES // 1024**2} MiB")
    digest = hashlib.sha256(data).hexdigest()
    existing = RepositoryListing.objects.filter(
        workspace=workspace, repository=repository, content_hash=digest
    ).first()
    if existing is not None:
        return existing
    try:
        listing = read_listing(data)
    except ListingError as exc:
        raise InputError(f"file: {exc}") from None
    with transaction.atomic():
        record = RepositoryListing.objects.create(
            workspace=workspace,
            repository=repository,
            label=label.strip()[:200],
            source_format=listing.source_format,
            content_hash=digest,
            path_count=len(listing.paths),
            paths="\n".join(sorted(listing.paths)),
            hashes=listing.hashes,
            stripped_root=listing.stripped_root,
            skipped=listing.skipped,
            skipped_count=listing.skipped_count,
            uploaded_by=actor if getattr(actor, "pk", None) else None,
        )
        audit_record(
            workspace=workspace, actor=actor, action="repository_listing.upload", obj=record,
            data={"paths": record.path_count, "format": record.source_format,
                  "skipped": record.skipped_count},
        )  # fmt: skip
    return record


def command_verification_record(
    *,
    context_file: ContextFile,
    command: str,
    passed: bool,
    exit_code: int | None = None,
    repository_revision: str = "",
    output: str = "",
    actor=None,
    via: str = "web",
) -> CommandVerification:
    command = drift.normalise_command(command or "")
    if not command:
        raise InputError("command: name the command that was run")
    if len(command) > 500:
        raise InputError("command: at most 500 characters")
    if exit_code is not None and passed != (exit_code == 0):
        raise InputError(
            f"exit_code: {exit_code} contradicts passed={passed}; a command passes when it "
            "exits with 0"
        )
    with transaction.atomic():
        record = CommandVerification.objects.create(
            workspace=context_file.workspace,
            context_file=context_file,
            command=command,
            passed=passed,
            exit_code=exit_code,
            repository_revision=repository_revision.strip()[:100],
            output=(output or "")[:MAX_OUTPUT_CHARS],
            verified_by=actor if getattr(actor, "pk", None) else None,
            verified_at=timezone.now(),
            via=via,
        )
        audit_record(
            workspace=context_file.workspace, actor=actor, action="command_verification.record",
            obj=record, data={"command": command, "passed": passed, "exit_code": exit_code},
        )  # fmt: skip
    return record


# --- drift checks ----------------------------------------------------------------


def drift_check_start(*, revision: ContextFileRevision, listing=None, actor=None) -> DriftCheck:
    """Create a drift check and its job; the task runs once the transaction commits."""
    from qualification.contextfiles.tasks import run_drift_check

    if listing is not None and listing.workspace_id != revision.workspace_id:
        raise InputError("listing: no such listing in this workspace")
    with transaction.atomic():
        check = DriftCheck.objects.create(
            workspace=revision.workspace,
            revision=revision,
            listing=listing,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        job = job_create(
            workspace=revision.workspace,
            kind="context_file_drift_check",
            user=actor,
            label=f"Drift checks: {revision}",
            params={"drift_check_id": check.pk},
            progress_total=len(drift.CHECKS),
            progress_unit="checks",
        )
        check.job = job
        check.save(update_fields=["job"])
        audit_record(
            workspace=revision.workspace, actor=actor, action="drift_check.start", obj=check,
            data={"revision": revision.revision, "listing": listing.pk if listing else None},
        )  # fmt: skip
        job_enqueue(job=job, task=run_drift_check)
    return check


def drift_check_run(job, reporter) -> None:
    """The job's work: run each check, then store the findings in one transaction."""
    check = (
        DriftCheck.objects.select_related("revision__context_file", "listing")
        .filter(pk=job.params.get("drift_check_id"), workspace=job.workspace)
        .first()
    )
    if check is None:
        raise InputError("the drift check this job was for no longer exists")
    if check.finished_at is not None:
        return
    revision = check.revision
    parsed = parse_context_file(revision.text)
    listing = selectors.listing_as_data(check.listing) if check.listing else None
    commands = drift.named_commands(parsed)
    verifications = selectors.latest_verifications(context_file=revision.context_file)
    today = timezone.localdate()
    steps = {
        "counts": lambda: drift.check_counts(parsed, listing),
        "paths": lambda: drift.check_paths(parsed, listing),
        "commands": lambda: drift.check_commands(commands, verifications, today=today),
        "generated": lambda: drift.check_generated(parsed, listing),
        "contradictions": lambda: drift.check_contradictions(parsed),
        "duplicates": lambda: drift.check_duplicates(parsed),
    }
    findings: list[drift.Finding] = []
    for name in drift.CHECKS:
        found = steps[name]()
        findings.extend(found)
        reporter.count(**{name: len(found)})
        reporter.advance()
    by_position = {i.position: i.pk for i in revision.instructions.only("pk", "position")}
    counts: dict[str, dict[str, int]] = {}
    for finding in findings:
        counts.setdefault(finding.check, {}).setdefault(finding.severity, 0)
        counts[finding.check][finding.severity] += 1
    with transaction.atomic():
        check = DriftCheck.objects.select_for_update().get(pk=check.pk)
        if check.finished_at is not None:
            return
        check.findings.all().delete()
        DriftFinding.objects.bulk_create(
            DriftFinding(
                workspace=check.workspace,
                drift_check=check,
                instruction_id=by_position.get(f.position),
                check_name=f.check,
                severity=f.severity,
                line=f.line,
                message=f.message,
                data=f.data,
            )
            for f in findings
        )
        check.counts = counts
        check.commands = [
            {"command": c.command, "line": c.line, "position": c.position} for c in commands
        ]
        check.finished_at = timezone.now()
        check.save(update_fields=["counts", "commands", "finished_at"])
    reporter.set_counts(findings=len(findings), commands=len(commands))


# --- evaluations -----------------------------------------------------------------


@dataclass
class Registration:
    """Validated registration fields, ready to save or compare."""

    values: dict
    ablations: list[dict] = field(default_factory=list)


def _registration(
    *, context_file: ContextFile, data: dict, base: Evaluation | None = None
) -> Registration:
    values = {name: getattr(base, name) for name in REGISTRATION_FIELDS} if base else {}
    values.update({k: v for k, v in data.items() if k in REGISTRATION_FIELDS or k == "revision"})
    revision = values.pop("revision", None)
    if revision is not None:
        revision_obj = (
            revision
            if isinstance(revision, ContextFileRevision)
            else context_file.revisions.filter(pk=revision).first()
        )
        if revision_obj is None or revision_obj.context_file_id != context_file.pk:
            raise InputError(f"revision: {revision!r} is not a revision of {context_file}")
        values["revision_id"] = revision_obj.pk
    if not values.get("revision_id"):
        latest = selectors.latest_revision(context_file=context_file)
        if latest is None:
            raise InputError("revision: import the file before registering an evaluation")
        values["revision_id"] = latest.pk
    for name in ("name", "model_name", "model_version", "harness_version", "task_set_version"):
        value = str(values.get(name) or "").strip()
        if not value:
            raise InputError(f"{name}: required before any result is accepted")
        if len(value) > 200:
            raise InputError(f"{name}: at most 200 characters")
        values[name] = value
    values["primary_metric"] = str(values.get("primary_metric") or "task success").strip()[:200]
    measures = values.get("cost_measures") or list(COST_MEASURES)
    if not isinstance(measures, list) or any(m not in COST_MEASURES for m in measures):
        raise InputError(f"cost_measures: choose from {', '.join(COST_MEASURES)}")
    values["cost_measures"] = list(dict.fromkeys(measures))
    decoding = values.get("decoding") or {}
    if isinstance(decoding, str):
        try:
            decoding = json.loads(decoding) if decoding.strip() else {}
        except json.JSONDecodeError as exc:
            raise InputError(f"decoding: not JSON ({exc.msg})") from None
    if not isinstance(decoding, dict):
        raise InputError('decoding: give an object such as {"temperature": 0}')
    if not decoding:
        raise InputError(
            'decoding: required; record the sampling settings, e.g. {"temperature": 0}'
        )
    values["decoding"] = decoding
    expected = values.get("expected_tasks")
    if expected in ("", None):
        values["expected_tasks"] = None
    else:
        values["expected_tasks"] = _number("expected_tasks", expected, integer=True, low=1)
    delta = values.get("delta")
    values["delta"] = 0.05 if delta in (None, "") else _number("delta", delta, low=0, high=0.99)
    margin = values.get("margin")
    if margin in (None, ""):
        small = values["expected_tasks"] is not None and values["expected_tasks"] < SMALL_TASK_SET
        margin = 0.15 if small else 0.10
    values["margin"] = _number("margin", margin, low=0.005, high=0.5)
    power = values.get("target_power")
    values["target_power"] = (
        0.8 if power in (None, "") else _number("target_power", power, low=0.5, high=0.99)
    )
    psi = values.get("pilot_discordance")
    values["pilot_discordance"] = (
        None if psi in (None, "") else _number("pilot_discordance", psi, low=0.001, high=1)
    )
    values["notes"] = str(values.get("notes") or "")[:5000]
    return Registration(values=values)


def _number(name: str, value, *, low=None, high=None, integer=False):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: {value!r} is not a number") from None
    if isinstance(value, bool) or number != number:
        raise InputError(f"{name}: {value!r} is not a number")
    if integer:
        if number != int(number):
            raise InputError(f"{name}: must be a whole number")
        number = int(number)
    if (low is not None and number < low) or (high is not None and number > high):
        raise InputError(f"{name}: must be between {low} and {high}, got {value}")
    return number


def _ablations(raw) -> list[dict]:
    """Ablation arms: [{"name": "rules-only", "categories": ["failure_prevention"]}, …]."""
    arms = []
    names = {"baseline", "full"}
    for index, item in enumerate(raw or [], start=1):
        if isinstance(item, str):
            item = {"categories": [item]}
        if not isinstance(item, dict):
            raise InputError(f"ablations[{index}]: give an object with categories")
        categories = item.get("categories") or []
        if isinstance(categories, str):
            categories = [categories]
        if not categories:
            raise InputError(f"ablations[{index}]: name at least one category to keep")
        categories = [_category(c) for c in categories]
        name = str(item.get("name") or "only-" + "-".join(categories)).strip().replace("_", "-")
        if not name or len(name) > 64 or not all(ch.isalnum() or ch == "-" for ch in name):
            raise InputError(f"ablations[{index}]: name may hold letters, digits and '-' only")
        if name in names:
            raise InputError(f"ablations[{index}]: the arm name {name!r} is already used")
        names.add(name)
        arms.append({"name": name, "categories": sorted(set(categories))})
    return arms


def _fingerprint(values: dict, ablations: list[dict]) -> str:
    payload = {k: values.get(k) for k in REGISTRATION_FIELDS} | {"ablations": ablations}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _create_evaluation(*, context_file, registration: Registration, ablations, actor, **extra):
    values = registration.values
    evaluation = Evaluation.objects.create(
        workspace=context_file.workspace,
        context_file=context_file,
        fingerprint=_fingerprint(values, ablations),
        created_by=actor if getattr(actor, "pk", None) else None,
        **values,
        **extra,
    )
    _rebuild_arms(evaluation, ablations)
    return evaluation


def evaluation_register(*, context_file: ContextFile, data: dict, actor=None) -> Evaluation:
    """Pre-register an evaluation: arms are the baseline, the full file and any ablations."""
    registration = _registration(context_file=context_file, data=data)
    ablations = _ablations(data.get("ablations"))
    with transaction.atomic():
        evaluation = _create_evaluation(
            context_file=context_file, registration=registration, ablations=ablations, actor=actor
        )
        audit_record(
            workspace=context_file.workspace, actor=actor, action="evaluation.register",
            obj=evaluation,
            data={"fingerprint": evaluation.fingerprint, "arms": ["baseline", "full"]
                  + [a["name"] for a in ablations]} | _audit_values(registration.values),
        )  # fmt: skip
    return evaluation


def _audit_values(values: dict) -> dict:
    return {k: _jsonable(v) for k, v in values.items()}


@dataclass
class ChangeResult:
    evaluation: Evaluation
    superseded: Evaluation | None
    changed: list[str]


def evaluation_change(
    *, evaluation: Evaluation, data: dict, actor=None, reason: str = ""
) -> ChangeResult:
    """Change a registration. Before results: in place. After: a new evaluation supersedes it."""
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().get(pk=evaluation.pk)
        if evaluation.status == Evaluation.Status.SUPERSEDED:
            successor = evaluation.superseded_by
            raise InputError(
                f"this registration was superseded by evaluation #{successor.pk}; change that one"
            )
        current_ablations = [
            {"name": a.name, "categories": a.categories}
            for a in evaluation.arms.filter(kind=EvaluationArm.Kind.ABLATION)
        ]
        registration = _registration(
            context_file=evaluation.context_file, data=data, base=evaluation
        )
        ablations = _ablations(data["ablations"]) if "ablations" in data else current_ablations
        changed = [
            name
            for name in REGISTRATION_FIELDS
            if registration.values[name] != getattr(evaluation, name)
        ]
        if ablations != current_ablations:
            changed.append("ablations")
        if not changed:
            return ChangeResult(evaluation, None, [])
        diff = {
            name: [_jsonable(getattr(evaluation, name)), _jsonable(registration.values[name])]
            for name in changed
            if name != "ablations"
        }
        if "ablations" in changed:
            diff["ablations"] = [current_ablations, ablations]
        if not evaluation.is_locked:
            for name, value in registration.values.items():
                setattr(evaluation, name, value)
            evaluation.fingerprint = _fingerprint(registration.values, ablations)
            evaluation.save()
            if "ablations" in changed or "revision_id" in changed:
                evaluation.arms.all().delete()
                _rebuild_arms(evaluation, ablations)
            audit_record(
                workspace=evaluation.workspace, actor=actor, action="evaluation.update",
                obj=evaluation, data={"changes": diff},
            )  # fmt: skip
            return ChangeResult(evaluation, None, changed)
        successor = _create_evaluation(
            context_file=evaluation.context_file,
            registration=registration,
            ablations=ablations,
            actor=actor,
            supersedes=evaluation,
            supersede_reason=reason.strip()[:2000]
            or f"Registration changed after results existed: {', '.join(changed)}.",
        )
        evaluation.status = Evaluation.Status.SUPERSEDED
        evaluation.save(update_fields=["status"])
        audit_record(
            workspace=evaluation.workspace, actor=actor, action="evaluation.supersede",
            obj=evaluation, data={"superseded_by": successor.pk, "changes": diff},
        )  # fmt: skip
        audit_record(
            workspace=evaluation.workspace, actor=actor, action="evaluation.register",
            obj=successor,
            data={"supersedes": evaluation.pk, "fingerprint": successor.fingerprint,
                  "changes": diff},
        )  # fmt: skip
        return ChangeResult(successor, evaluation, changed)


def _rebuild_arms(evaluation: Evaluation, ablations: list[dict]) -> None:
    revision = evaluation.revision
    instructions = list(revision.instructions.values_list("category", "text"))
    specs = [
        ("baseline", EvaluationArm.Kind.BASELINE, [], 0),
        ("full", EvaluationArm.Kind.FULL, [], revision.token_estimate),
    ] + [
        (
            a["name"],
            EvaluationArm.Kind.ABLATION,
            a["categories"],
            _arm_tokens(instructions, a["categories"]),
        )
        for a in ablations
    ]
    EvaluationArm.objects.bulk_create(
        EvaluationArm(
            workspace=evaluation.workspace, evaluation=evaluation, name=name, kind=kind,
            categories=categories, token_estimate=tokens, position=position,
        )
        for position, (name, kind, categories, tokens) in enumerate(specs)
    )  # fmt: skip


@dataclass
class TrialUploadResult:
    accepted: int
    already_recorded: int
    locked_now: bool
    batch: str


def trials_record(
    *, evaluation: Evaluation, data: bytes | str, content_type: str = "", actor=None
) -> TrialUploadResult:
    """Accept a batch of trials, all or nothing. The first accepted trial locks the registration."""
    try:
        read = read_trials(data, content_type=content_type)
    except TrialFormatError as exc:
        raise TrialUploadError(str(exc), [{"line": None, "error": str(exc)}]) from None
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().get(pk=evaluation.pk)
        if evaluation.status == Evaluation.Status.SUPERSEDED:
            raise InputError(
                f"evaluation #{evaluation.pk} was superseded by #{evaluation.superseded_by.pk}; "
                "record trials against the current registration"
            )
        arms = {arm.name: arm for arm in evaluation.arms.all()}
        baseline = next(a.name for a in arms.values() if a.kind == EvaluationArm.Kind.BASELINE)
        existing = selectors.trial_values(evaluation=evaluation)
        check = check_batch(
            read.rows,
            arms=list(arms),
            baseline=baseline,
            existing=existing,
            refused=read.refused_keys,
        )
        errors = sorted(
            read.errors + check.errors, key=lambda e: (e["line"] is not None, e["line"] or 0)
        )
        if errors:
            raise TrialUploadError(
                f"{len(errors)} problem(s); nothing was saved. First: "
                + (f"line {errors[0]['line']}: " if errors[0]["line"] else "")
                + errors[0]["error"],
                errors,
            )
        batch = uuid.uuid4().hex
        Trial.objects.bulk_create(
            Trial(
                workspace=evaluation.workspace, evaluation=evaluation, arm=arms[row.arm],
                task_id=row.task_id, repeat=row.repeat, success=row.success,
                adherence=row.adherence, input_tokens=row.input_tokens,
                output_tokens=row.output_tokens, model_calls=row.model_calls,
                tool_calls=row.tool_calls, cost=row.cost, latency_ms=row.latency_ms,
                failure_class=row.failure_class, batch=batch,
            )
            for row in check.new
        )  # fmt: skip
        locked_now = bool(check.new) and not evaluation.is_locked
        if locked_now:
            evaluation.status = Evaluation.Status.LOCKED
            evaluation.locked_at = timezone.now()
            evaluation.save(update_fields=["status", "locked_at"])
            audit_record(
                workspace=evaluation.workspace, actor=actor, action="evaluation.lock",
                obj=evaluation, data={"fingerprint": evaluation.fingerprint,
                                      "reason": "first trials accepted"},
            )  # fmt: skip
        if check.new:
            audit_record(
                workspace=evaluation.workspace, actor=actor, action="evaluation.record_trials",
                obj=evaluation,
                data={"batch": batch, "accepted": len(check.new),
                      "already_recorded": check.already_recorded},
            )  # fmt: skip
    return TrialUploadResult(len(check.new), check.already_recorded, locked_now, batch)


def decision_record(
    *, evaluation: Evaluation, action: str, rationale: str, kept: str = "", removed: str = "",
    actor=None,
) -> DecisionRecord:  # fmt: skip
    """Record what was decided after the evaluation, with the results as they stood."""
    if action not in DecisionRecord.Action.values:
        raise InputError(f"action: choose one of {', '.join(DecisionRecord.Action.values)}")
    rationale = (rationale or "").strip()
    if not rationale:
        raise InputError("rationale: say why (a decision without its reason invites reversal)")
    if action == DecisionRecord.Action.REVISE and not (kept.strip() and removed.strip()):
        raise InputError("kept/removed: a revision names what was kept and what was removed")
    if action == DecisionRecord.Action.REMOVE and not removed.strip():
        removed = "the whole file"
    results = selectors.evaluation_results(evaluation=evaluation)
    if not results.has_results:
        raise InputError("there are no results yet; record trials before deciding")
    snapshot = results.to_dict()
    with transaction.atomic():
        record = DecisionRecord.objects.create(
            workspace=evaluation.workspace,
            evaluation=evaluation,
            action=action,
            kept=kept.strip()[:5000],
            removed=removed.strip()[:5000],
            rationale=rationale[:5000],
            verdict=snapshot["verdict"],
            results=snapshot,
            decided_by=actor if getattr(actor, "pk", None) else None,
        )
        audit_record(
            workspace=evaluation.workspace, actor=actor, action="evaluation.decide", obj=record,
            data={"evaluation": evaluation.pk, "action": action, "verdict": snapshot["verdict"]},
        )  # fmt: skip
    return record
