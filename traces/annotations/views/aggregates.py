"""The divergence aggregates page and its CSV downloads."""

from __future__ import annotations

import csv

from django.http import HttpResponse

from governance.htmx import htmx_partial
from governance.views import WorkspaceListView, WorkspaceTemplateView
from traces.annotations import charts, selectors
from traces.annotations.analysis import aggregates
from traces.annotations.analysis.classes import FAILURE_CLASSES
from traces.annotations.filters import DivergenceFilter
from traces.annotations.models import (
    Divergence,
)
from traces.annotations.views.common import _int, _window_param
from traces.models import Run


def _basis(request) -> str:
    return "marks" if request.GET.get("basis") == "marks" else "resolved"


def _band_width(request) -> int:
    width = _int(request.GET.get("band"), aggregates.DEFAULT_BAND)
    return width if width in aggregates.BAND_CHOICES else aggregates.DEFAULT_BAND


class DivergenceListView(WorkspaceListView):
    """Every current mark (filterable), with the aggregates over the filtered marks."""

    template_name = "annotations/divergence_list.html"
    filterset_class = DivergenceFilter
    sort_fields = {
        "created": "created_at",
        "context": "context_tokens",
        "class": "failure_class",
        "call": "call_index",
    }
    default_sort = "-created"

    def get_queryset(self):
        return selectors.divergences_for(workspace=self.workspace)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if htmx_partial(self.request):
            return context
        filterset = kwargs.get("filterset")
        marks = (
            filterset.qs
            if filterset is not None and filterset.is_bound and filterset.is_valid()
            else self.get_queryset()
        )
        width, basis, window = (
            _band_width(self.request),
            _basis(self.request),
            _window_param(self.request),
        )
        report = selectors.band_report(marks=marks, width=width, basis=basis, window=window)
        models = selectors.models_marked(points=report.points)
        lab_model = self.request.GET.get("lab_model") or (models[0][0] if models else "")
        lab, lab_fig = self._lab(report, lab_model)
        params = self.request.GET.copy()
        for key in ("page", "sort"):
            params.pop(key, None)
        context.update(
            report=report,
            band_fig=charts.band_figure(report.table) if report.table.n else None,
            dist_fig=charts.distribution_figure(
                [p.context for p in report.points], report.distribution
            )
            if report.points
            else None,
            by_class=_by_class(report.points),
            class_labels={slug: label for slug, (label, _) in FAILURE_CLASSES.items()},
            band_choices=aggregates.BAND_CHOICES,
            band=width,
            basis=basis,
            window=window,
            models=models,
            lab_model=lab_model,
            lab=lab,
            lab_fig=lab_fig,
            csv_query=params.urlencode(),
            total_marks=Divergence.objects.filter(workspace=self.workspace).count(),
            recent_sessions=selectors.recent_sessions(workspace=self.workspace),
        )
        return context

    def _lab(self, report, lab_model: str):
        """The lab comparison for `lab_model` ('' for none) and its figure, when it has one."""
        if not lab_model:
            return None, None
        lab = selectors.lab_report(workspace=self.workspace, points=report.points, model=lab_model)
        if lab.comparison is None:
            return lab, None
        return lab, charts.lab_figure(lab.reference, lab.family, lab.contexts, lab.comparison)


def _by_class(points) -> list[dict]:
    """The distribution of the marks' context sizes per failure class that has marks."""
    rows = []
    for slug, (label, _) in FAILURE_CLASSES.items():
        values = [p.context for p in points if p.failure_class == slug]
        if values:
            d = aggregates.distribution(values)
            rows.append(
                {"slug": slug, "label": label, "n": d.n, "median": d.median, "q1": d.q1, "q3": d.q3}
            )
    return rows


class _CsvView(WorkspaceTemplateView):
    filename = "data.csv"

    def marks(self):
        marks = selectors.divergences_for(workspace=self.workspace)
        filterset = DivergenceFilter(self.request.GET or None, queryset=marks, request=self.request)
        return filterset.qs if filterset.is_bound and filterset.is_valid() else marks

    def rows(self):
        raise NotImplementedError

    def get(self, request, *args, **kwargs):
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{self.filename}"'
        writer = csv.writer(response)
        for row in self.rows():
            writer.writerow(row)
        return response


class DivergencePointsCsv(_CsvView):
    """One row per divergence counted by the aggregates (resolved per run, or every mark)."""

    filename = "divergences.csv"

    def rows(self):
        points, _ = selectors.resolved(
            marks=self.marks(), window=_window_param(self.request), basis=_basis(self.request)
        )
        runs = {
            r.pk: r
            for r in Run.objects.filter(pk__in=[p.run_id for p in points]).select_related("session")
        }
        yield ["mark_id", "kind", "session", "external_id", "run", "call_index", "failure_class",
               "context_tokens", "model"]  # fmt: skip
        for p in sorted(points, key=lambda p: (p.run_id, p.step)):
            run = runs[p.run_id]
            yield [
                p.id, "adjudication" if p.adjudication else "mark", run.session_id,
                run.session.external_id, p.run_id, p.step, p.failure_class, p.context, p.model,
            ]  # fmt: skip


class DivergenceBandsCsv(_CsvView):
    filename = "divergence-by-band.csv"

    def rows(self):
        report = selectors.band_report(
            marks=self.marks(),
            width=_band_width(self.request),
            basis=_basis(self.request),
            window=_window_param(self.request),
        )
        yield ["band_lower", "band_upper", "n", *report.table.classes]
        for band in report.table.bands:
            yield [band.lower, band.upper, band.n, *(band.counts[c] for c in report.table.classes)]
