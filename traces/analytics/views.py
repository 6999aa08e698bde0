"""Analytics pages: one per theme, reading cached results; and the what-if calculator."""

from __future__ import annotations

import csv
import math
from dataclasses import asdict

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode

from governance.htmx import render_region
from governance.models import JobStatus, Role
from governance.views import WorkspaceTemplateView
from traces.analysis.costs import MIN_AGENTS_STEPS
from traces.analysis.cycle import (
    CycleInputError,
    CycleParams,
    degraded_share,
    exchange_rate,
)
from traces.analytics import charts, selectors
from traces.analytics.forms import AnalyticsFilterForm, ScenarioCompareForm, WhatIfForm
from traces.analytics.recommendation_views import recommendation_context
from traces.analytics.services import SENSITIVITY_PENALTIES, analytics_refresh_queue
from traces.pricing import charts as pricing_charts
from traces.pricing.selectors import agent_type_costs, step_cost, usage_rows_cost

# (url name, tab label, full name): short labels keep the tabs on one line at 1280 px;
# the full name is the tab's title.
THEMES = [
    ("analytics:cost", "Cost", "Cost of context"),
    ("analytics:steps", "Steps", "Steps per agent"),
    ("analytics:compactions", "Compactions", "Compactions and threshold"),
    ("analytics:coverage", "Coverage", "Reference coverage"),
    ("analytics:incidents", "Incidents", "Incidents"),
    ("analytics:post_compaction", "After compaction", "Behaviour after compaction"),
    ("analytics:survival", "Survival", "What each compaction kept (survival audit)"),
    ("analytics:instruction_visibility", "Instruction visibility", "Instruction visibility"),
    ("analytics:what_if", "What-if", "What-if calculator"),
]


def theme_tabs(workspace) -> list[tuple[str, str, str, str]]:
    """The analytics tabs: (url name, label, full name, url)."""
    return [
        (name, label, title, reverse(name, args=[workspace.slug])) for name, label, title in THEMES
    ]


SEED_FALLBACK = CycleParams(65_588, 1_470, 4_382, 28)
SEED_VALUES = {
    "post_compaction_tokens": "65588",
    "growth_per_step": "1470",
    "summary_tokens": "4382",
    "penalty_steps": "28",
}
# The seed's optimum (220k), the reconciled one (314k), §7.3's 577k and two either side.
TABLE_THRESHOLDS = "150000, 220000, 314000, 577000, 900000"


