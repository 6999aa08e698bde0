"""Qualification API: sweeps and their trials and results, operating limits and their review,
and budget checks. Each action parses input, calls one service and renders the output."""

from __future__ import annotations

from django.db.models import Count
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from governance.api.exceptions import register_body
from governance.api.serializers import JobSerializer
from governance.api.viewsets import WorkspaceViewSet
from governance.errors import InputError
from governance.models import JobStatus, Role
from qualification import filters, selectors, services
from qualification.api import serializers
from qualification.models import (
    AssemblyAudit,
    ModelConfiguration,
    OperatingLimit,
    Qualification,
    Workload,
)

QUALIFICATION_EXAMPLE = {
    "name": "Sonnet on repo maintenance",
    "model": {"name": "claude-sonnet-4", "version": "2025-05-14"},
    "configuration": {
        "decoding": {"temperature": 0},
        "harness_version": "claude-code 1.0.31",
        "prompt_version": "agent-v7",
        "evaluator_version": "patch-eval 2.3",
    },
    "workload": {"name": "repo-maintenance", "version": "3"},
    "threshold": 0.85,
    "consequence": "medium",
    "strata": [8000, 16000, 32000, 64000, 128000],
    "supersedes": None,
}


class PlainTextParser(JSONParser):
    """Accept text/csv and JSON Lines bodies; the view reads the raw bytes itself."""

    media_type = "text/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


class JsonLinesParser(PlainTextParser):
    media_type = "application/x-ndjson"


