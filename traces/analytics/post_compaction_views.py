"""Pages for behaviour after compaction: the analysis (cached, like every analytics theme)
and the workspace's correction phrase list, edited in versions."""

from __future__ import annotations

import csv

from django import forms
from django.contrib import messages
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect

from governance.models import Role
from governance.views import WorkspaceTemplateView
from traces.analysis.post_compaction import DEFAULT_PHRASE_VERSION, DEFAULT_PHRASES
from traces.analytics.forms import AnalyticsFilterForm
from traces.analytics.post_compaction_charts import post_compaction as chart
from traces.analytics.post_compaction_corrections import corrections_for
from traces.analytics.post_compaction_selectors import phrase_list_current, phrase_list_history
from traces.analytics.post_compaction_services import correction_phrases_save
from traces.analytics.views import AnalyticsPage

MATCHES_SHOWN = 200


class PostCompactionPage(AnalyticsPage):
    template_name = "analytics/post_compaction.html"
    theme = "analytics:post_compaction"

    def figures(self, result):
        section = result.get("post_compaction")
        if not section:
            return {}
        triggers = [
            {"trigger": name, "group": group, "figure": chart(group)}
            for name, group in section["by_trigger"].items()
        ]
        return {
            "pc": section,
            "pc_figure": chart(section),
            "pc_triggers": triggers,
            "pc_task_types": sorted(section["by_task_type"].items()),
            "pc_matches": section["matches"][:MATCHES_SHOWN],
            "pc_phrases": phrase_list_current(workspace=self.workspace),
        }


CSV_COLUMNS = [
    "session", "call_index", "step", "trigger", "task_type", "phrase", "matched", "excerpt",
]  # fmt: skip
CSV_EXTRA = ["phrase_list_version", "run", "call", "match"]


class _Lines:
    """A file-like object for `csv.writer` that hands each written line back."""

    def write(self, line: str) -> str:
        return line


class CorrectionsCsv(WorkspaceTemplateView):
    """Every counted correction for the page's filters, streamed as CSV: read from the
    match stored with each call (not the cached section's first 2,000), stale matches
    matched for the export (column `match`: `matched now`) without writing anything."""

    def get(self, request, *args, **kwargs):
        form = AnalyticsFilterForm(request.GET or None, workspace=self.workspace)
        if form.is_bound and not form.is_valid():
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
            return HttpResponse(
                f"Invalid filters: {problems}", status=400, content_type="text/plain"
            )
        corrections = corrections_for(workspace=self.workspace, filters=form.filters())
        response = StreamingHttpResponse(_csv_lines(corrections), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="post-compaction-corrections.csv"'
        return response


def _csv_lines(corrections):
    writer = csv.writer(_Lines())
    yield writer.writerow([*CSV_COLUMNS, *CSV_EXTRA])
    version = corrections.phrase_list_version
    for row in corrections.rows():
        yield writer.writerow(
            [
                *(_spreadsheet_safe(row[k]) for k in CSV_COLUMNS),
                version,
                row["run"],
                row["call"],
                row["match"],
            ]
        )


def _spreadsheet_safe(value):
    """Operator text that a spreadsheet would read as a formula gets a leading quote."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


class PhraseListForm(forms.Form):
    phrases = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 18, "cols": 50}),
        help_text="One phrase per line. Matching ignores case and runs of spaces, and respects word "
        'boundaries ("no," does not match "casino,").',
    )
    note = forms.CharField(
        required=False, max_length=500, help_text="Why this version (kept in the audit log)."
    )


class PhraseListPage(WorkspaceTemplateView):
    """The correction phrase list: its current version, its history, and (editors) a new version."""

    template_name = "analytics/correction_phrases.html"
    write_role = Role.EDITOR

    def get_context_data(self, **kwargs):
        current = phrase_list_current(workspace=self.workspace)
        form = kwargs.pop("form", None) or PhraseListForm(
            initial={"phrases": "\n".join(current.phrases)}
        )
        return super().get_context_data(
            current=current,
            history=phrase_list_history(workspace=self.workspace),
            default_version=DEFAULT_PHRASE_VERSION,
            default_phrases=DEFAULT_PHRASES,
            form=form,
            can_edit=self.membership.role >= Role.EDITOR,
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        form = PhraseListForm(request.POST)
        if not form.is_valid():
            return self.render_to_response(self.get_context_data(form=form), status=400)
        row = correction_phrases_save(
            workspace=self.workspace,
            phrases=form.cleaned_data["phrases"].splitlines(),
            note=form.cleaned_data["note"],
            actor=request.user,
        )
        messages.success(
            request,
            f"Saved version {row.version} ({len(row.phrases)} phrases). The analytics are being "
            "computed again with it.",
        )
        return redirect(request.path)
