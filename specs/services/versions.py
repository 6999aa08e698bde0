"""Writes for versions: drafts, Markdown import, submission, approval and rejection.

Every state change runs with the spec row locked (see `specs.services._common`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from governance.errors import Forbidden, InputError
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
from specs.inputs import SourceInput
from specs.models import (
    Consequence,
    ItemAlternative,
    SourceKind,
    Spec,
    SpecItem,
    SpecSource,
    SpecVersion,
    VersionStatus,
)
from specs.services._common import (
    SelfReviewRefused,
    SpecConflict,
    _authoritative,
    _lock_version,
    _require_current_base,
)


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
        raise InputError.for_fields({"supersedes": "Name a version of this specification."})
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
        raise InputError.for_fields({"markdown": [str(error) for error in exc.errors]}) from None
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
            raise InputError.for_fields(
                {"items": [_describe(problem, items) for problem in problems]}
            )
        current = _authoritative(spec)
        _require_current_base(version.supersedes, current, doing="submit")
        if current is not None and current.fingerprint == version.fingerprint:
            raise InputError.for_fields(
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
        raise InputError.for_fields(
            {"comment": "A rejection needs a comment: say what must change."}
        )
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


def _require_reviewer(workspace: Workspace, user, version: SpecVersion) -> None:
    membership = Membership.objects.filter(workspace=workspace, user=user).first()
    if membership is None or membership.role < Role.REVIEWER:
        raise Forbidden("Approving or rejecting a version needs the reviewer role.")
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
    messages = [
        _unacknowledged(needed["resolved"], given, "resolves open question", who),
        _unacknowledged(needed["omitted"], given, "drops settled item", who),
        _unknown_keys([key for key in given if key not in keys]),
    ]
    if messages := [message for message in messages if message]:
        raise InputError.for_fields({"acknowledged_resolutions": messages})
    return keys


def _unacknowledged(needed: list[str], given: list[str], what: str, who: str) -> str:
    missing = [key for key in needed if key not in given]
    if not missing:
        return ""
    return (
        f"This version {what}{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
        f"{who} must acknowledge each by key."
    )


def _unknown_keys(unknown: list[str]) -> str:
    if not unknown:
        return ""
    return (
        f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} neither resolved nor "
        "dropped by this version; acknowledge only the listed keys."
    )


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
        raise InputError.for_fields({"items": [_describe(problem, items) for problem in problems]})
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
            raise InputError.for_fields({"sources": f"Unknown source kind '{source.kind}'."})
        linked = source.trace_session or source.run or source.divergence
        if linked is not None and linked.workspace_id != version.workspace_id:
            raise InputError.for_fields({"sources": "Link trace objects of this workspace only."})
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
