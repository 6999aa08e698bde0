"""The run viewer's pages: the viewer itself, a call's full text, marking and adjudicating."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme

from governance.errors import InputError
from governance.htmx import htmx_partial, render_region
from governance.models import Role
from governance.views import WorkspaceTemplateView
from specs.selectors.survival import attach_survival
from traces.annotations import charts, selectors, services
from traces.annotations.analysis.classes import FAILURE_CLASSES, class_label, restart_indicators
from traces.annotations.analysis.steps import segments
from traces.annotations.forms import AdjudicateForm, MarkForm
from traces.annotations.models import (
    Divergence,
    MarkKind,
)
from traces.annotations.views.common import _int, _window_param, agent_label, restart_url


class SessionViewerRedirect(WorkspaceTemplateView):
    """/annotations/sessions/<id>/ opens the main agent's steps."""

    def get(self, request, *args, **kwargs):
        session = selectors.session_get(workspace=self.workspace, pk=kwargs["session"])
        agent = selectors.main_agent(session=session)
        url = self.wreverse("annotations:agent_viewer", session.pk, agent.pk)
        query = request.GET.urlencode()
        return redirect(f"{url}?{query}" if query else url)


def _focus_class(run_marks) -> str | None:
    """The class the restart builder is offered for: the final mark's, yours, the majority's,
    or the first mark's."""
    if not run_marks:
        return None
    if run_marks.final:
        return run_marks.final.failure_class
    if run_marks.mine:
        return run_marks.mine.failure_class
    if run_marks.agreement and run_marks.agreement.majority_class:
        return run_marks.agreement.majority_class
    return run_marks.marks[0].failure_class if run_marks.marks else None


def _mark_initial(own, steps, *, step: int | None, at: int | None) -> dict:
    """The mark form starts at the step you are looking at: `?step=` (a step's "Mark" link),
    else your current mark's, else `?at=` (the selected step), else the first step shown."""
    first = steps[0].call_index if steps else None
    if not own:
        return {"call_index": next((v for v in (step, at, first) if v is not None), None)}
    return {
        "call_index": own.call_index if step is None else step,
        "failure_class": own.failure_class,
        "other_text": own.other_text,
        "confidence": own.confidence,
        "evidence": ", ".join(map(str, own.evidence_call_indexes)),
        "note": own.note,
    }


def save_mark(request, form, *, session, agent=None, run=None):
    """Validate the mark form and save it: the mark, or None with every error on the form (the
    form's own and the service's, together)."""
    form.is_valid()
    data = form.cleaned_data
    problems = services.divergence_mark_errors(
        session=session,
        agent=agent,
        run=run,
        call_index=data.get("call_index"),
        failure_class=data.get("failure_class") or None,
        confidence=data.get("confidence") or None,
        other_text=data.get("other_text") or "",
        note=data.get("note") or "",
        evidence_call_indexes=data.get("evidence"),
    )
    _add_errors(form, problems)
    if form.errors:
        return None
    try:
        mark = services.divergence_mark(
            session=session,
            annotator=request.user,
            agent=agent,
            run=run,
            call_index=data["call_index"],
            failure_class=data["failure_class"],
            other_text=data["other_text"],
            confidence=data["confidence"],
            evidence_call_indexes=data["evidence"],
            note=data["note"],
        )
    except InputError as exc:
        _add_errors(form, exc.field_errors)
        return None
    if mark.unchanged:
        messages.info(request, f"Your mark at call {mark.call_index} is unchanged.")
    elif mark.replaces_id:
        messages.success(
            request,
            f"Mark replaced: call {mark.call_index}, {class_label(mark.failure_class)} "
            "(the earlier mark is kept in the history).",
        )
    else:
        messages.success(
            request, f"Marked call {mark.call_index} as {class_label(mark.failure_class)}."
        )
    return mark


def _add_errors(form, problems: dict) -> None:
    for field, errors in problems.items():
        target = {"evidence_call_indexes": "evidence"}.get(field, field)
        target = target if target in form.fields else None
        if target is None or target not in form.errors:  # a field says one thing at a time
            form.add_error(target, errors)


