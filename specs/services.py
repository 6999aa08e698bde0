"""Writes for specifications, versions, reviews and restart packages. Atomic and audited.

Every state change of a version happens with the spec row locked (`select_for_update`), so
submissions and approvals of one spec are applied one at a time: the ordering rule that keeps
versions from competing. The stale-base check runs inside that lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from governance.errors import Conflict
from governance.models import Membership, Role, Workspace
from governance.services import audit_record
from specs import selectors
from specs.analysis.content import (
    Item,
    canonical_items,
    check_items,
    fingerprint,
    normalize_item,
    normalize_text,
)
from specs.analysis.diff import acknowledgement_keys
from specs.formats.markdown import ImportResult, MarkdownImportError, parse_markdown
from specs.formats.restart import INDICATORS, Discrepancy, Indicator, Instruction, Repository
from specs.inputs import SourceInput, VerificationInput
from specs.models import (
    RESERVED_SLUGS,
    Consequence,
    ItemAlternative,
    RestartPackage,
    SourceKind,
    Spec,
    SpecItem,
    SpecSource,
    SpecVersion,
    TextBlob,
    Verification,
    VersionStatus,
)
from specs.validators import validate_commit, validate_output_size


class SpecConflict(Conflict):
    """The request conflicts with the spec's current state (409); the body names `current`."""

    def __init__(self, message: str, *, current: SpecVersion | None = None):
        payload = {}
        if current is not None:
            payload["current_version"] = {
                "id": current.pk,
                "number": current.number,
                "fingerprint": current.fingerprint,
            }
        super().__init__(message, payload=payload)
        self.current = current


class StaleBase(SpecConflict):
    """The version supersedes something other than the current authoritative version."""

    code = "stale_base"


class SelfReviewRefused(PermissionDenied):
    """The author of a version tried to approve or reject it."""


def _validate(**checks) -> None:
    """Run field validators; their errors are raised together, keyed by field."""
    errors = {}
    for field_name, check in checks.items():
        try:
            check()
        except ValidationError as exc:
            errors[field_name] = exc.messages
    if errors:
        raise ValidationError(errors)


# --- specs -------------------------------------------------------------------


def spec_create(
    *,
    workspace: Workspace,
    title: str,
    consequence: str,
    actor,
    slug: str = "",
    summary: str = "",
    owner=None,
) -> Spec:
    title = " ".join((title or "").split())
    slug = (slug or slugify(title))[:80]
    if slug in RESERVED_SLUGS:
        raise ValidationError({"slug": f"'{slug}' is reserved for a page; choose another slug."})
    if Spec.objects.filter(workspace=workspace, slug=slug).exists():
        raise ValidationError({"slug": f"A specification with the slug '{slug}' already exists."})
    owner = owner or actor
    _require_member(workspace, owner, field="owner")
    spec = Spec(
        workspace=workspace,
        title=title,
        slug=slug,
        summary=normalize_text(summary),
        consequence=consequence,
        owner=owner,
        created_by=actor,
    )
    spec.full_clean(validate_constraints=False)
    with transaction.atomic():
        try:
            with transaction.atomic():
                spec.save()
        except IntegrityError:
            raise ValidationError({"slug": f"The slug '{slug}' was just taken."}) from None
        audit_record(
            workspace=workspace,
            actor=actor,
            action="spec.create",
            obj=spec,
            data={"slug": slug, "consequence": consequence, "owner": _username(owner)},
        )
    return spec


def spec_update(
    *, spec: Spec, actor, title: str, consequence: str, summary: str = "", owner=None
) -> Spec:
    """Change a spec's title, summary, owner or consequence (the last decides who reviews)."""
    _require_member(spec.workspace, owner or actor, field="owner")
    with transaction.atomic():
        spec = Spec.objects.select_for_update().get(pk=spec.pk)
        before = {
            "title": spec.title,
            "consequence": spec.consequence,
            "summary": spec.summary,
            "owner": _username(spec.owner),
        }
        spec.title = " ".join((title or "").split())
        spec.consequence = consequence
        spec.summary = normalize_text(summary)
        spec.owner = owner or spec.owner or actor
        spec.full_clean(validate_constraints=False)
        spec.save()
        after = {
            "title": spec.title,
            "consequence": spec.consequence,
            "summary": spec.summary,
            "owner": _username(spec.owner),
        }
        changed = {k: {"from": before[k], "to": after[k]} for k in after if before[k] != after[k]}
        if changed:
            audit_record(
                workspace=spec.workspace, actor=actor, action="spec.update", obj=spec, data=changed
            )
    return spec


