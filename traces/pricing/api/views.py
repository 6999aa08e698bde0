"""Prices API: the current price table, a new version, the versions, and a session's cost."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.viewsets import WorkspaceReadOnlyViewSet
from governance.models import Role
from traces import selectors as trace_selectors
from traces.pricing import selectors, services
from traces.pricing.api import serializers
from traces.pricing.models import PriceTableVersion

TABLE_DESCRIPTION = (
    "Rates are US dollars per million tokens of each class: input (uncached), output "
    "(reasoning included), cache read, 5-minute and 1-hour cache write; decimals are strings. "
    "A model name in the traces matches a row by its `model` or an `aliases` entry, with or "
    "without a release tag (`-20250929`, `-2025-04-14`, `@20250929`, `-latest`, `-v1:0`)."
)


class PriceTableViewSet(WorkspaceReadOnlyViewSet):
    """The workspace's price table. Every write makes a new version; old ones stay readable."""

    queryset = PriceTableVersion.objects.select_related("created_by").prefetch_related("prices")
    serializer_class = serializers.PriceTableVersionSerializer
    action_roles = {"create": Role.EDITOR, "load_list_prices": Role.EDITOR}

    def get_serializer_class(self):
        if self.action == "versions":
            return serializers.PriceTableVersionSummarySerializer
        return super().get_serializer_class()

    @extend_schema(
        summary="The current price table",
        description="The highest version with its model prices; 404 when the workspace has "
        "no price table yet (POST one, or load the list prices). " + TABLE_DESCRIPTION,
        responses={200: serializers.PriceTableVersionSerializer, 404: OpenApiResponse(
            description="No price table yet.")},
    )  # fmt: skip
    def list(self, request):
        current = selectors.price_table_current(workspace=request.workspace)
        if current is None:
            return Response(
                {"detail": "This workspace has no price table yet.", "code": "not_found"},
                status=status.HTTP_404_NOT_FOUND,
            )
        return Response(self.get_serializer(self.get_queryset().get(pk=current.pk)).data)

    @extend_schema(
        summary="Save a new version of the price table",
        description="Replaces the whole table: send every model price of the new version. "
        "Answers 201 with the new version; 400 names the row and field of bad input "
        "(`prices[2].output: must be a number ≥ 0`); 409 when nothing changed. Editor role. "
        + TABLE_DESCRIPTION,
        request=serializers.PriceTableInputSerializer,
        responses={201: serializers.PriceTableVersionSerializer},
    )
    def create(self, request):
        payload = serializers.PriceTableInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        version = services.price_table_version_create(
            workspace=request.workspace,
            user=request.user,
            prices=payload.validated_data["prices"],
            note=payload.validated_data["note"],
        )
        return Response(
            self.get_serializer(self.get_queryset().get(pk=version.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        summary="A version of the price table, by id",
        description="Any version, current or not, with its prices. " + TABLE_DESCRIPTION,
    )
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Every version of the price table, newest first",
        description="Who saved each version, when, why, and which models it added, changed "
        "or removed against the one before.",
        responses=serializers.PriceTableVersionSummarySerializer(many=True),
    )
    @action(detail=False)
    def versions(self, request):
        versions = selectors.price_table_versions(workspace=request.workspace)
        page = self.paginate_queryset(versions)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        summary="Add the built-in list prices of models not priced yet",
        description="A new version with the providers' published list prices (as of the date "
        "in each row's `as_of`) for the Claude and OpenAI models the table does not price "
        "yet. They were entered by hand: check them. 409 when every model is priced already. "
        "Editor role.",
        request=None,
        responses={201: serializers.PriceTableVersionSerializer},
    )
    @action(detail=False, methods=["post"], url_path="load-list-prices")
    def load_list_prices(self, request):
        version = services.price_table_load_list_prices(
            workspace=request.workspace, user=request.user
        )
        return Response(
            serializers.PriceTableVersionSerializer(self.get_queryset().get(pk=version.pk)).data,
            status=status.HTTP_201_CREATED,
        )


class SessionCostView(APIView):
    """The dollar cost of one session, by model, with the source of each figure."""

    @extend_schema(
        summary="A session's dollar cost",
        description="The sum over the session's calls of each call's cost: the harness's own "
        "`cost_usd` where telemetry carried one, else its tokens at the current price table "
        "(1-hour cache writes at the 1-hour rate, the rest at the 5-minute rate; only Claude "
        "Code transcripts report the 1-hour part, so cache writes known only from spans are "
        "all at the 5-minute rate); requests "
        "known only from telemetry count at their `cost_usd`. `telemetry_usd` and `table_usd` "
        "split `usd` by source, and `split` says it in words with the table version's date. "
        "Calls whose model has no price are counted in `unpriced_calls` and "
        "`unpriced_models`, never as $0: `usd` covers the priced calls only.",
        responses=serializers.CostSummarySerializer,
    )
    def get(self, request, pk: int):
        session = trace_selectors.session_get(workspace=request.workspace, pk=pk)
        summary = selectors.session_cost(session=session)
        return Response(serializers.CostSummarySerializer(summary_data(summary)).data)


def summary_data(summary) -> dict:
    return {
        **summary.__dict__,
        "source": summary.source,
        "split": summary.split_text,
        "unpriced_calls": summary.unpriced_calls,
        "by_model": [row.__dict__ for row in summary.by_model],
    }


class SubagentCostView(APIView):
    """The workspace's cost by telemetry query source and agent name, fork starts marked."""

    @extend_schema(
        summary="Cost by query source and agent name",
        description="One row per (query_source, agent name, agent kind, start kind), costliest "
        "first. A call takes the `query_source` and agent name of its telemetry "
        "`claude_code.api_request` event (joined by request id within the session); a call "
        "without one has an empty query_source and the transcript's subagent type as its "
        "agent name (`main` for the main thread). `kind` is main, subagent, compaction, or "
        "`telemetry only` for requests that match no stored call (then `agents` is null). "
        "`start_kind` `fork` marks subagents that started from their parent's window. Each "
        "row's `cost` is a cost summary with its sources, as for a session.",
        responses=serializers.SubagentCostSerializer,
    )
    def get(self, request):
        costs = selectors.subagent_costs(workspace=request.workspace)
        rows = [{**row, "cost": summary_data(row["cost"])} for row in costs["rows"]]
        data = {
            "rows": rows,
            "total": summary_data(costs["total"]),
            "telemetry_only_calls": costs["telemetry_only"],
        }
        return Response(serializers.SubagentCostSerializer(data).data)