def _marked_url(view, request, mark) -> str:
    query = {"at": mark.call_index}
    queue = _int(request.POST.get("queue") or request.GET.get("queue"))
    if queue:
        query["queue"] = queue
    url = view.wreverse("annotations:run_viewer", mark.session_id, mark.run_id)
    return f"{url}?{urlencode(query)}#step-{mark.call_index}"


def _strip(scope, visible, compactions, steps) -> dict:
    columns = selectors.strip(scope=scope)
    strip_marks = [
        charts.StripMark(
            m.call_index, m.context_tokens, m.failure_class, m.kind == MarkKind.ADJUDICATION
        )
        for m in visible
    ]
    indexes = set(columns["index"])
    figure = charts.strip_figure(
        columns["index"],
        columns["context"],
        marks=strip_marks,
        compactions=[k for k in compactions if k in indexes],
        window=(steps[0].call_index, steps[-1].call_index) if steps else None,
    )
    return {
        "figure": figure,
        "strip_n": len(columns["index"]),
        "strip_max": max(columns["context"]) if columns["context"] else 0,
    }


class ViewerView(WorkspaceTemplateView):
    """A run or an agent as a list of steps, a window at a time, with the context strip."""

    template_name = "annotations/viewer.html"

    def _target(self, kwargs):
        session = selectors.session_get(workspace=self.workspace, pk=kwargs["session"])
        if "run" in kwargs:
            run = selectors.run_get(session=session, pk=kwargs["run"])
            return session, run.agent, run
        return session, selectors.agent_get(session=session, pk=kwargs["agent"]), None

    def _page(self, scope, focus: int | None = None) -> tuple[int, str]:
        page = min(max(_int(self.request.GET.get("page"), 1), 1), scope.pages)
        if focus is not None:  # the step of a mark that was refused, if it is shown here
            found = selectors.page_of_call(scope=scope, call_index=focus)
            if found is not None:
                return found, ""
        at = _int(self.request.GET.get("at"))
        if at is None:
            return page, ""
        found = selectors.page_of_call(scope=scope, call_index=at)
        if found is None:
            return page, f"Call {at} is not among the steps shown here."
        return found, ""

    def get(self, request, *args, **kwargs):
        return self._render(request, *self._target(kwargs))

    def post(self, request, *args, **kwargs):
        """The mark form posts here, so a refused mark shows the viewer again (400) with every
        error and what was typed."""
        session, agent, run = self._target(kwargs)
        form = MarkForm(request.POST)
        mark = save_mark(request, form, session=session, agent=agent, run=run)
        if mark is not None:
            return redirect(_marked_url(self, request, mark))
        return self._render(request, session, agent, run, form=form, status=400)

    def _render(self, request, session, agent, run, *, form=None, status=200):
        scope = selectors.scope_for(agent=agent, run=run)
        focus = _int(request.POST.get("call_index")) if form is not None else None
        page, notice = self._page(scope, focus)
        steps = selectors.steps_window(
            scope=scope, page=page, spawns=selectors.spawn_map(session=session)
        )
        compactions = selectors.compactions_in(scope=scope)
        attach_survival(compactions.values(), session=session, membership=self.membership)
        visible = selectors.marks_visible_to(
            membership=self.membership,
            marks=selectors.marks_in_scope(scope=scope),
            asked=request.GET.get("reveal") == "1",
        )
        by_call: dict[int, list[Divergence]] = {}
        for mark in visible.marks:
            by_call.setdefault(mark.call_index, []).append(mark)
        queue_id = _int(request.GET.get("queue") or request.POST.get("queue"))
        base_query = {
            k: v for k, v in (("queue", queue_id), ("window", request.GET.get("window"))) if v
        }
        viewer_path = (
            self.wreverse("annotations:run_viewer", session.pk, run.pk)
            if run
            else self.wreverse("annotations:agent_viewer", session.pk, agent.pk)
        )
        context = {
            "session": session,
            "agent": agent,
            "agent_name": agent_label(agent),
            "run": run,
            "scope": scope,
            "page": page,
            "steps": steps,
            "rows": [
                {
                    "step": s,
                    "compaction": compactions.get(s.call_index),
                    "marks": by_call.get(s.call_index, []),
                }
                for s in steps
            ],
            "notice": notice,
            "window_first": steps[0].call_index if steps else None,
            "window_last": steps[-1].call_index if steps else None,
            "query": urlencode(base_query),
            "base_query": base_query,
            # The viewer's own path: the full-page Expand links back to the step through it.
            "viewer_path": viewer_path,
            "can_annotate": selectors.can_annotate(membership=self.membership),
        }
        if htmx_partial(request) and form is None:
            return render(request, f"{self.template_name}#steps", context)
        context.update(_strip(scope, visible.marks, compactions, steps))
        context.update(self._marking(session, agent, run, steps, queue_id, form))
        context.update(
            reveal=visible.revealed,
            hidden_count=visible.hidden,
            scope_marks=visible.marks,
        )
        return render(request, self.template_name, context, status=status)

    def _shown(self, name: str, steps) -> int | None:
        """The call number in query parameter `name`, if that step is shown."""
        value = _int(self.request.GET.get(name))
        return value if value in {s.call_index for s in steps} else None

    def _marking(self, session, agent, run, steps, queue_id, form=None) -> dict:
        """The run's marks, the mark form, the queue place and the restart link."""
        window = _window_param(self.request)
        user = self.request.user
        run_marks = selectors.run_marks(run=run, user=user, window=window) if run else None
        assignment = selectors.assignment_for_run(run=run, user=user) if run else None
        focus_class = _focus_class(run_marks)
        return {
            "agents": selectors.agents_of(session=session),
            "runs": selectors.runs_of(agent=agent),
            "spawned_at": selectors.spawning_call(agent=agent),
            "started_by": run.started_by if run and run.started_by_id else None,
            "run_marks": run_marks,
            "form": form
            or MarkForm(
                initial=_mark_initial(
                    run_marks.mine if run_marks else None,
                    steps,
                    step=self._shown("step", steps),
                    at=self._shown("at", steps),
                )
            ),
            # The form follows the step selected in the page unless its value was chosen.
            "mark_pinned": form is not None or bool(run_marks and run_marks.mine),
            "adjudicate_form": AdjudicateForm(),
            "assignment": assignment,
            "queue_id": queue_id if assignment is None else assignment.item.queue_id,
            # The builder needs an editor; a viewer would follow the link to a 403.
            "restart_url": restart_url(self.workspace, session, focus_class)
            if focus_class and self.membership.has_role(Role.EDITOR)
            else None,
            "restart_indicators": restart_indicators(focus_class or ""),
            "focus_class": focus_class,
            "focus_label": class_label(focus_class) if focus_class else "",
            "window": window,
            "is_admin": self.membership.has_role(Role.ADMIN),
            "classes": [(slug, label, text) for slug, (label, text) in FAILURE_CLASSES.items()],
        }


