"""The instruction-visibility page: an instruction (free text or from the ledger) in, its
share of visible thinking by session and by turns since delivery out, computed on request
or, past the on-request limit, in a job started by a POST."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect

from governance.errors import InputError
from governance.models import Role
from governance.views import WorkspaceTemplateView
from traces.analytics.forms import AnalyticsFilterForm, InstructionVisibilityForm
from traces.analytics.instruction_visibility_charts import by_turns
from traces.analytics.instruction_visibility_selectors import (
    Delivery,
    TooManyCalls,
    instruction_visibility_for,
    instruction_visibility_run_get,
    ledger_instructions,
    subject_for,
)
from traces.analytics.instruction_visibility_services import instruction_visibility_start
from traces.analytics.post_compaction_views import _spreadsheet_safe
from traces.analytics.views import _csv_response, theme_tabs

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
    """Counted while the request waits up to MAX_CALLS calls; past that, a POST starts a
    job (a run) and the page, at ?run=<id>, shows its progress, then its result."""

    template_name = "analytics/instruction_visibility.html"
    read_role = Role.VIEWER
    write_role = Role.VIEWER  # asking for a count changes no data

    def post(self, request, *args, **kwargs):
        form, filter_form, _ = self._forms(request.POST)
        if not (form.is_valid() and filter_form.is_valid()):
            return redirect(request.path)
        data = form.cleaned_data
        try:
            subject = subject_for(
                workspace=self.workspace,
                instruction=data["instruction"],
                ledger_instruction=data["ledger_instruction"],
                delivery=data["delivery"],
            )
        except InputError as exc:
            messages.error(request, exc.message)
            return redirect(request.path)
        run = instruction_visibility_start(
            workspace=self.workspace,
            subject=subject,
            filters=filter_form.filters(),
            user=request.user,
        )
        messages.info(request, f"Counting in the background (job #{run.job_id}).")
        query = {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken" and v}
        return redirect(f"{request.path}?{urlencode({**query, 'run': run.pk})}")

    def _forms(self, query):
        ledger = _ledger_choices(self.workspace)
        form = InstructionVisibilityForm(
            query or None, ledger=ledger, deliveries=list(Delivery.CHOICES.items())
        )
        return form, AnalyticsFilterForm(query or None), ledger

    def _count(self, form, filter_form) -> tuple[dict | None, TooManyCalls | None]:
        data = form.cleaned_data
        try:
            subject = subject_for(
                workspace=self.workspace,
                instruction=data["instruction"],
                ledger_instruction=data["ledger_instruction"],
                delivery=data["delivery"],
            )
            return instruction_visibility_for(
                workspace=self.workspace, filters=filter_form.filters(), subject=subject
            ), None
        except TooManyCalls as exc:
            return None, exc
        except InputError as exc:
            field = exc.payload.get("field")
            form.add_error(field if field in form.fields else None, exc.message)
        return None, None

    def get_context_data(self, **kwargs):
        query = self.request.GET
        form, filter_form, ledger = self._forms(query)
        result = too_many = run = None
        asked = bool(query.get("instruction", "").strip() or query.get("ledger_instruction"))
        if query.get("run", "").isdigit():
            run = instruction_visibility_run_get(workspace=self.workspace, pk=query["run"])
            result = run.result
        elif asked and form.is_valid() and filter_form.is_valid():
            result, too_many = self._count(form, filter_form)
        context = super().get_context_data(
            form=form,
            filter_form=filter_form,
            filters=filter_form.filters(),
            asked=asked or run is not None,
            has_ledger=bool(ledger),
            result=result,
            run=run,
            too_many=too_many,
            hidden_query=[(k, v) for k, v in query.items() if k != "run" and v],
            themes=theme_tabs(self.workspace),
            theme="analytics:instruction_visibility",
            **kwargs,
        )
        if result is not None:
            context.update(
                figure=by_turns(result) if result["overall"]["n"] else None,
                sessions_shown=result["by_session"][:SESSIONS_SHOWN],
                query=self.request.GET.urlencode(),
            )
        return context


def _counts(row: dict) -> list:
    values = [row["n"], row["calls_without_thinking"], row["thinking_blocks"]]
    for key in ("exact", "normalised"):
        rate = row[key]
        values += [rate["count"], rate["rate"], *(rate["ci"] or (None, None))]
    return values


COUNT_HEADER = [
    "n", "calls_without_thinking", "thinking_blocks",
    "exact_count", "exact_rate", "exact_ci_low", "exact_ci_high",
    "normalised_count", "normalised_rate", "normalised_ci_low", "normalised_ci_high",
]  # fmt: skip
CSV_TABLES = {
    "turns": (
        ["turns_from", "turns_to", *COUNT_HEADER],
        lambda result: ([*row["turns"], *_counts(row)] for row in result["by_turns"]),
    ),
    "sessions": (
        ["session", "external_id", "title", "project", "harness", *COUNT_HEADER],
        lambda result: (
            [
                _spreadsheet_safe(row[k])
                for k in ("session", "external_id", "title", "project", "harness")
            ]
            + _counts(row)
            for row in result["by_session"]
        ),
    ),
}


class InstructionVisibilityCsv(InstructionVisibilityPage):
    """The chart's bins or the session table as CSV, for the same query as the page."""

    def get(self, request, *args, **kwargs):
        name = kwargs["name"]
        if name not in CSV_TABLES:
            return HttpResponse(
                f"Unknown table {name!r}; choose one of {', '.join(CSV_TABLES)}.",
                status=404,
                content_type="text/plain",
            )
        context = self.get_context_data()
        if context["result"] is None:
            errors = "; ".join(
                f"{field}: {' '.join(messages)}"
                for field, messages in context["form"].errors.items()
            )
            return HttpResponse(
                errors or "Give `instruction` or `ledger_instruction`.",
                status=400,
                content_type="text/plain",
            )
        header, rows = CSV_TABLES[name]
        return _csv_response(f"instruction-visibility-{name}", header, rows(context["result"]))