# --- versions ----------------------------------------------------------------


def spec_version_create(
    *,
    spec: Spec,
    author,
    supersedes: SpecVersion | None,
    items: Sequence[Item],
    note: str = "",
    sources: Iterable[SourceInput] = (),
    audit_data: dict | None = None,
) -> SpecVersion:
    """A new draft. It must supersede the current authoritative version (or none, if none)."""
    items = _valid_items(items)
    if supersedes is not None and supersedes.spec_id != spec.pk:
        raise ValidationError({"supersedes": "Name a version of this specification."})
    with transaction.atomic():
        spec = Spec.objects.select_for_update().get(pk=spec.pk)
        current = _authoritative(spec)
        _require_current_base(supersedes, current, doing="start a version on")
        number = (spec.versions.aggregate(top=Max("number"))["top"] or 0) + 1
        version = SpecVersion.objects.create(
            workspace=spec.workspace,
            spec=spec,
            number=number,
            supersedes=supersedes,
            author=author,
            note=normalize_text(note),
            fingerprint=fingerprint(items),
        )
        _write_content(version, items, sources)
        audit_record(
            workspace=spec.workspace,
            actor=author,
            action="spec_version.create",
            obj=version,
            data={
                "number": number,
                "supersedes": supersedes.number if supersedes else None,
                "fingerprint": version.fingerprint,
                "items": len(items),
                **(audit_data or {}),
            },
        )
    return version


def spec_version_update(
    *,
    version: SpecVersion,
    actor,
    items: Sequence[Item],
    note: str = "",
    sources: Iterable[SourceInput] = (),
) -> SpecVersion:
    """Replace a draft's items, note and sources. Submitted versions are immutable."""
    items = _valid_items(items)
    with transaction.atomic():
        version = _lock_version(version)
        if not version.is_draft:
            raise SpecConflict(
                f"v{version.number} is {version.get_status_display()}; a submitted version is "
                "immutable. Start a new version from it instead.",
            )
        previous = version.fingerprint
        version.items.all().delete()
        version.sources.all().delete()
        version.note = normalize_text(note)
        version.fingerprint = fingerprint(items)
        version.save(update_fields=["note", "fingerprint", "updated_at"])
        _write_content(version, items, sources)
        audit_record(
            workspace=version.workspace,
            actor=actor,
            action="spec_version.update",
            obj=version,
            data={"from_fingerprint": previous, "fingerprint": version.fingerprint},
        )
    return version


def spec_version_discard(*, version: SpecVersion, actor) -> None:
    """Delete a draft nobody submitted."""
    with transaction.atomic():
        version = _lock_version(version)
        if not version.is_draft:
            raise SpecConflict(
                f"v{version.number} is {version.get_status_display()}; only drafts can be discarded."
            )
        audit_record(
            workspace=version.workspace,
            actor=actor,
            action="spec_version.discard",
            obj=version,
            data={"number": version.number, "fingerprint": version.fingerprint},
        )
        version.delete()


def spec_version_import(
    *,
    spec: Spec,
    author,
    markdown: str,
    supersedes: SpecVersion | None,
    note: str = "",
) -> tuple[SpecVersion, ImportResult]:
    """A new draft from the documented Markdown structure; every bad line is reported."""
    try:
        result = parse_markdown(markdown)
    except MarkdownImportError as exc:
        raise ValidationError({"markdown": [str(error) for error in exc.errors]}) from None
    sources = selectors.sources_from_tokens(
        workspace=spec.workspace, sources=result.document.sources
    )
    version = spec_version_create(
        spec=spec,
        author=author,
        supersedes=supersedes,
        items=result.document.items,
        note=note,
        sources=sources,
        audit_data={
            "imported_from": "markdown",
            "declared_fingerprint": result.declared_fingerprint,
        },
    )
    return version, result


