"""Writes for specifications themselves: create, and change title, summary, owner, consequence."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from governance.errors import InputError
from governance.models import Workspace
from governance.services import audit_record
from specs.analysis.content import normalize_text
from specs.models import RESERVED_SLUGS, Spec
from specs.services._common import _require_member, _username, full_clean


def spec_create(
    *,
    workspace: Workspace,
    title: str,
    consequence: str,
    actor,
    slug: str = "",
    summary: str = "",
    owner=None,
    project: str = "",
) -> Spec:
    title = " ".join((title or "").split())
    slug = (slug or slugify(title))[:80]
    if slug in RESERVED_SLUGS:
        raise InputError.for_fields(
            {"slug": f"'{slug}' is reserved for a page; choose another slug."}
        )
    if Spec.objects.filter(workspace=workspace, slug=slug).exists():
        raise InputError.for_fields(
            {"slug": f"A specification with the slug '{slug}' already exists."}
        )
    owner = owner or actor
    _require_member(workspace, owner, field="owner")
    spec = Spec(
        workspace=workspace,
        title=title,
        slug=slug,
        summary=normalize_text(summary),
        project=(project or "").strip(),
        consequence=consequence,
        owner=owner,
        created_by=actor,
    )
    full_clean(spec)
    with transaction.atomic():
        try:
            with transaction.atomic():
                spec.save()
        except IntegrityError:
            raise InputError.for_fields({"slug": f"The slug '{slug}' was just taken."}) from None
        audit_record(
            workspace=workspace,
            actor=actor,
            action="spec.create",
            obj=spec,
            data={"slug": slug, "consequence": consequence, "owner": _username(owner)},
        )
    return spec


def spec_update(
    *,
    spec: Spec,
    actor,
    title: str,
    consequence: str,
    summary: str = "",
    owner=None,
    project: str | None = None,
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
            "project": spec.project,
        }
        spec.title = " ".join((title or "").split())
        spec.consequence = consequence
        spec.summary = normalize_text(summary)
        spec.owner = owner or spec.owner or actor
        if project is not None:
            spec.project = project.strip()
        full_clean(spec)
        spec.save()
        after = {
            "title": spec.title,
            "consequence": spec.consequence,
            "summary": spec.summary,
            "owner": _username(spec.owner),
            "project": spec.project,
        }
        changed = {k: {"from": before[k], "to": after[k]} for k in after if before[k] != after[k]}
        if changed:
            audit_record(
                workspace=spec.workspace, actor=actor, action="spec.update", obj=spec, data=changed
            )
    return spec