class CallPartView(WorkspaceTemplateView):
    """The whole of a truncated part of a step (a tool result, arguments, text, the prompt)."""

    template_name = "annotations/call_part.html"

    def get(self, request, *args, **kwargs):
        session = selectors.session_get(workspace=self.workspace, pk=kwargs["session"])
        key = request.GET.get("key", "")
        text = selectors.call_full_text(session=session, call_index=kwargs["call_index"], key=key)
        kind = key.partition(":")[0]
        context = {
            "session": session,
            "call_index": kwargs["call_index"],
            "key": key,
            "kind": kind,
            "text": text,
            "segments": segments(text)
            if kind in {"text", "thinking", "prompt", "summary"}
            else None,
            "back": _safe_next(request, request.GET.get("back")),
        }
        return render_region(request, self.template_name, "part", context)


def _safe_next(request, url: str | None) -> str | None:
    if url and url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()}):
        return url
    return None


class MarkView(WorkspaceTemplateView):
    """Mark (or replace) your first divergence on a run. The form works without JavaScript."""

    template_name = "annotations/mark.html"
    read_role = services.ANNOTATE_ROLE
    write_role = services.ANNOTATE_ROLE

    def _targets(self, request, data):
        session = selectors.session_get(workspace=self.workspace, pk=self.kwargs["session"])
        run = agent = None
        if _int(data.get("run")):
            run = selectors.run_get(session=session, pk=_int(data.get("run")))
            agent = run.agent
        elif _int(data.get("agent")):
            agent = selectors.agent_get(session=session, pk=_int(data.get("agent")))
        return session, agent, run

    def _page(self, request, session, agent, run, form, status=200):
        call_index = form["call_index"].value()
        return render(
            request,
            self.template_name,
            {
                "session": session,
                "agent": agent,
                "run": run,
                "form": form,
                "call_index": _int(call_index),
                "queue_id": _int(request.POST.get("queue") or request.GET.get("queue")),
                "classes": [(s, label, text) for s, (label, text) in FAILURE_CLASSES.items()],
            },
            status=status,
        )

    def get(self, request, *args, **kwargs):
        session, agent, run = self._targets(request, request.GET)
        initial = {"call_index": _int(request.GET.get("call_index"))}
        return self._page(request, session, agent, run, MarkForm(initial=initial))

    def post(self, request, *args, **kwargs):
        session, agent, run = self._targets(request, request.POST)
        form = MarkForm(request.POST)
        mark = save_mark(request, form, session=session, agent=agent, run=run)
        if mark is not None:
            return redirect(_marked_url(self, request, mark))
        return self._page(request, session, agent, run, form, status=400)


