"""The survival audit's writes from the session page: a person's verdict on one item, and a
re-run for one session. Editors only; htmx gets the section back, a plain form a redirect."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from governance.errors import InputError
from governance.htmx import htmx_partial, render_region
from governance.models import Role
from governance.views import WorkspaceTemplateView
from specs import services
from specs.selectors.survival import session_survival_context, verdict_get
from traces import selectors as trace_selectors

SECTION = "specs/_survival_session.html"


class _SurvivalWrite(WorkspaceTemplateView):
    read_role = Role.EDITOR
    write_role = Role.EDITOR
    http_method_names = ["post"]

    def _answer(self, request, session, message: str, status: int = 200):
        if htmx_partial(request):
            context = {
                "session": session,
                "survival_flash": message,
                "survival_error": status >= 400,
            }
            context.update(session_survival_context(session=session, membership=self.membership))
            return render_region(request, SECTION, "survival", context, status=status)
        (messages.error if status >= 400 else messages.success)(request, message)
        url = self.wreverse("traces:session_detail", session.pk)
        return redirect(f"{url}#survival")


class VerdictCorrectView(_SurvivalWrite):
    """POST verdict=kept|lost|computed (and an optional note) for one item's verdict."""

    def post(self, request, *args, **kwargs):
        verdict = verdict_get(workspace=self.workspace, pk=kwargs["pk"])
        session = verdict.audit.compaction.session
        try:
            row = services.survival_verdict_correct(
                verdict=verdict,
                actor=request.user,
                verdict_value=request.POST.get("verdict", ""),
                note=request.POST.get("note", ""),
            )
        except InputError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.field_errors.items())
            return self._answer(request, session, problems or exc.message, status=400)
        state = "kept" if row.final_kept else "lost"
        how = "your correction" if row.is_corrected else "the computed verdict"
        return self._answer(request, session, f"{row.key}: {state} ({how}).")


class SessionSurvivalRunView(_SurvivalWrite):
    """POST: audit every compaction summary of the session again (corrections stay)."""

    def post(self, request, *args, **kwargs):
        session = trace_selectors.session_get(workspace=self.workspace, pk=kwargs["session"])
        result = services.survival_audits_run(
            workspace=self.workspace, actor=request.user, session=session
        )
        return self._answer(
            request,
            session,
            f"Audited {result.audited:,} of {result.compactions:,} compaction summaries.",
        )