@extend_schema_view(
    list=extend_schema(summary="List qualifications (sweeps)"),
    retrieve=extend_schema(summary="One qualification with its pinned configuration"),
)
class QualificationViewSet(WorkspaceViewSet):
    """Context-size sweeps: a pinned configuration on a workload against a pre-registered θ."""

    action_roles = {"results": Role.VIEWER}  # asking for an analysis only fills the cache
    queryset = (
        Qualification.objects.select_related("configuration", "workload", "created_by")
        .annotate(trial_count=Count("trials"))
        .order_by("-created_at", "-id")  # Meta.ordering is not applied to GROUP BY queries
    )
    serializer_class = serializers.QualificationSerializer
    filterset_class = filters.QualificationFilter
    ordering_fields = ["created_at", "name"]
    parser_classes = [JSONParser, MultiPartParser, FormParser, PlainTextParser, JsonLinesParser]

    @extend_schema(
        summary="Create a qualification",
        description="Pins the configuration (its fingerprint changes whenever a pinned field "
        "does), names the workload and pre-registers θ and the consequence. `supersedes` makes "
        "this a requalification: the previous qualification of the same model and workload is "
        "marked superseded and its curves are overlaid on the new ones.",
        request=serializers.QualificationCreateSerializer,
        responses={201: serializers.QualificationSerializer},
        examples=[OpenApiExample("Sweep", value=QUALIFICATION_EXAMPLE, request_only=True)],
    )
    def create(self, request):
        payload = serializers.QualificationCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        supersedes = None
        if data.get("supersedes"):
            supersedes = selectors.qualification_get(
                workspace=request.workspace, pk=data["supersedes"]
            )
        data["supersedes"] = supersedes
        qualification = services.qualification_create(
            workspace=request.workspace, actor=request.user, **data
        )
        qualification = self.get_queryset().get(pk=qualification.pk)
        return Response(
            serializers.QualificationSerializer(qualification).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        summary="Rename or annotate; change θ, consequence, strata or parameters before trials",
        request=serializers.QualificationUpdateSerializer,
        responses={200: serializers.QualificationSerializer},
    )
    def partial_update(self, request, pk=None):
        payload = serializers.QualificationUpdateSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        services.qualification_update(
            qualification=self.get_object(), actor=request.user, **payload.validated_data
        )
        return Response(serializers.QualificationSerializer(self.get_object()).data)

    @extend_schema(
        methods=["GET"],
        summary="List a qualification's trials",
        responses=serializers.TrialSerializer(many=True),
    )
    @extend_schema(
        methods=["POST"],
        summary="Add trials",
        description=(
            'A JSON array of trial objects (or `{"trials": [...]}`) is checked and saved at '
            "once: 201 with the count, or 400 with every problem as `{line, field, error}` "
            "(`line` is the trial's 1-based position in the array) and nothing saved. A CSV or "
            "JSON Lines file (multipart field `file`, or a `text/csv` / `application/x-ndjson` "
            "body) is loaded by a background job: 202 with the job, whose errors carry the file's "
            "line numbers; again all rows or none. Every task must run at every stratum unless "
            "`partial=true`, which defers the pairing check to the analysis. The raw batch is "
            "kept; the same bytes are not loaded twice."
        ),
        parameters=[
            OpenApiParameter(
                "partial", OpenApiTypes.BOOL, description="More strata will follow later."
            )
        ],
        request={
            "application/json": serializers.TrialInputSerializer(many=True),
            "multipart/form-data": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
            },
            "text/csv": {"type": "string"},
        },
        responses={
            201: serializers.TrialBatchSerializer,
            202: serializers.TrialBatchSerializer,
            400: serializers.TrialBatchSerializer,
        },
        examples=[
            OpenApiExample(
                "Two trials",
                request_only=True,
                media_type="application/json",
                value=[
                    {
                        "task_id": "ret-001",
                        "family": "retrieval",
                        "stratum_tokens": 8000,
                        "repeat": 0,
                        "retrieval_correct": True,
                        "task_correct": True,
                        "input_tokens": 7712,
                        "output_tokens": 1380,
                        "model_calls": 3,
                        "tool_calls": 4,
                        "cost_usd": "0.0300",
                    },
                    {
                        "task_id": "ret-001",
                        "family": "retrieval",
                        "stratum_tokens": 8000,
                        "repeat": 1,
                        "retrieval_correct": True,
                        "task_correct": False,
                        "input_tokens": 7730,
                        "output_tokens": 1522,
                        "model_calls": 3,
                        "tool_calls": 5,
                    },
                ],
            )
        ],
    )
    @action(detail=True, methods=["get", "post"], url_path="trials")
    def trials(self, request, pk=None):
        qualification = self.get_object()
        if request.method == "GET":
            trials = selectors.trials_for(qualification=qualification).order_by(
                "task__external_id", "stratum_tokens", "repeat"
            )
            page = self.paginate_queryset(trials)
            return self.get_paginated_response(serializers.TrialSerializer(page, many=True).data)
        partial = str(request.query_params.get("partial", "")).lower() in ("1", "true", "yes")
        if request.content_type.startswith("multipart/form-data"):
            upload_file = request.FILES.get("file")
            if upload_file is None:
                raise ValidationError({"file": "Attach the trials file as the `file` field."})
            partial = partial or str(request.data.get("partial", "")).lower() in ("1", "true")
            content, name, run_now = upload_file.read(), upload_file.name, False
        else:
            content = request._request.body
            is_json = "json" in request.content_type and "ndjson" not in request.content_type
            name = (
                "trials.json"
                if is_json
                else ("trials.jsonl" if "ndjson" in request.content_type else "trials.csv")
            )
            run_now = is_json
        upload = services.trial_batch_submit(
            qualification=qualification,
            content=content,
            filename=name,
            content_type=request.content_type,
            source="api",
            partial=partial,
            actor=request.user,
            run_now=run_now,
        )
        job = upload.job
        if job is not None:
            job.refresh_from_db()
        body = {
            "upload": upload.pk,
            "status": upload.status,
            "trials_saved": upload.rows_loaded,
            "job": JobSerializer(job, context={"request": request}).data if job else {},
            "errors": job.errors if job else [],
        }
        if job is not None and job.status == JobStatus.FAILED:
            body["detail"] = job.error
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        code = status.HTTP_201_CREATED if upload.status == "loaded" else status.HTTP_202_ACCEPTED
        return Response(body, status=code)

    @extend_schema(
        summary="Analysis results",
        description=(
            "Per family and pooled: accuracy by stratum with task-clustered intervals, "
            "reliability (pass^k), retrieval and cost; the ECL by the fixed-sequence rule, "
            "P(ECL ≥ L) and the 95% lower ECL from the task bootstrap; knee (paired-drop "
            "test), saturation, hinge/Kneedle/GEE cross-checks; refusals with remedies; the "
            "weakest family and the proposed production limit. Cached per trial version and "
            "parameters. The analysis runs as a job, never inside a request. GET only reads: "
            "200 with the results; 202 with `status: pending` and the job while one computes "
            "them; 409 with `code: analysis_missing` when the current trials were never "
            "analysed (a partial upload queues no analysis). POST asks for the analysis: 200 "
            "when it is cached, else 202 with the job computing it (queued now if none is); "
            "poll the job, then GET again. Viewers may POST too: the job only fills the cache."
        ),
        responses={
            200: serializers.ResultsSerializer,
            202: serializers.AnalysisPendingSerializer,
            409: serializers.AnalysisPendingSerializer,
        },
    )
    @action(detail=True, methods=["get", "post"])
    def results(self, request, pk=None):
        qualification = self.get_object()
        if request.method == "POST":
            analysis, job = services.analysis_get_or_request(
                qualification=qualification, actor=request.user
            )
        else:
            analysis = selectors.analysis_current(qualification=qualification)
            job = None if analysis else selectors.analysis_job_pending(qualification=qualification)
        if analysis is not None:
            return Response(
                {
                    "qualification": qualification.pk,
                    "data_version": analysis.data_version,
                    "computed_at": analysis.computed_at,
                    **analysis.result,
                }
            )
        if job is None:
            return Response(
                {
                    "qualification": qualification.pk,
                    "data_version": qualification.data_version,
                    "status": "missing",
                    "code": "analysis_missing",
                    "detail": f"Trial version {qualification.data_version} has not been "
                    "analysed. POST to this URL to compute it.",
                },
                status=status.HTTP_409_CONFLICT,
            )
        return Response(pending_body(qualification, job, request), status=status.HTTP_202_ACCEPTED)