class AdjudicateView(WorkspaceTemplateView):
    """An admin settles a run: adopt one annotator's mark, or give the final step and class."""

    template_name = "annotations/adjudicate.html"
    read_role = services.ADJUDICATE_ROLE
    write_role = services.ADJUDICATE_ROLE

    def _context(self, run, form):
        return {
            "session": run.session,
            "run": run,
            "form": form,
            "run_marks": selectors.run_marks(run=run, user=self.request.user),
        }

    def get(self, request, *args, **kwargs):
        session = selectors.session_get(workspace=self.workspace, pk=kwargs["session"])
        run = selectors.run_get(session=session, pk=kwargs["run"])
        return render(request, self.template_name, self._context(run, AdjudicateForm()))

    def post(self, request, *args, **kwargs):
        session = selectors.session_get(workspace=self.workspace, pk=kwargs["session"])
        run = selectors.run_get(session=session, pk=kwargs["run"])
        form = AdjudicateForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            adopt = None
            if data.get("adopt") is not None:
                adopt = Divergence.objects.filter(run=run, pk=data["adopt"]).first()
                if adopt is None:
                    form.add_error(None, "That mark is not on this run.")
            if not form.errors:
                try:
                    final = services.divergence_adjudicate(
                        run=run,
                        adjudicator=request.user,
                        adopt=adopt,
                        call_index=data.get("call_index"),
                        failure_class=data.get("failure_class") or "",
                        confidence=data.get("confidence") or "",
                        other_text=data.get("other_text") or "",
                        evidence_call_indexes=data.get("evidence") or [],
                        note=data.get("note") or "",
                    )
                except InputError as exc:
                    for field, errors in exc.field_errors.items():
                        target = {"evidence_call_indexes": "evidence"}.get(field, field)
                        form.add_error(target if target in form.fields else None, errors)
                else:
                    messages.success(
                        request,
                        f"Final mark: call {final.call_index}, {class_label(final.failure_class)}.",
                    )
                    url = self.wreverse("annotations:run_viewer", session.pk, run.pk)
                    return redirect(f"{url}?at={final.call_index}#step-{final.call_index}")
        return render(request, self.template_name, self._context(run, form), status=400)
