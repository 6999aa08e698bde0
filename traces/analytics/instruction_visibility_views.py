"""The instruction-visibility page: an instruction (free text or from the ledger) in, its
share of visible thinking by session and by turns since delivery out, computed on request."""

from __future__ import annotations

from django.urls import reverse

from governance.errors import InputError
from governance.models import Role
from governance.views import WorkspaceTemplateView
from traces.analytics.forms import AnalyticsFilterForm, InstructionVisibilityForm
from traces.analytics.instruction_visibility_charts import by_turns
from traces.analytics.instruction_visibility_selectors import (
    Delivery,
    instruction_visibility_for,
    ledger_instructions,
    subject_for,
)
from traces.analytics.views import THEMES

SESSIONS_SHOWN = 100
LEDGER_LABEL_CHARS = 90


def _ledger_choices(workspace) -> list[tuple[int, str]]:
    choices = []
    for row in ledger_instructions(workspace=workspace):
        text = " ".join(row.text.split())
        if len(text) > LEDGER_LABEL_CHARS:
            text = text[: LEDGER_LABEL_CHARS - 1] + "…"
        choices.append((row.pk, f"{row.revision.context_file} line {row.line_start}: {text}"))
    return choices


class InstructionVisibilityPage(WorkspaceTemplateView):
    template_name = "analytics/instruction_visibility.html"
    read_role = Role.VIEWER

    def get_context_data(self, **kwargs):
        query = self.request.GET
        filter_form = AnalyticsFilterForm(query or None)
        ledger = _ledger_choices(self.workspace)
        form = InstructionVisibilityForm(
            query or None, ledger=ledger, deliveries=list(Delivery.CHOICES.items())
        )
        result = None
        asked = bool(query.get("instruction", "").strip() or query.get("ledger_instruction"))
        if asked and form.is_valid() and filter_form.is_valid():
            data = form.cleaned_data
            try:
                subject = subject_for(
                    workspace=self.workspace,
                    instruction=data["instruction"],
                    ledger_instruction=data["ledger_instruction"],
                    delivery=data["delivery"],
                )
                result = instruction_visibility_for(
                    workspace=self.workspace, filters=filter_form.filters(), subject=subject
                )
            except InputError as exc:
                field = exc.payload.get("field")
                form.add_error(field if field in form.fields else None, exc.message)
        context = super().get_context_data(
            form=form,
            filter_form=filter_form,
            filters=filter_form.filters(),
            asked=asked,
            has_ledger=bool(ledger),
            result=result,
            themes=[
                (name, label, reverse(name, args=[self.workspace.slug])) for name, label in THEMES
            ],
            theme="analytics:instruction_visibility",
            **kwargs,
        )
        if result is not None:
            context.update(
                figure=by_turns(result) if result["overall"]["n"] else None,
                sessions_shown=result["by_session"][:SESSIONS_SHOWN],
            )
        return context