def spec_version_submit(
    *, version: SpecVersion, actor, acknowledged_resolutions: Iterable[str] | None = None
) -> SpecVersion:
    """Submit a draft: high consequence goes to review; low consequence becomes authoritative.

    A low-consequence version that resolves open questions still needs each one acknowledged
    by key: consolidation never silently turns a question into a requirement.
    """
    with transaction.atomic():
        spec = Spec.objects.select_for_update().get(pk=version.spec_id)
        version = _lock_version(version)
        if not version.is_draft:
            raise SpecConflict(
                f"v{version.number} is already {version.get_status_display()}; only a draft "
                "can be submitted."
            )
        items = version.as_items()
        problems = check_items(items, for_submission=True).problems
        if problems:
            raise ValidationError({"items": [_describe(problem, items) for problem in problems]})
        current = _authoritative(spec)
        _require_current_base(version.supersedes, current, doing="submit")
        if current is not None and current.fingerprint == version.fingerprint:
            raise ValidationError(
                {
                    "items": f"v{version.number} has the same content as the authoritative "
                    f"v{current.number} (same fingerprint); change something or discard the draft."
                }
            )
        now = timezone.now()
        version.submitted_by = actor
        version.submitted_at = now
        if spec.consequence == Consequence.HIGH:
            version.status = VersionStatus.IN_REVIEW
            version.save(update_fields=["status", "submitted_by", "submitted_at", "updated_at"])
            audit_record(
                workspace=spec.workspace,
                actor=actor,
                action="spec_version.submit",
                obj=version,
                data={"number": version.number, "fingerprint": version.fingerprint},
            )
            return version
        resolved = _require_acknowledged(
            acknowledgement_keys(current.as_items() if current else [], items),
            acknowledged_resolutions,
            who="the submitter",
        )
        version.acknowledged_resolutions = resolved
        _make_authoritative(version, current, now)
        audit_record(
            workspace=spec.workspace,
            actor=actor,
            action="spec_version.submit",
            obj=version,
            data={"number": version.number, "fingerprint": version.fingerprint},
        )
        audit_record(
            workspace=spec.workspace,
            actor=actor,
            action="spec_version.approve",
            obj=version,
            data={
                "mode": "low consequence: authoritative on submit",
                "number": version.number,
                "fingerprint": version.fingerprint,
                "supersedes": current.number if current else None,
                "acknowledged_resolutions": resolved,
            },
        )
    return version


def spec_version_approve(
    *,
    version: SpecVersion,
    reviewer,
    acknowledged_resolutions: Iterable[str],
    comment: str = "",
) -> SpecVersion:
    """Make a version in review authoritative, superseding its predecessor atomically."""
    with transaction.atomic():
        spec = Spec.objects.select_for_update().get(pk=version.spec_id)
        version = _lock_version(version)
        if not version.is_in_review:
            raise SpecConflict(_not_in_review(version, "approved"), current=_authoritative(spec))
        _require_reviewer(spec.workspace, reviewer, version)
        current = _authoritative(spec)
        _require_current_base(version.supersedes, current, doing="approve")
        resolved = _require_acknowledged(
            acknowledgement_keys(current.as_items() if current else [], version.as_items()),
            acknowledged_resolutions,
            who="the reviewer",
        )
        now = timezone.now()
        version.reviewer = reviewer
        version.review_comment = normalize_text(comment)
        version.acknowledged_resolutions = resolved
        _make_authoritative(version, current, now)
        audit_record(
            workspace=spec.workspace,
            actor=reviewer,
            action="spec_version.approve",
            obj=version,
            data={
                "number": version.number,
                "fingerprint": version.fingerprint,
                "supersedes": current.number if current else None,
                "acknowledged_resolutions": resolved,
                "comment": version.review_comment,
            },
        )
    return version


