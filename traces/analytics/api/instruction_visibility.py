"""API: how often an instruction appears in visible thinking (seed 000)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.models import Role
from traces.analytics.api.views import FILTER_PARAMETERS
from traces.analytics.forms import AnalyticsFilterForm
from traces.analytics.instruction_visibility_selectors import (
    Delivery,
    instruction_visibility_for,
    subject_for,
)

DESCRIPTION = """\
How often one instruction appears in the visible thinking blocks of the calls whose window
holds it, by session and by turns since it was delivered, as an exact match and as a
normalised match (casefold, markdown links to their text, punctuation and symbols to spaces,
whitespace collapsed). Give exactly one of `instruction` (free text) and
`ledger_instruction` (an instruction id from the context-file ledger); neither or both is a
400 naming the field.

n is the number of calls with visible thinking (a thinking block with non-blank text) at or
after delivery; calls in the window without visible thinking are reported beside it
(`calls_without_thinking`), not counted in n. Each share has a 95% Wilson interval, calls
taken as independent. Turns since delivery are the agent's calls since the one the
instruction was delivered at (0 = that call).

Delivery (`delivery`): `recorded` (default for free text): at the first call of an agent
whose recorded prompt or compaction summary holds it (normalised match), or the call after a
tool result that holds it. `session_start`: from each agent's first call (for text placed in
a system prompt, which traces do not record). `repository` (default for a ledger
instruction): from each agent's first call in sessions whose project directory is named like
the context file's repository, elsewhere as `recorded`.

Absence from visible reasoning does not prove that the instruction had no influence.

Computed on request from the calls' text (at most 100,000 calls per request; narrow the
filters otherwise)."""


class _RateSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    n = serializers.IntegerField()
    rate = serializers.FloatField(allow_null=True, help_text="count / n; null when n = 0.")
    ci = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="95% Wilson interval."
    )


class _TallySerializer(serializers.Serializer):
    n = serializers.IntegerField(help_text="Calls with visible thinking, in the window.")
    calls_without_thinking = serializers.IntegerField(help_text="In the window, not counted in n.")
    thinking_blocks = serializers.IntegerField()
    exact = _RateSerializer()
    normalised = _RateSerializer()


class _SessionSerializer(_TallySerializer):
    session = serializers.IntegerField()
    external_id = serializers.CharField()
    title = serializers.CharField()
    project = serializers.CharField()
    harness = serializers.CharField()


class _TurnsSerializer(_TallySerializer):
    turns = serializers.ListField(
        child=serializers.IntegerField(allow_null=True), help_text="[first, last]; last null: open."
    )
    label = serializers.CharField()


class InstructionVisibilitySerializer(serializers.Serializer):
    instruction = serializers.CharField()
    normalised_instruction = serializers.CharField()
    method = serializers.CharField()
    delivery = serializers.ChoiceField(choices=list(Delivery.CHOICES))
    delivery_rule = serializers.CharField()
    ledger_instruction = serializers.DictField(allow_null=True)
    overall = _TallySerializer()
    by_session = _SessionSerializer(many=True)
    by_turns = _TurnsSerializer(many=True)
    calls_outside_window = serializers.IntegerField(
        help_text="Calls of the selected agents before delivery, or never reached by it."
    )
    sessions = serializers.IntegerField()
    sessions_delivered = serializers.IntegerField()
    sessions_from_repository = serializers.IntegerField()
    agents_delivered = serializers.IntegerField()
    calls_read = serializers.IntegerField()
    calls_selected = serializers.IntegerField()
    filters = serializers.DictField()
    filters_text = serializers.CharField()


class InstructionVisibilityView(APIView):
    read_role = Role.VIEWER

    @extend_schema(
        summary="Instruction visibility in thinking blocks",
        description=DESCRIPTION,
        parameters=[
            OpenApiParameter("instruction", str, description="Free text to look for."),
            OpenApiParameter(
                "ledger_instruction", int, description="An instruction id from the ledger."
            ),
            OpenApiParameter(
                "delivery",
                str,
                enum=list(Delivery.CHOICES),
                description="How the delivery point is found (see above).",
            ),
            *FILTER_PARAMETERS,
        ],
        responses={200: InstructionVisibilitySerializer},
    )
    def get(self, request):
        params = request.query_params
        form = AnalyticsFilterForm(params, workspace=request.workspace)
        if not form.is_valid():
            return Response(dict(form.errors), status=status.HTTP_400_BAD_REQUEST)
        subject = subject_for(
            workspace=request.workspace,
            instruction=params.get("instruction", ""),
            ledger_instruction=params.get("ledger_instruction", ""),
            delivery=params.get("delivery", ""),
        )
        result = instruction_visibility_for(
            workspace=request.workspace, filters=form.filters(), subject=subject
        )
        return Response(InstructionVisibilitySerializer(result).data)