class AnalyticsPage(WorkspaceTemplateView):
    """A theme page: filters, the cached result for them, and its freshness."""

    theme = ""
    write_role = Role.VIEWER  # asking for a computation changes no data

    def get_context_data(self, **kwargs):
        form = AnalyticsFilterForm(self.request.GET or None, workspace=self.workspace)
        filters = form.filters()
        if form.is_bound and not form.is_valid():
            # Filters that cannot be applied show their errors, never other filters' figures.
            return super().get_context_data(
                form=form, filters=filters, result=None, failures={}, invalid_filters=True,
                themes=self.themes(), theme=self.theme, query=self.request.GET.urlencode(),
                **kwargs,
            )  # fmt: skip
        stored = selectors.result_for(workspace=self.workspace, filters=filters)
        job = selectors.latest_job(workspace=self.workspace, filters=filters)
        running = (
            job if job is not None and job.status in (JobStatus.QUEUED, JobStatus.RUNNING) else None
        )
        current = stored is not None and stored.data_version == self.workspace.data_version
        # A computation that failed on the current traces, and that nothing has replaced.
        failed = (
            job if not current and selectors.failed_on(job, self.workspace.data_version) else None
        )
        result = stored.result if stored else None
        context = super().get_context_data(
            form=form,
            filters=filters,
            stored=stored,
            result=result,
            failures=(result or {}).get("failures") or {},
            stale=stored is not None and not current,
            running=running,
            failed=failed,
            failed_reason=selectors.failure_reason(failed) if failed else "",
            themes=self.themes(),
            theme=self.theme,
            query=self.request.GET.urlencode(),
            **kwargs,
        )
        if result is not None:
            context.update(self.figures(result))
        return context

    def themes(self) -> list[tuple[str, str, str, str]]:
        return theme_tabs(self.workspace)

    def render_to_response(self, context, **response_kwargs):
        if context.get("invalid_filters"):
            response_kwargs["status"] = 400
        return super().render_to_response(context, **response_kwargs)

    def figures(self, result: dict) -> dict:
        return {}

    def post(self, request, *args, **kwargs):
        form = AnalyticsFilterForm(request.POST, workspace=self.workspace)
        query = urlencode(
            {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken" and v}
        )
        if not form.is_valid():  # the page shows why; nothing is computed for other filters
            return redirect(request.path + (f"?{query}" if query else ""))
        job = analytics_refresh_queue(
            workspace=self.workspace, filters=form.filters(), user=request.user
        )
        messages.info(
            request, f"Computing analytics for {form.filters().describe()} (job #{job.pk})."
        )
        return redirect(request.path + (f"?{query}" if query else ""))


class CostPage(AnalyticsPage):
    template_name = "analytics/cost.html"
    theme = "analytics:cost"

    def figures(self, result):
        figures = {}
        if curve := result.get("cost_curve"):
            fit = curve.get("fit")
            figures["doubling"] = 2 ** fit["exponent"] if fit else None
            figures["cost_figure"] = charts.cost_curve(curve)
        if growth := result.get("growth"):
            figures["growth_n"] = sum(row["n"] for row in growth["rows"])
            figures["growth_figure"] = charts.growth(growth)
        if amplification := result.get("amplification"):
            figures["amplification_n"] = sum(row["n"] for row in amplification["rows"])
            figures["amplification_figure"] = charts.amplification(amplification)
        figures["dollar_cost"] = _dollar_cost(self.workspace, result)
        if (by_type := result.get("usage_by_agent_type")) is not None:
            rows = agent_type_costs(workspace=self.workspace, usage=by_type)
            figures["agent_type_costs"] = rows
            figures["agent_type_figure"] = pricing_charts.agent_type_cost(rows) if rows else None
        return figures


class StepsPage(AnalyticsPage):
    template_name = "analytics/steps.html"
    theme = "analytics:steps"

    def figures(self, result):
        steps = result.get("steps")
        if not steps:
            return {}
        if any(steps[k].get("histogram") for k in ("main", "subagents")):
            return {"steps_figure": charts.steps(steps), "steps_missing": ""}
        return {
            "steps_figure": None,
            "steps_missing": f"Main threads ({steps['main']['agents']}) and subagents "
            f"({steps['subagents']['agents']}) each number fewer than {MIN_AGENTS_STEPS} "
            "agents: no distribution is drawn.",
        }


class CompactionsPage(AnalyticsPage):
    template_name = "analytics/compactions.html"
    theme = "analytics:compactions"

    def figures(self, result):
        summary = result.get("compactions")
        figures = {
            "compactions_figure": charts.compactions(summary)
            if summary and summary["count"]
            else None
        }
        cycle = result.get("cycle")
        if cycle:
            measured = result["cycle_parameters"]
            figures["cycle_figure"] = charts.cycle(cycle["model"], tail=cycle["tail"])
            figures["sensitivity_figure"] = charts.sensitivity(
                cycle["sensitivity"],
                measured["penalty_steps"]["value"],
                measured["penalty_steps"]["ci"],
            )
            params = CycleParams(**cycle["params"])
            low, high = _exchange_thresholds(self.request, params)
            try:
                figures["exchange"] = exchange_rate(params, low, high).as_dict()
            except CycleInputError as exc:
                figures["exchange_error"] = str(exc)
        return figures


class CoveragePage(AnalyticsPage):
    template_name = "analytics/coverage.html"
    theme = "analytics:coverage"

    def figures(self, result):
        found = result.get("coverage")
        return {"coverage_figure": charts.coverage(found) if found and found["coverage"] else None}


class IncidentsPage(AnalyticsPage):
    template_name = "analytics/incidents.html"
    theme = "analytics:incidents"

    def figures(self, result):
        found = result.get("incidents")
        return {
            "incidents_figure": charts.incidents(found) if found and found["days"] else None,
            "dollar_cost": _dollar_cost(self.workspace, result),
        }


def _dollar_cost(workspace, result: dict):
    """The result's tokens by model at the current price table (None for an older result)."""
    usage = result.get("usage_by_model")
    return None if usage is None else usage_rows_cost(workspace=workspace, rows=usage)


def _exchange_thresholds(request, params: CycleParams) -> tuple[float, float]:
    try:
        low = float(request.GET.get("from_threshold") or 0)
        high = float(request.GET.get("to_threshold") or 0)
    except ValueError:
        low = high = 0
    if not (low and high and low < high):
        low = max(
            200_000.0, params.post_compaction + (params.penalty_steps + 5) * params.growth_per_step
        )
        high = max(600_000.0, low * 2)
    return low, high


class WhatIfPage(AnalyticsPage):
    """The cycle model with your own S, D, SUMM, P and tail: redraws as you type (htmx)."""

    template_name = "analytics/what_if.html"
    theme = "analytics:what_if"

    def get(self, request, *args, **kwargs):
        context = self.get_context_data(**kwargs)
        context.update(_what_if_context(request, context))
        context.update(recommendation_context(request, workspace=self.workspace))
        if context["result"] and context.get("model"):
            context.update(
                step_cost(_dollar_cost(self.workspace, context["result"]), context["model"])
            )
        return render_region(request, self.template_name, "model", context)


def _what_if_context(request, context: dict) -> dict:
    """The calculator's form (prefilled with the measured values for the page's filters,
    else seed 001's), the scenario form (prefilled with seed 001 §8.1) and, when valid, the
    model they describe, with L given, measured or the default 30."""
    measured = ((context["result"] or {}).get("cycle") or {}).get("params")
    base = CycleParams(**measured) if measured else SEED_FALLBACK
    initial = {
        "post_compaction_tokens": round(base.post_compaction),
        "growth_per_step": round(base.growth_per_step),
        "summary_tokens": round(base.summary),
        "penalty_steps": round(base.penalty_steps, 1),
        "tail_tokens": 60_000,
        "tail_penalty_steps": round(base.penalty_steps / 2, 1),
        "compare_low": 232_000,
        "compare_high": 600_000,
        "table_thresholds": TABLE_THRESHOLDS,
    }
    submitted = {k: v for k, v in request.GET.items() if k in WhatIfForm.base_fields}
    form = WhatIfForm({**{k: str(v) for k, v in initial.items()}, **submitted})
    preset = ScenarioCompareForm.preset()
    scenario_form = ScenarioCompareForm(
        {**preset, **{k: v for k, v in request.GET.items() if k in preset}}
    )
    filters_text = context["filters"].describe()
    query = {**form.data, **scenario_form.data}
    extra = {
        "what_if": form,
        "scenario_form": scenario_form,
        # §8.1 on the seed's own S, D, SUMM and P, whatever the workspace measured; the
        # rest as a fresh page. (The form is outside the redrawn region, so a link built
        # from the values typed would hold those of the page's load.)
        "preset_query": urlencode({**SEED_VALUES, **preset}),
        "prefilled_from": f"your workspace's measured values ({filters_text})"
        if measured
        else "seed 001's published values (no measured parameters yet)",
        "what_if_query": urlencode({k: v for k, v in query.items() if v not in ("", None)}),
    }
    if form.is_valid():
        disruption = selectors.cycle_disruption(
            workspace=request.workspace,
            filters=context["filters"],
            given=form.cleaned_data.get("disruption_steps"),
        )
        scenarios = scenario_form.scenarios() if scenario_form.is_valid() else None
        extra.update(_what_if(form.cleaned_data, disruption, scenarios))
    return extra


def _what_if(data: dict, disruption: dict, scenarios) -> dict:
    marks = [v for v in (data.get("compare_low"), data.get("compare_high")) if v]
    table = list(dict.fromkeys(data.get("table_thresholds") or []))
    above = [t for t in table if t > data["post_compaction_tokens"]]
    try:
        result = selectors.what_if(
            **_what_if_inputs(data, above=above, marks=marks),
            penalties=SENSITIVITY_PENALTIES,
            disruption_steps=disruption["steps"],
        )
    except CycleInputError as exc:
        return {"what_if_error": f"{exc.field}: {exc}"}
    model, tail = result.model, result.tail
    by_threshold = {row.threshold: row.as_dict() for row in model.at_thresholds}
    context = {
        "params": asdict(result.params),
        "model": model.as_dict(),
        "tail": tail,
        "exchange": result.exchange,
        "exchange_error": result.exchange_error,
        "sensitivity_rows": result.sensitivity,
        "what_if_figure": charts.cycle(model.as_dict(), tail=tail, mark=marks),
        "what_if_sensitivity": charts.sensitivity(result.sensitivity, result.params.penalty_steps),
        "tail_ratio": (tail["model"]["optimum_cost_per_step"] / model.optimum_cost_per_step)
        if tail
        else None,
        "disruption": disruption,
        "cycle_rows": [by_threshold[t] for t in above],
        "table_skipped": [t for t in table if t not in above],
        "degraded_figure": charts.degraded_share(
            _degraded_curve(result.params, disruption["steps"], model.as_dict()["curve"]),
            [by_threshold[t] for t in above],
            disruption,
        ),
    }
    if scenarios:
        context.update(_scenario_context(data, disruption, scenarios))
    return context


def _what_if_inputs(data: dict, *, above: list[int], marks: list[int]) -> dict:
    """The calculator's inputs from the form: the table's thresholds above the
    post-compaction size, with the comparison marks, and the tail and comparison when given."""
    start = data["post_compaction_tokens"]
    both = data.get("compare_low") and data.get("compare_high")
    return {
        "post_compaction_tokens": start,
        "growth_per_step": data["growth_per_step"],
        "summary_tokens": data["summary_tokens"],
        "penalty_steps": data["penalty_steps"],
        "thresholds": list(dict.fromkeys([*above, *(m for m in marks if m > start)])),
        "tail_tokens": data.get("tail_tokens"),
        "tail_penalty_steps": data.get("tail_penalty_steps") or 0,
        "compare": (data["compare_low"], data["compare_high"]) if both else None,
    }


def _scenario_context(data: dict, disruption: dict, scenarios) -> dict:
    """The scenario comparison on the form's parameters: its rows and figure, or its error."""
    base = CycleParams(
        data["post_compaction_tokens"],
        data["growth_per_step"],
        data["summary_tokens"],
        data["penalty_steps"],
    )
    try:
        rows = selectors.what_if_scenarios(base, scenarios, disruption["steps"])
    except CycleInputError as exc:
        return {"scenario_error": str(exc)}
    return {"scenario_rows": rows, "scenario_figure": charts.scenarios(rows)}


def _degraded_curve(params: CycleParams, length: float, curve: list) -> list[tuple[float, float]]:
    """The degraded share min(L, n)/n along the cost curve's thresholds (from S + D up)."""
    lowest = params.post_compaction + params.growth_per_step
    grid = [lowest, *(t for t, _ in curve if t > lowest)]
    shares = degraded_share(grid, params, length)
    return [(float(t), float(s)) for t, s in zip(grid, shares, strict=True)]


def _curve_rows(params: dict, model: dict, tail: dict | None):
    """f(T) per threshold, plain and with the preserved tail, each row with its S, D, SUMM, P."""
    s, d, summ, p = (params[k] for k in ("post_compaction", "growth_per_step", "summary", "penalty_steps"))  # fmt: skip
    for threshold, value in model["curve"]:
        yield "plain", s, d, summ, p, threshold, value
    if tail:
        for threshold, value in tail["model"]["curve"]:
            yield (
                "preserved tail",
                s + tail["tail_tokens"],
                d,
                summ,
                tail["penalty_steps"],
                threshold,
                value,
            )


def _sensitivity_rows(rows: list[dict]):
    for r in rows:
        yield (r["penalty_steps"], r["optimum_threshold"], r["optimum_cost_per_step"], *r["within_10pct"], r["floor_threshold"])  # fmt: skip


def _cycle_rows(context: dict):
    params, length = context["params"], context["disruption"]["steps"]
    for row in context["cycle_rows"]:
        yield (row["threshold"], params["post_compaction"], params["growth_per_step"], params["penalty_steps"], length,
               row["steps_per_cycle"], row["mean_window"], row["cost_per_step"], row["ratio"], row["degraded_share"])  # fmt: skip


def _scenario_rows(context: dict):
    for row in context["scenario_rows"]:
        yield tuple(row[k] for k in SCENARIO_HEADER)


CYCLE_HEADER = ["threshold", "S", "D", "P", "disruption_steps", "steps_per_cycle", "mean_window", "cost_per_step", "ratio_to_optimum", "degraded_share"]  # fmt: skip
SCENARIO_HEADER = ["name", "threshold", "preserved_tail_tokens", "post_compaction_tokens", "penalty_steps", "disruption_steps", "steps_per_cycle", "mean_window", "cost_per_step", "cost_ratio_to_first", "saving_vs_first", "degraded_share"]  # fmt: skip
CURVE_HEADER = ["scenario", "S", "D", "SUMM", "P", "threshold", "cost_per_step"]
SENSITIVITY_HEADER = ["penalty_steps", "optimum_threshold", "optimum_cost_per_step", "within_10pct_low", "within_10pct_high", "floor_threshold"]  # fmt: skip
# name -> (section of the cached result, CSV header, rows of that section)
CSV_TABLES = {
    "cost-curve": ("cost_curve", ["band", "median_cost", "agents"], lambda s: zip(s["bands"], s["median_cost"], s["agents"], strict=True)),
    "growth": ("growth", ["band", "n", "median", "mean"], lambda s: ((r["band"], r["n"], r["median"], r["mean"]) for r in s["rows"])),
    "read-amplification": ("amplification", ["band", "n", "ratio", "read", "output"], lambda s: ((r["band"], r["n"], r["ratio"], r["read"], r["output"]) for r in s["rows"])),
    "steps": ("steps", ["group", "calls_per_agent"], lambda s: ((k, v) for k in ("main", "subagents") for v in s[k]["histogram"])),
    "compactions": ("compactions", ["pre", "post"], lambda s: zip(s["pre"], s["post"] + [None] * (len(s["pre"]) - len(s["post"])), strict=False)),
    "cycle-curve": ("cycle", CURVE_HEADER, lambda s: _curve_rows(s["params"], s["model"], s["tail"]) if s else ()),
    "sensitivity": ("cycle", SENSITIVITY_HEADER, lambda s: _sensitivity_rows(s["sensitivity"]) if s else ()),
    "reference-coverage": ("coverage", ["window", "coverage"], lambda s: zip(s["grid"], s["coverage"], strict=False)),
    "incidents": ("incidents", ["agent", "label", "kind", "start_kind", "initial_context", "tokens", "share"],
                  lambda s: ((r.get("agent"), r.get("label"), r.get("kind"), r.get("start_kind"), r.get("initial_context"), r["tokens"], r["share"]) for r in s["top"])),
    "task-types": ("task_types", ["task_type", "compactions", "calls", "S", "D", "SUMM", "P", "optimum_threshold"],
                   lambda s: ((r["task_type"], r["compactions"], r["calls"], r["S"], r["D"], r["SUMM"], r["P"], r["optimum_threshold"]) for r in s)),
}  # fmt: skip
# The what-if charts are drawn from the calculator's parameters (in the query), not from
# a cached result: name -> (key of the what-if context, CSV header, rows).
WHAT_IF_CSV_TABLES = {
    "what-if-curve": ("model", CURVE_HEADER, lambda c: _curve_rows(c["params"], c["model"], c["tail"])),
    "what-if-sensitivity": ("sensitivity_rows", SENSITIVITY_HEADER, lambda c: _sensitivity_rows(c["sensitivity_rows"])),
    "what-if-cycle": ("cycle_rows", CYCLE_HEADER, _cycle_rows),
    "what-if-scenarios": ("scenario_rows", SCENARIO_HEADER, _scenario_rows),
}  # fmt: skip


class CsvView(AnalyticsPage):
    def get(self, request, *args, **kwargs):
        name = kwargs["name"]
        if name not in CSV_TABLES and name not in WHAT_IF_CSV_TABLES:
            return HttpResponse(
                f"Unknown table {name!r}; choose one of {', '.join([*CSV_TABLES, *WHAT_IF_CSV_TABLES])}.",
                status=404,
                content_type="text/plain",
            )
        context = self.get_context_data()
        if context.get("invalid_filters"):
            errors = "; ".join(
                f"{field}: {' '.join(messages)}"
                for field, messages in context["form"].errors.items()
            )
            return HttpResponse(f"Invalid filters: {errors}", status=400, content_type="text/plain")
        if name in WHAT_IF_CSV_TABLES:
            what_if = _what_if_context(request, context)
            key, header, rows = WHAT_IF_CSV_TABLES[name]
            if key not in what_if:
                errors = "; ".join(
                    f"{field}: {' '.join(messages)}"
                    for field, messages in what_if["what_if"].errors.items()
                )
                return HttpResponse(
                    f"Invalid calculator parameters: {errors or what_if.get('what_if_error')}",
                    status=400,
                    content_type="text/plain",
                )
            return _csv_response(name, header, rows(what_if))
        if context["result"] is None:
            return HttpResponse(
                "Not computed yet for these filters.", status=404, content_type="text/plain"
            )
        key, header, rows = CSV_TABLES[name]
        if reason := context["failures"].get(key):
            return HttpResponse(f"No data: {reason}", status=404, content_type="text/plain")
        return _csv_response(name, header, rows(context["result"].get(key)))


def _csv_response(name: str, header: list[str], rows) -> HttpResponse:
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    writer = csv.writer(response)
    writer.writerow(header)
    for row in rows:
        writer.writerow(
            ["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in row]
        )
    return response