def spec_version_reject(*, version: SpecVersion, reviewer, comment: str) -> SpecVersion:
    """Reject a version in review. The comment says what must change; it is required."""
    comment = normalize_text(comment)
    if not comment:
        raise ValidationError({"comment": "A rejection needs a comment: say what must change."})
    with transaction.atomic():
        spec = Spec.objects.select_for_update().get(pk=version.spec_id)
        version = _lock_version(version)
        if not version.is_in_review:
            raise SpecConflict(_not_in_review(version, "rejected"), current=_authoritative(spec))
        _require_reviewer(spec.workspace, reviewer, version)
        version.status = VersionStatus.REJECTED
        version.reviewer = reviewer
        version.review_comment = comment
        version.decided_at = timezone.now()
        version.save(
            update_fields=["status", "reviewer", "review_comment", "decided_at", "updated_at"]
        )
        audit_record(
            workspace=spec.workspace,
            actor=reviewer,
            action="spec_version.reject",
            obj=version,
            data={"number": version.number, "fingerprint": version.fingerprint, "comment": comment},
        )
    return version


# --- restart packages --------------------------------------------------------


def restart_package_create(
    *,
    workspace: Workspace,
    actor,
    spec_version: SpecVersion,
    repository: Repository,
    instruction: Instruction,
    completed_changes: Sequence[str] = (),
    changed_files: Sequence[str] = (),
    current_failures: Sequence[str] = (),
    verifications: Sequence[VerificationInput] = (),
    discrepancies: Sequence[Discrepancy] = (),
    indicators: Sequence[Indicator] = (),
    trace_session=None,
    title: str = "",
) -> RestartPackage:
    """Pin the authoritative version with the execution handoff and the starting instruction."""
    for indicator in indicators:
        if indicator.slug not in INDICATORS:
            raise ValidationError({"indicators": f"Unknown indicator '{indicator.slug}'."})
        if indicator.slug == "other" and not normalize_text(indicator.note):
            raise ValidationError({"indicators": "Describe the 'other' indicator in its note."})
    if not normalize_text(instruction.next_action):
        raise ValidationError({"next_action": "State the next action."})
    _validate(commit=lambda: validate_commit(repository.commit.strip()))
    for verification in verifications:
        _validate(
            commit=lambda v=verification: validate_commit(v.commit.strip()),
            output=lambda v=verification: validate_output_size(v.output),
        )
    if trace_session is not None and trace_session.workspace_id != workspace.pk:
        raise ValidationError({"trace_session": "No such trace session in this workspace."})
    with transaction.atomic():
        spec = Spec.objects.select_for_update().get(pk=spec_version.spec_id)
        version = SpecVersion.objects.get(pk=spec_version.pk)
        if version.workspace_id != workspace.pk:
            raise ValidationError({"spec_version": "No such version in this workspace."})
        if version.status == VersionStatus.SUPERSEDED:
            current = _authoritative(spec)
            raise StaleBase(
                f"v{version.number} of '{spec.title}' was superseded by v{current.number}; "
                f"a restart package pins the authoritative version (v{current.number}).",
                current=current,
            )
        if version.status != VersionStatus.AUTHORITATIVE:
            raise ValidationError(
                {
                    "spec_version": f"v{version.number} of '{spec.title}' is "
                    f"{version.get_status_display()}; a restart package pins an authoritative "
                    "version."
                }
            )
        package = RestartPackage.objects.create(
            workspace=workspace,
            title=" ".join((title or "").split())[:200]
            or f"Restart from {spec.title} v{version.number}",
            spec_version=version,
            trace_session=trace_session,
            repository_remote=repository.remote.strip(),
            branch=repository.branch.strip(),
            commit=repository.commit.strip().lower(),
            completed_changes=_texts(completed_changes),
            changed_files=[path.strip() for path in changed_files if path.strip()],
            current_failures=_texts(current_failures),
            discrepancies=[
                {
                    "claim": normalize_text(d.claim),
                    "source": normalize_text(d.source),
                    "repository_state": normalize_text(d.repository_state),
                }
                for d in discrepancies
            ],
            authoritative_sources=_texts(instruction.authoritative_sources),
            next_action=normalize_text(instruction.next_action),
            indicators=[{"slug": i.slug, "note": normalize_text(i.note)} for i in indicators],
            created_by=actor,
        )
        for position, verification in enumerate(verifications):
            artifact, stored_text = _verification_artifact(
                workspace=workspace,
                package=package,
                position=position,
                verification=verification,
                actor=actor,
            )
            Verification.objects.create(
                workspace=workspace,
                package=package,
                position=position,
                command=verification.command.strip(),
                exit_status=verification.exit_status,
                commit=verification.commit.strip().lower(),
                ran_at=verification.ran_at,
                output=text_blob_store(workspace=workspace, content=stored_text),
                artifact=artifact,
            )
        audit_record(
            workspace=workspace,
            actor=actor,
            action="restart_package.create",
            obj=package,
            data={
                "spec": spec.slug,
                "version": version.number,
                "fingerprint": version.fingerprint,
                "commit": package.commit,
                "verifications": len(verifications),
                "indicators": [i.slug for i in indicators],
                "trace_session": getattr(trace_session, "pk", None),
            },
        )
    return package


