"""Audit API under /api/v1/audits/: create, list, read, packets out, judgments in, results."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from governance.api.pagination import StandardPagination
from governance.api.viewsets import WorkspaceViewSet
from governance.errors import InputError
from traces.audit import selectors, services
from traces.audit.api import serializers
from traces.audit.models import Audit, AuditStep
from traces.audit.results import results_dict

JUDGE_KIND = OpenApiParameter(
    "judge_kind", str, description="human or llm: results from one kind of judge (default both)."
)
MIN_CONFIDENCE = OpenApiParameter(
    "min_confidence",
    str,
    description="low (default), medium or high: leave out less sure judgments.",
)

EXCLUDE_FORKS = OpenApiParameter(
    "exclude_forks",
    bool,
    description="true (default): leave out agents that started as forks of a loaded parent.",
)


class PacketPagination(StandardPagination):
    """Packets carry their runs' whole conversation text: a few to a page."""

    page_size = 5
    max_page_size = 50


def _jsonl(rows, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(rows, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class AuditViewSet(WorkspaceViewSet):
    """Utility audits (seed 001 §6). Anyone in the workspace reads them; reviewers create
    them; editors and above judge."""

    queryset = Audit.objects.select_related("created_by", "job").order_by("-created_at", "-id")
    serializer_class = serializers.AuditSerializer
    filterset_fields = ["status"]
    action_roles = {"create": services.CREATE_ROLE, "judgments": services.JUDGE_ROLE}

    @extend_schema(
        responses=serializers.AuditDetailSerializer,
        summary="An audit with its judging progress",
    )
    def retrieve(self, request, pk=None):
        audit = self.get_object()
        context = {"progress": selectors.audit_progress(audit=audit)}
        return Response(serializers.AuditDetailSerializer(audit, context=context).data)

    @extend_schema(
        request=serializers.AuditCreateSerializer,
        responses={201: serializers.AuditSerializer},
        summary="Create an audit (reviewer or admin)",
        description=(
            "Samples steps stratified by task type × context band (the band of the step's own "
            "window, the call's context tokens), `strata_sizes` steps per stratum (or all a "
            "stratum can give), up to three from one run, seeded by `seed` (stored; random "
            "when absent). `exclude_forks` (default true) leaves out agents that started as "
            "forks. A job (`job`) then builds one judge packet per sampled run holding its "
            "sampled steps; the audit's status is `building` until it is `open`. 400 names the "
            "field: an unknown stratum, a size that is not a whole number, or strata without "
            "steps. `GET /api/v1/audits/strata/` lists the strata with their steps."
        ),
    )
    def create(self, request):
        payload = serializers.AuditCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        audit = services.audit_create(
            workspace=request.workspace,
            actor=request.user,
            name=data["name"],
            strata_sizes=data["strata_sizes"],
            seed=data.get("seed"),
            band_edges=data.get("band_edges"),
            exclude_forks=data["exclude_forks"],
        )
        return Response(serializers.AuditSerializer(audit).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        responses=serializers.AuditStrataSerializer,
        parameters=[EXCLUDE_FORKS],
        summary="Steps available per stratum (task type × band of the step's window)",
    )
    @action(detail=False, methods=["get"], pagination_class=None)
    def strata(self, request):
        raw = request.query_params.get("exclude_forks", "true").strip().lower()
        if raw not in {"true", "false", "1", "0"}:
            raise InputError("exclude_forks: true or false.")
        table = selectors.strata_table(
            workspace=request.workspace, exclude_forks=raw in {"true", "1"}
        )
        return Response(serializers.AuditStrataSerializer(table).data)

    @extend_schema(
        responses=serializers.AuditPacketSerializer(many=True),
        summary="The audit's judge packets (JSON, paged)",
        description=(
            "Five packets a page (`page_size` up to 50). Each packet: the operative directive; the inherited compaction summary, labelled "
            "as a lossy digest; `items`, the numbered inventory of every conversation item the "
            "run had accumulated by its last sampled step, each with `tokens` (estimated from "
            "its text, see `token_method`); and `steps`, each with `step_id`, its window, "
            "`had_through_item` (it had items 1 to this) and `did` (its text, thinking and "
            "tool calls). Post judgments to `judgments/` naming `step_id` and item numbers."
        ),
    )
    @action(detail=True, methods=["get"], pagination_class=PacketPagination)
    def packets(self, request, pk=None):
        audit = self.get_object()
        page = self.paginate_queryset(selectors.packets_of(audit=audit))
        return self.get_paginated_response([selectors.packet_dict(p) for p in page])

    @extend_schema(
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(description="One packet a line.")
        },
        summary="Export the packets as JSONL",
    )
    def packets_jsonl(self, request, pk=None):
        audit = self.get_object()
        return _jsonl(selectors.packets_jsonl(audit=audit), f"audit-{audit.pk}-packets.jsonl")

    @extend_schema(
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(description="One judgment a line.")
        },
        summary="Export the judgments as JSONL",
        description="Every judgment with its step, judge, item ids and the tokens they add up to.",
    )
    def judgments_jsonl(self, request, pk=None):
        audit = self.get_object()
        return _jsonl(selectors.judgments_jsonl(audit=audit), f"audit-{audit.pk}-judgments.jsonl")

    @extend_schema(
        request=serializers.AuditJudgmentInputSerializer,
        responses={
            201: serializers.AuditJudgmentSerializer,
            200: OpenApiResponse(
                serializers.AuditJudgmentSerializer,
                description="The same judge had judged this step: the answer was replaced.",
            ),
        },
        summary="Post a judgment of one step (an external LLM judge, or a person)",
        description=(
            "Names the items the step drew on (`active_item_ids`) and those merely helpful "
            "(`helpful_item_ids`), by their inventory numbers; whether a verbatim form of older "
            "context was needed; the counterfactual class; the confidence. The product sums "
            "the items' tokens itself; it never takes a percentage from the judge. An LLM judge "
            "posts with `judge_kind: llm` and a `judge_label`; a person posting judges as "
            "themself. 400 names the field, and for item ids lists the ones the step did not "
            "have (`invalid_ids`)."
        ),
    )
    @action(detail=True, methods=["post"])
    def judgments(self, request, pk=None):
        audit = self.get_object()
        payload = serializers.AuditJudgmentInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        step = (
            AuditStep.objects.filter(packet__audit=audit, pk=data["step"])
            .select_related("packet")
            .first()
        )
        if step is None:
            raise ValidationError({"step": [f"No step {data['step']} in audit {audit.pk}."]})
        step.packet.audit = audit
        judgment = services.judgment_record(
            step=step,
            actor=request.user,
            judge_kind=data["judge_kind"],
            judge_label=data.get("judge_label", ""),
            active_item_ids=data["active_item_ids"],
            helpful_item_ids=data.get("helpful_item_ids", []),
            verbatim_needed=data["verbatim_needed"],
            counterfactual=data["counterfactual"],
            confidence=data["confidence"],
            note=data.get("note", ""),
        )
        return Response(
            serializers.AuditJudgmentSerializer(selectors.judgment_dict(judgment)).data,
            status=status.HTTP_201_CREATED if judgment.created else status.HTTP_200_OK,
        )

    @extend_schema(
        parameters=[JUDGE_KIND, MIN_CONFIDENCE],
        responses=serializers.AuditResultsSerializer,
        summary="What the audit found",
        description=(
            "Active and helpful context by band (median tokens and share of the step's window, "
            "each with n and a distribution-free interval), verbatim dependence by task type "
            "and the counterfactual distribution (each with k, n and a Wilson interval), and "
            "agreement where two judges judged the same step (Cohen's or Fleiss' kappa, "
            "`undefined` for degenerate tables; Jaccard overlap of active items). Each step "
            "counts once, by its first judgment."
        ),
    )
    @action(detail=True, methods=["get"], pagination_class=None)
    def results(self, request, pk=None):
        audit = self.get_object()
        judge_kind = request.query_params.get("judge_kind") or None
        if judge_kind not in (None, "human", "llm"):
            raise InputError("judge_kind: human or llm.")
        confidence = request.query_params.get("min_confidence") or "low"
        if confidence not in ("low", "medium", "high"):
            raise InputError("min_confidence: low, medium or high.")
        results = selectors.audit_results(
            audit=audit, judge_kind=judge_kind, min_confidence=confidence
        )
        return Response(serializers.AuditResultsSerializer(results_dict(results)).data)
