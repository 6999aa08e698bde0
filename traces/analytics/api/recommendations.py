"""API: the recommended auto-compact threshold for a model and task type (issue 19)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import JobStatus, Role
from traces.analysis.cycle import MAX_TOKENS, CycleInputError
from traces.analysis.task_types import LABELS
from traces.analytics import selectors
from traces.analytics.recommendation_selectors import compaction_recommendation
from traces.analytics.services import analytics_refresh_queue

DESCRIPTION = """\
The auto-compact threshold to set for one model and task type, and the exact setting to
paste into each harness.

**How it is computed.** The compaction-cycle optimum T* (seed 001 §5.1: f(T) = [n(S+T)/2 +
(T + SUMM) + P·S]/(n − P), n = (T − S)/D) on the workspace's measured S, D, SUMM and P: the
cached analytics for exactly `model` (the whole model name, as the analytics filter)
and `task_type`. T* is rounded to the nearest 1,000 tokens. Its interval is the percentile
bootstrap of T* over joint replicates of the four parameters when the analytics have one,
else the optimum at the parameters' interval ends (T* rises with each of them; both are in
the answer, `optimum_interval_method` says which is `optimum_interval`). Then it is
**clipped** below the qualified ECL minus the approved reserve and below the approved
limit's own maximum context minus the same reserve, for the model's approved operating
limit: `bounds` gives both (`ecl`, `max_context`), `ceiling` the lower, `clipped` whether
clipping applied and `clipped_by` which bound did it (`ecl` or `max_context`; the ECL when
both are equal; null when not clipped). The ECL is the weakest family's from the limit's
justification; when the justification has none, only the maximum context bounds it
(`ecl_source` says which, `ecl_established` is false). With no approved limit, the optimum
is returned unclipped and `missing` says so.

**Beside it**, for the recommendation and for the setting in use: tokens per 1,000
productive steps (1,000·f(T)) and the share of steps within L steps after a compaction,
min(L, n)/n, with their ranges over the 16 combinations of the parameters' interval ends.
L is measured (behaviour after compaction) or seed 001's 30 (`disruption` says which). The
setting in use is `in_use` if given, else the value Codex reports
(`auto_compact_token_limit` of codex.conversation_starts) on the most recent sessions of
the model, else absent.

**Settings.** Claude Code: `/autocompact <tokens>` (saves `autoCompactWindow`) or
`CLAUDE_CODE_AUTO_COMPACT_WINDOW=<tokens>`; it takes 100,000–1,000,000 tokens, so outside
that range `claude.settable` is false with the reason. Codex: `model_auto_compact_token_limit
= <tokens>` in `~/.codex/config.toml`.

**Answers.** 200 `status: ok` with the recommendation. 200 `status: insufficient_data` when
the analytics ran but cannot give S, D, SUMM or P: `missing` lists why (e.g. too few
compactions, too few steps above 200k). 202 `status: computing` when the analytics for these
filters have not been computed: they are queued, `job_url` follows them. 400 naming the
parameter for a missing `model`, an unknown `task_type` or an unusable `in_use`.
"""


class RecommendationQuerySerializer(serializers.Serializer):
    model = serializers.CharField(
        max_length=200, help_text="A model name, e.g. claude-sonnet-4-5 (required)."
    )
    task_type = serializers.ChoiceField(
        choices=[("", "all task types"), *LABELS.items()],
        required=False,
        default="",
        help_text="One of " + ", ".join(LABELS) + "; empty for all task types.",
    )
    workload = serializers.CharField(
        max_length=200,
        required=False,
        default="",
        allow_blank=True,
        help_text="The workload whose approved limit applies; default: the strictest.",
    )
    in_use = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TOKENS,
        required=False,
        allow_null=True,
        default=None,
        help_text="The auto-compact threshold in use, in tokens, to compare with.",
    )


class RecommendationResponseSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "insufficient_data", "computing"])
    model = serializers.CharField()
    task_type = serializers.CharField()
    missing = serializers.ListField(child=serializers.CharField())
    threshold = serializers.IntegerField(
        allow_null=True, help_text="The setting to paste, in tokens."
    )
    clipped_by = serializers.ChoiceField(
        choices=["ecl", "max_context"],
        allow_null=True,
        help_text="The bound that clipped the optimum: the qualified ECL or the approved "
        "limit's maximum context, each minus the reserve; null when not clipped.",
    )
    recommendation = serializers.JSONField(
        allow_null=True,
        help_text="optimum, optimum_interval (+ method), interval_ends, bounds, ceiling, "
        "clipped, clipped_by, "
        "threshold, threshold_interval, floor, disruption_steps, recommended and in_use "
        "(tokens_per_1000_steps, tokens_range, degraded_share, degraded_range, "
        "steps_per_cycle, ratio_to_optimum), notes, claude, codex.",
    )
    parameters = serializers.JSONField(allow_null=True, help_text="S, D, SUMM, P with ci and n.")
    compactions = serializers.IntegerField(allow_null=True)
    disruption = serializers.JSONField(allow_null=True)
    limit = serializers.JSONField(allow_null=True)
    in_use = serializers.JSONField(allow_null=True)
    stale = serializers.BooleanField()
    job_url = serializers.CharField(required=False)


class CompactionRecommendationView(APIView):
    write_role = Role.VIEWER

    @extend_schema(
        summary="Recommended auto-compact threshold for a model and task type",
        description=DESCRIPTION,
        parameters=[
            OpenApiParameter("model", str, required=True, description="Model name (whole)."),
            OpenApiParameter(
                "task_type", str, description="One of " + ", ".join(LABELS) + "; empty: all."
            ),
            OpenApiParameter("workload", str, description="Workload of the approved limit."),
            OpenApiParameter("in_use", int, description="The threshold in use, in tokens."),
        ],
        responses={
            200: RecommendationResponseSerializer,
            202: RecommendationResponseSerializer,
        },
    )
    def get(self, request):
        query = RecommendationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        model = data["model"].strip()
        if not model:
            return Response(
                {"model": ["give a model name, e.g. ?model=claude-sonnet-4-5."]},
                status=status.HTTP_400_BAD_REQUEST,
            )
        try:
            answer = compaction_recommendation(
                workspace=request.workspace,
                model=model,
                task_type=data["task_type"],
                workload=data["workload"].strip(),
                in_use=data["in_use"],
            )
        except CycleInputError as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        rec = answer.recommendation
        body = {
            "status": answer.status,
            "model": answer.model,
            "task_type": answer.task_type,
            "missing": answer.missing,
            "threshold": rec.threshold if rec else None,
            "clipped_by": rec.clipped_by if rec else None,
            "recommendation": rec.as_dict() if rec else None,
            "parameters": answer.parameters,
            "compactions": answer.compactions,
            "disruption": answer.disruption,
            "limit": answer.limit,
            "in_use": answer.in_use,
            "stale": answer.stale,
        }
        if answer.status != "not_computed":
            return Response(body)
        job = analytics_refresh_queue(
            workspace=request.workspace,
            filters=answer.filters,
            user=request.user,
            retry_failed=False,
        )
        body["job_url"] = request.build_absolute_uri(f"/api/v1/jobs/{job.pk}/")
        if job.status == JobStatus.FAILED:
            body["status"] = "insufficient_data"
            body["missing"].append(f"computing them failed: {selectors.failure_reason(job)}")
            return Response(body)
        body["status"] = "computing"
        return Response(body, status=status.HTTP_202_ACCEPTED)