def _verification_artifact(*, workspace, package, position: int, verification, actor):
    """Keep a verification's raw output in the artifact store (redacted there), and return
    the artifact with the exact text it stored, so the package's copy holds the same bytes."""
    from artifacts.services import artifact_write
    from artifacts.storage import blob_open

    raw = verification.output.encode()
    _validate(output=lambda: validate_output_size(raw))
    artifact = artifact_write(
        workspace=workspace,
        source=raw,
        run_id=f"restart-package-{package.pk}",
        tool_call_id=f"verification-{position + 1}",
        command=verification.command.strip()[:1000],
        exit_status=verification.exit_status,
        complete=True,
        finished_at=verification.ran_at,
        actor=actor,
    )
    with blob_open(artifact.storage_name) as handle:
        stored = handle.read().decode("utf-8", errors="replace")
    return artifact, stored


def text_blob_store(*, workspace: Workspace, content: str) -> TextBlob:
    """Keep raw text verbatim, once per workspace, under its sha256."""
    raw = content.encode()
    _validate(output=lambda: validate_output_size(raw))
    digest = hashlib.sha256(raw).hexdigest()
    blob, _ = TextBlob.objects.get_or_create(
        workspace=workspace,
        sha256=digest,
        defaults={
            "size_bytes": len(raw),
            "line_count": content.count("\n") + (0 if content.endswith("\n") or not content else 1),
            "content": content,
        },
    )
    return blob


# --- helpers -----------------------------------------------------------------


def _authoritative(spec: Spec) -> SpecVersion | None:
    return SpecVersion.objects.filter(spec=spec, status=VersionStatus.AUTHORITATIVE).first()


def _lock_version(version: SpecVersion) -> SpecVersion:
    return (
        SpecVersion.objects.select_for_update(of=("self",))
        .select_related("spec", "supersedes")
        .get(pk=version.pk)
    )


def _require_current_base(
    supersedes: SpecVersion | None, current: SpecVersion | None, *, doing: str
) -> None:
    if (supersedes.pk if supersedes else None) == (current.pk if current else None):
        return
    if current is None:
        raise StaleBase(
            f"Cannot {doing} this: it supersedes v{supersedes.number}, but the specification "
            "has no authoritative version.",
            current=None,
        )
    named = f"v{supersedes.number}" if supersedes else "nothing"
    raise StaleBase(
        f"Stale base: this supersedes {named}, but v{current.number} "
        f"(sha256:{current.fingerprint[:12]}) is now authoritative. Start a new version "
        f"from v{current.number}.",
        current=current,
    )


def _require_member(workspace: Workspace, user, *, field: str) -> None:
    if not Membership.objects.filter(workspace=workspace, user=user).exists():
        raise ValidationError({field: "Choose a member of this workspace."})


def _require_reviewer(workspace: Workspace, user, version: SpecVersion) -> None:
    membership = Membership.objects.filter(workspace=workspace, user=user).first()
    if membership is None or membership.role < Role.REVIEWER:
        raise PermissionDenied("Approving or rejecting a version needs the reviewer role.")
    if version.author_id is not None and version.author_id == user.pk:
        raise SelfReviewRefused(
            f"You wrote v{version.number}; a reviewer who is not its author must decide it."
        )