def pending_body(qualification, job, request, detail: str = "") -> dict:
    """The body of an answer that waits for the analysis job `job`."""
    return {
        "qualification": qualification.pk,
        "data_version": qualification.data_version,
        "status": "pending",
        "detail": detail
        or f"Analysing trial version {qualification.data_version} in job #{job.pk}; "
        "ask again when it has finished.",
        "job": JobSerializer(job, context={"request": request}).data,
    }


class ConfigurationViewSet(WorkspaceViewSet):
    """Pinned model configurations and their fingerprints (created with qualifications)."""

    queryset = ModelConfiguration.objects.all()
    serializer_class = serializers.ConfigurationSerializer
    filterset_fields = ["model_name", "model_version", "fingerprint"]


class WorkloadViewSet(WorkspaceViewSet):
    """Workload versions and their task families (created with qualifications)."""

    queryset = Workload.objects.prefetch_related("families")
    serializer_class = serializers.WorkloadSerializer
    filterset_fields = ["name", "version"]


@extend_schema_view(
    list=extend_schema(summary="List operating limits"),
    retrieve=extend_schema(summary="One operating limit with its justification"),
)
class OperatingLimitViewSet(WorkspaceViewSet):
    """Reviewed limits justified by a qualification. Approved limits are immutable."""

    queryset = OperatingLimit.objects.select_related(
        "qualification__configuration",
        "qualification__workload",
        "created_by",
        "approved_by",
        "supersedes",  # each limit's review compares it with the one it supersedes
    )
    serializer_class = serializers.OperatingLimitSerializer
    filterset_class = filters.OperatingLimitFilter
    ordering_fields = ["created_at", "approved_at"]
    action_roles = {"approve": Role.REVIEWER}

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if page is not None:
            selectors.limits_prefetch_approvals(workspace=self.request.workspace, limits=page)
        return page

    @extend_schema(
        summary="Propose a limit from a qualification",
        description="Defaults come from the qualification's analysis: its proposed production "
        "limit as `max_context_tokens` (a limit may be stricter, never looser), a quarter of it "
        "as the reserve and the rest as the maximum initial assembly. `use_stage_template` "
        "starts from seed 004's five stage budgets. If the limit of the same model and "
        "workload is active, the proposal supersedes it once approved. 409 with `code: "
        "analysis_pending` and the job while the analysis of the current trials is still "
        "running (it is queued if it was not): propose again when the job has finished.",
        request=serializers.LimitProposeSerializer,
        responses={
            201: serializers.OperatingLimitSerializer,
            409: serializers.AnalysisPendingSerializer,
        },
        examples=[
            OpenApiExample(
                "Proposal",
                request_only=True,
                value={
                    "qualification": 12,
                    "reserve_tokens": 8000,
                    "max_initial_assembly_tokens": 24000,
                    "reserve_action": "restart_from_spec",
                    "source_limits": {
                        "system": 3000,
                        "tool_schemas": 4000,
                        "retrieved_files": 14000,
                    },
                    "use_stage_template": True,
                },
            )
        ],
    )
    def create(self, request):
        payload = serializers.LimitProposeSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        qualification = selectors.qualification_get(
            workspace=request.workspace, pk=data.pop("qualification")
        )
        use_template = data.pop("use_stage_template", False)
        name = data.pop("name", "")
        limit = services.operating_limit_propose(
            qualification=qualification,
            actor=request.user,
            name=name,
            values=data,
            use_stage_template=use_template,
        )
        return Response(
            serializers.OperatingLimitSerializer(limit).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        summary="Edit a proposed limit (409 once approved)",
        request=serializers.LimitValuesSerializer,
        responses={200: serializers.OperatingLimitSerializer},
    )
    def partial_update(self, request, pk=None):
        payload = serializers.LimitValuesSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        limit = services.operating_limit_update(
            limit=self.get_object(), actor=request.user, **payload.validated_data
        )
        return Response(serializers.OperatingLimitSerializer(limit).data)

    @extend_schema(
        summary="Approve (reviewers who neither proposed nor edited it)",
        description="Read the limit first: its `justification`, and in `review.changes` every "
        "value it removes or loosens (`flagged: true`) compared with the limit it supersedes, "
        "or with the model's active limit. Then send `confirm: true`, which records that you "
        f"read them (“{services.APPROVAL_CONFIRMATION}”), and an optional `comment` (at most "
        f"{services.COMMENT_MAX_CHARS:,} characters). The audit log entry of the approval keeps "
        "the comment and the flagged changes; the limit shows the comment as "
        "`approval_comment`. 400 without `confirm: true` (`detail` starts with `confirm:`); 403 "
        "for your own proposal or edit; 409 if it is not proposed, if trials changed since the "
        "proposal, or if the limit it supersedes is no longer active. Approving supersedes the "
        "predecessor and locks the qualification.",
        request=serializers.LimitApproveSerializer,
        responses={200: serializers.OperatingLimitSerializer},
        examples=[
            OpenApiExample(
                "Approval",
                request_only=True,
                value={"confirm": True, "comment": "Dropping the stage budgets is intended."},
            )
        ],
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        payload = serializers.LimitApproveSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        limit = services.operating_limit_approve(
            limit=self.get_object(),
            reviewer=request.user,
            membership=request.membership,
            confirmed=payload.validated_data["confirm"],
            comment=payload.validated_data["comment"],
            reviewed=payload.validated_data["reviewed"] or None,
        )
        return Response(serializers.OperatingLimitSerializer(limit).data)

    @extend_schema(
        summary="The approved limit for a harness's model",
        description="What `context-governance statusline` shows: the approved limit for the "
        "model id a harness reports (`model.id` in Claude Code's status-line input, e.g. "
        "`claude-sonnet-4-20250514`; Bedrock and Vertex ids too), with the qualified ECL "
        "(the weakest family's ECL from the limit's justification). Configurations match on the "
        "model name with any snapshot date, `[1m]` marker or provider prefix removed. With "
        "several workloads approved for the model, `workload` picks one; otherwise the "
        "strictest limit (smallest `max_context_tokens`) is returned and `candidates` says how "
        "many there were. `limit` is null when no approved limit matches. `version` changes "
        "whenever the answer does: clients cache the answer with it.",
        parameters=[
            OpenApiParameter("model", str, required=True, description="The harness's model id."),
            OpenApiParameter("workload", str, description="A workload name, to pick one."),
        ],
        responses={200: serializers.ActiveLimitSerializer},
    )
    @action(detail=False, methods=["get"], filterset_class=None, pagination_class=None)
    def active(self, request):
        model_id = request.query_params.get("model", "").strip()
        if not model_id:
            raise InputError(
                "model: give the harness's model id, e.g. ?model=claude-sonnet-4-20250514."
            )
        active = selectors.active_limit_for_model_id(
            workspace=request.workspace,
            model_id=model_id[:200],
            workload=request.query_params.get("workload", "").strip(),
        )
        return Response(serializers.ActiveLimitSerializer.from_active(active))

    @extend_schema(summary="Withdraw a proposed limit", request=None)
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        limit = services.operating_limit_withdraw(limit=self.get_object(), actor=request.user)
        return Response(serializers.OperatingLimitSerializer(limit).data)


@extend_schema_view(
    list=extend_schema(summary="List budget checks (assembly audits)"),
    retrieve=extend_schema(
        summary="One assembly audit, with the prompt if it was sent",
        responses=serializers.BudgetCheckDetailSerializer,
    ),
)
class BudgetCheckViewSet(WorkspaceViewSet):
    """Check an assembly's tokens by source against an approved operating limit."""

    queryset = AssemblyAudit.objects.select_related("operating_limit", "created_by")
    serializer_class = serializers.BudgetCheckSerializer
    filterset_class = filters.AssemblyAuditFilter
    ordering_fields = ["created_at", "total"]

    def get_serializer_class(self):
        if self.action == "retrieve":
            return serializers.BudgetCheckDetailSerializer
        return serializers.BudgetCheckSerializer

    @extend_schema(
        summary="Check an assembly against a limit",
        description="Returns `verdict` (`within` | `over`), `total`, `limit` (the stage's budget, "
        "or the maximum initial assembly), `reserve_left` (tokens between this assembly and "
        "the maximum context: room for tool output and correction), `over_sources` and "
        "`action` (`proceed`, or the stage's or reserve's action when over). Every check is "
        "kept as an assembly audit with its allocation, prompt and omissions. 409 when the "
        "limit is not approved.",
        request=serializers.BudgetCheckInputSerializer,
        responses={201: serializers.BudgetCheckSerializer},
        examples=[
            OpenApiExample(
                "Code generation stage",
                request_only=True,
                value={
                    "operating_limit": 3,
                    "stage": "code_generation",
                    "allocation": {"system": 2800, "tool_schemas": 3900, "retrieved_files": 21000},
                    "omissions": [
                        {
                            "decision": "omitted",
                            "source": "retrieved_files",
                            "item": "package-lock.json",
                            "tokens": 9800,
                            "reason": "lockfile",
                        },
                    ],
                    "run_ref": "ticket-4812",
                },
            )
        ],
    )
    def create(self, request):
        payload = serializers.BudgetCheckInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        limit = selectors.operating_limit_get(
            workspace=request.workspace, pk=data.pop("operating_limit")
        )
        audit = services.budget_check_record(limit=limit, source="api", actor=request.user, **data)
        return Response(
            serializers.BudgetCheckSerializer(audit).data, status=status.HTTP_201_CREATED
        )


register_body(
    services.AnalysisPending,
    lambda exc, context: {
        **pending_body(exc.qualification, exc.job, context["request"], detail=exc.message),
        "code": exc.code,
    },
)
