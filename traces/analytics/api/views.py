"""Analytics API: the numbers behind each chart (cached, computed in jobs) and the cycle calculator."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import JobStatus, Role
from traces.analysis.cycle import SECTION_8_1, CycleInputError, Scenario
from traces.analytics import selectors
from traces.analytics.api.serializers import (
    AnalyticsEnvelopeSerializer,
    CycleRequestSerializer,
    CycleResponseSerializer,
)
from traces.analytics.forms import AnalyticsFilterForm
from traces.analytics.services import analytics_refresh_queue

SECTIONS = {
    "cost-curve": ["cost_curve"],
    "growth": ["growth"],
    "read-amplification": ["amplification"],
    "steps": ["steps"],
    "compactions": ["compactions"],
    "cycle-parameters": ["cycle_parameters", "cycle", "task_types"],
    "reference-coverage": ["coverage"],
    "incidents": ["incidents"],
    "post-compaction": ["post_compaction"],
}
FILTER_PARAMETERS = [
    OpenApiParameter("started_after", str, description="YYYY-MM-DD (call date)"),
    OpenApiParameter("started_before", str, description="YYYY-MM-DD (call date)"),
    OpenApiParameter("harness", str, description="claude-code, codex or otlp"),
    OpenApiParameter(
        "model",
        str,
        description="one model of the workspace's calls, by its whole name (the same name in "
        "another case is taken as it); any other value is a 400 naming the models containing it",
    ),
    OpenApiParameter("project", str, description="project contains"),
    OpenApiParameter(
        "task_type",
        str,
        description="building, research, qa, pr_to_merge, code_understanding, unclassified",
    ),
    OpenApiParameter(
        "exclude_forks",
        bool,
        description="true: leave out agents that started as forks of a loaded parent "
        "(start_kind = fork) from every analysis; they start high and skip the climb, which "
        "bends the cost law (default false)",
    ),
    OpenApiParameter("band", int, description="band width in tokens (default 25,000)"),
    OpenApiParameter(
        "upper_from",
        int,
        description="D is measured on steps starting at this context or above (default 200,000, "
        "seed 001 §4.2: growth per step is stable above 200k)",
    ),
    OpenApiParameter(
        "fork_bound",
        int,
        description="a subagent starting above this is flagged as forked (default 100,000)",
    ),
]


RETRY_HINT = "POST to this URL (same query) to compute it again."


class AnalyticsSectionView(APIView):
    """One analysis for the given filters. 200 with the numbers when computed (a section
    the data cannot give is null, with its reason under `failures`); 202 with the job
    computing them (analytics never run inside a request); 500 when the computation failed
    on the current traces (a read does not queue it again: POST does)."""

    section = ""
    write_role = Role.VIEWER  # asking for a computation changes no data

    def _filters(self, request):
        form = AnalyticsFilterForm(request.query_params, workspace=request.workspace)
        if request.query_params and not form.is_valid():
            return None, Response(
                {k: v for k, v in form.errors.items()}, status=status.HTTP_400_BAD_REQUEST
            )
        return form.filters(), None

    def _job_url(self, request, job) -> str:
        return request.build_absolute_uri(f"/api/v1/jobs/{job.pk}/")

    @extend_schema(
        parameters=FILTER_PARAMETERS,
        responses={
            200: AnalyticsEnvelopeSerializer,
            202: AnalyticsEnvelopeSerializer,
            500: AnalyticsEnvelopeSerializer,
        },
    )
    def get(self, request):
        filters, refused = self._filters(request)
        if refused:
            return refused
        stored = selectors.result_for(workspace=request.workspace, filters=filters)
        stale = stored is not None and stored.data_version != request.workspace.data_version
        failed = None
        if stored is None or stale:
            job = analytics_refresh_queue(
                workspace=request.workspace, filters=filters, user=request.user, retry_failed=False
            )
            if job.status == JobStatus.FAILED:
                failed = {
                    "error": selectors.failure_reason(job),
                    "job_url": self._job_url(request, job),
                }
            if stored is None and failed:
                return Response(
                    {
                        "status": "failed",
                        "detail": "Computing these analytics failed on the current traces "
                        f"and is not retried on its own. {RETRY_HINT}",
                        **failed,
                    },
                    status=status.HTTP_500_INTERNAL_SERVER_ERROR,
                )
            if stored is None:
                return Response(
                    {"status": "computing", "job_url": self._job_url(request, job)},
                    status=status.HTTP_202_ACCEPTED,
                )
        keys = SECTIONS[self.section]
        result = {key: stored.result.get(key) for key in keys}
        failures = stored.result.get("failures") or {}
        body = {
            "status": "ok",
            "stale": stale,
            "data_version": stored.data_version,
            "computed_at": stored.computed_at,
            "filters": stored.filters,
            "n_calls": stored.result.get("calls"),
            "result": result if len(result) > 1 else next(iter(result.values())),
            "failures": {key: failures[key] for key in keys if key in failures},
        }
        if failed:  # the figures are from older traces; the newer ones failed
            body.update(detail=f"Recomputing on the current traces failed. {RETRY_HINT}", **failed)
        return Response(body)

    @extend_schema(
        parameters=FILTER_PARAMETERS,
        request=None,
        responses={202: AnalyticsEnvelopeSerializer},
        summary="Compute the analytics for these filters again",
    )
    def post(self, request):
        filters, refused = self._filters(request)
        if refused:
            return refused
        job = analytics_refresh_queue(
            workspace=request.workspace, filters=filters, user=request.user
        )
        return Response(
            {"status": "computing", "job_url": self._job_url(request, job)},
            status=status.HTTP_202_ACCEPTED,
        )


PRESET_8_1 = ", ".join(
    f'{{"name": "{s.name}", "threshold": {s.threshold:.0f}, "preserved_tail_tokens": '
    f'{s.preserved_tail_tokens:.0f}, "penalty_steps": {s.penalty_steps:g}}}'
    for s in SECTION_8_1
)


class CompactionCycleView(APIView):
    """The what-if calculator: the cycle model for given S, D, SUMM and P."""

    write_role = Role.VIEWER

    @extend_schema(
        request=CycleRequestSerializer,
        responses={200: CycleResponseSerializer},
        summary="Compaction cycle model",
        description=(
            "Seed 001 §5.1: f(T) = [n(S+T)/2 + (T + SUMM) + P·S]/(n − P), n = (T − S)/D, "
            "tokens per productive step. Returns the optimum T*, the within-10% region, the "
            "floor S + P·D and the curve; and at each of `thresholds`: f(T), f(T)/f(T*), the "
            "steps per cycle n, the mean window over a cycle (S + T)/2, and the share of "
            "steps inside the post-compaction degraded region, min(L, n)/n (seed 001 §7.3: "
            "L = 30 gives 29% at 220k against 9% at 577k). L is `disruption_steps` if given, "
            "else the workspace's measured `elevated_until_step` (the behaviour-after-"
            "compaction analysis, unfiltered; `disruption` says which, with its n), else 30. "
            "`preserved_tail_tokens` raises S by a tail kept verbatim (`penalty_steps` is then "
            "the P with that tail). `scenarios` compares fixed policies, each with its own "
            "threshold, tail and P, relative to the first; seed 001 §8.1 (P not given by the "
            "seed; the measured 28 bare, half of it with the tail: 24.7% less, the seed's "
            f"25%) is: [{PRESET_8_1}]. Bad input: 400 naming the field."
        ),
    )
    def post(self, request):
        payload = CycleRequestSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        try:
            disruption = selectors.cycle_disruption(
                workspace=request.workspace, given=data["disruption_steps"]
            )
            result = selectors.what_if(
                post_compaction_tokens=data["post_compaction_tokens"],
                growth_per_step=data["growth_per_step"],
                summary_tokens=data["summary_tokens"],
                penalty_steps=data["penalty_steps"],
                thresholds=data["thresholds"],
                points=data["points"],
                preserved_tail_tokens=data["preserved_tail_tokens"],
                disruption_steps=disruption["steps"],
                scenarios=[Scenario(**row) for row in data.get("scenarios") or []],
            )
        except CycleInputError as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(
            {
                **result.model.as_dict(),
                "post_compaction_tokens": result.params.post_compaction,
                "preserved_tail_tokens": result.preserved_tail_tokens,
                "disruption": disruption,
                "scenarios": result.scenarios,
            }
        )
