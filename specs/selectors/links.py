"""Reads of the trace objects a spec or a package links to, inside the workspace."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q

from governance.errors import InputError
from governance.models import Workspace
from specs.formats.markdown import Source
from specs.inputs import SourceInput
from specs.models import (
    SourceKind,
)
from traces.annotations.models import Divergence
from traces.models import Run, Session


def trace_session_for(*, workspace: Workspace, pk) -> Session | None:
    try:
        return Session.objects.for_workspace(workspace).filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        return None


def trace_sessions_matching(*, workspace: Workspace, text: str, limit: int = 20) -> list[Session]:
    """Sessions whose id starts with `text`, or whose title or project contains it, most
    recent first; with no text, the most recent ones."""
    sessions = Session.objects.for_workspace(workspace)
    text = (text or "").strip()
    if text:
        sessions = sessions.filter(
            Q(external_id__istartswith=text) | Q(title__icontains=text) | Q(project__icontains=text)
        )
    return list(sessions.order_by("-started_at", "-id")[:limit])


def trace_session_label(session: Session) -> str:
    """How a person recognises a session: its short id, title or project, and start."""
    what = session.title or session.project or "untitled"
    when = f", {session.started_at:%Y-%m-%d %H:%M}" if session.started_at else ""
    return f"{session.external_id[:8]} ({what}{when})"


def trace_session_resolve(*, workspace: Workspace, text: str) -> Session:
    """The one session `text` names: its whole id, else the only session whose id starts
    with it or whose title or project contains it. InputError says which when it is none
    or several."""
    text = (text or "").strip()
    exact = list(Session.objects.for_workspace(workspace).filter(external_id=text)[:2])
    if len(exact) == 1:
        return exact[0]
    shown = 5
    matches = trace_sessions_matching(workspace=workspace, text=text, limit=shown + 1)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InputError(
            f"No trace session in this workspace has an id starting with “{text}” or a title "
            "or project containing it."
        )
    count = f"more than {shown}" if len(matches) > shown else str(len(matches))
    listed = "; ".join(trace_session_label(session) for session in matches[:shown])
    raise InputError(
        f"“{text}” matches {count} trace sessions: {listed}. Type more of the id, or choose "
        "one from the suggestions."
    )


def trace_run_for(*, workspace: Workspace, pk) -> Run | None:
    try:
        return Run.objects.for_workspace(workspace).filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        return None


def divergence_for(*, workspace: Workspace, pk) -> Divergence | None:
    try:
        return Divergence.objects.for_workspace(workspace).filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        return None


def sources_from_tokens(*, workspace: Workspace, sources: Iterable[Source]) -> list[SourceInput]:
    """Resolve Markdown source tokens inside the workspace; unknown ids are input errors."""
    resolved, errors = [], []
    for source in sources:
        if source.kind == "url":
            resolved.append(SourceInput(SourceKind.REFERENCE, url=source.ref, label=source.label))
        elif source.kind == "trace_session":
            session = trace_session_for(workspace=workspace, pk=source.ref)
            if session is None:
                errors.append(f"{source.token}: no such trace session in this workspace.")
            else:
                resolved.append(
                    SourceInput(SourceKind.TRACE_SESSION, trace_session=session, label=source.label)
                )
        elif source.kind == "trace_run":
            run = trace_run_for(workspace=workspace, pk=source.ref)
            if run is None:
                errors.append(f"{source.token}: no such trace run in this workspace.")
            else:
                resolved.append(SourceInput(SourceKind.TRACE_RUN, run=run, label=source.label))
        elif source.kind == "trace_divergence":
            divergence = divergence_for(workspace=workspace, pk=source.ref)
            if divergence is None:
                errors.append(f"{source.token}: no such divergence mark in this workspace.")
            else:
                resolved.append(
                    SourceInput(SourceKind.DIVERGENCE, divergence=divergence, label=source.label)
                )
    if errors:
        raise InputError.for_fields({"sources": errors})
    return resolved