def _require_acknowledged(
    needed: dict[str, list[str]], acknowledged: Iterable[str] | None, *, who: str
) -> list[str]:
    """Every resolved question and omitted settled item, acknowledged by key; returns the keys."""
    keys = [key for category_keys in needed.values() for key in category_keys]
    given = [key.strip() for key in (acknowledged or []) if key and key.strip()]
    unknown = [key for key in given if key not in keys]
    messages = []
    missing = [key for key in needed["resolved"] if key not in given]
    if missing:
        messages.append(
            f"This version resolves open question{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}; {who} must acknowledge each by key."
        )
    missing = [key for key in needed["omitted"] if key not in given]
    if missing:
        messages.append(
            f"This version drops settled item{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}; {who} must acknowledge each by key."
        )
    if unknown:
        messages.append(
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} neither resolved nor "
            "dropped by this version; acknowledge only the listed keys."
        )
    if messages:
        raise ValidationError({"acknowledged_resolutions": messages})
    return keys


def _make_authoritative(version: SpecVersion, current: SpecVersion | None, now) -> None:
    try:
        with transaction.atomic():
            if current is not None:
                current.status = VersionStatus.SUPERSEDED
                current.superseded_at = now
                current.save(update_fields=["status", "superseded_at", "updated_at"])
            version.status = VersionStatus.AUTHORITATIVE
            version.decided_at = now
            version.save()
    except IntegrityError:
        # The lock makes this unreachable in normal operation; the constraints are the backstop.
        raise SpecConflict(
            "Another version became authoritative at the same moment; reload and try again."
        ) from None


def _not_in_review(version: SpecVersion, verb: str) -> str:
    if version.status in VersionStatus.accepted():
        who = version.reviewer.username if version.reviewer else "submission (low consequence)"
        return (
            f"v{version.number} was already approved by {who}"
            + (f" at {version.decided_at:%Y-%m-%d %H:%M} UTC" if version.decided_at else "")
            + f"; it is {version.get_status_display()}."
        )
    return f"v{version.number} is {version.get_status_display()}; only a version in review can be {verb}."


def _valid_items(items: Sequence[Item]) -> list[Item]:
    """Normalised items in canonical order; problems are described in the order given."""
    items = [normalize_item(item) for item in items]
    problems = check_items(items).problems
    if problems:
        raise ValidationError({"items": [_describe(problem, items) for problem in problems]})
    return canonical_items(items)


def _describe(problem, items: Sequence[Item]) -> str:
    if problem.index is None:
        return problem.message
    key = items[problem.index].key or f"#{problem.index + 1}"
    where = f"item {key}"
    if problem.alternative is not None:
        where += f", alternative {problem.alternative + 1}"
    return f"{where} ({problem.field}): {problem.message}"


def _write_content(version: SpecVersion, items: Sequence[Item], sources: Iterable[SourceInput]):
    for position, item in enumerate(items):
        row = SpecItem.objects.create(
            workspace=version.workspace,
            version=version,
            position=position,
            key=item.key,
            kind=item.kind,
            text=item.text,
            rationale=item.rationale,
            status=item.status,
        )
        ItemAlternative.objects.bulk_create(
            ItemAlternative(
                workspace=version.workspace,
                item=row,
                position=index,
                text=alternative.text,
                evidence=alternative.evidence,
            )
            for index, alternative in enumerate(item.alternatives)
        )
    for position, source in enumerate(sources):
        if source.kind not in SourceKind.values:
            raise ValidationError({"sources": f"Unknown source kind '{source.kind}'."})
        linked = source.trace_session or source.run or source.divergence
        if linked is not None and linked.workspace_id != version.workspace_id:
            raise ValidationError({"sources": "Link trace objects of this workspace only."})
        SpecSource.objects.create(
            workspace=version.workspace,
            version=version,
            position=position,
            kind=source.kind,
            trace_session=source.trace_session,
            run=source.run,
            divergence=source.divergence,
            url=source.url if source.kind == SourceKind.REFERENCE else "",
            label=(source.label or (str(linked) if linked is not None else ""))[:300],
        )


def _texts(values: Iterable[str]) -> list[str]:
    return [text for text in (normalize_text(value) for value in values) if text]


def _username(user) -> str | None:
    return user.get_username() if user is not None else None
