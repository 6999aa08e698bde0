"""API: how often an instruction appears in visible thinking (seed 000)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.serializers import JobSerializer
from governance.models import Role
from traces.analytics.api.views import FILTER_PARAMETERS
from traces.analytics.forms import AnalyticsFilterForm
from traces.analytics.instruction_visibility_selectors import (
    Delivery,
    instruction_visibility_for,
    instruction_visibility_run_get,
    subject_for,
)
from traces.analytics.instruction_visibility_services import instruction_visibility_start

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

Counted on request while the filters reach at most 100,000 calls (the agents' calls, selected
or not, since delivery is found on all of them). Past that, this GET answers 400 (field
`filters`) and queues nothing: start the count as a job with
`POST /api/v1/analytics/instruction-visibility/runs/` (same parameters, in the body), then
poll `GET /api/v1/analytics/instruction-visibility/runs/{id}/` for its job's progress and,
once it has succeeded, the same result as this endpoint's.

Matching reads each call's text once into a derived extract (visible thinking joined by
newlines; prompt, compaction summary and tool results); exact matches are counted by the
database (`strpos`), normalised matches are checked on the texts that hold the
instruction's longest word."""

RUN_DESCRIPTION = """Instruction visibility as a background job, for filters that reach more than 100,000 calls
(any size is accepted). The body takes the parameters of
`GET /api/v1/analytics/instruction-visibility/` (`instruction` or `ledger_instruction`,
`delivery`, and the analytics filters); errors in them are a 400 naming the field, as
there. The answer (202) is the run: its `job` (status, `progress_done` / `progress_total`
calls read) and `result`, null until the job has succeeded. Poll
`GET /api/v1/analytics/instruction-visibility/runs/{id}/`; the `result` then has the same
shape as the GET endpoint's answer. Absence from visible reasoning does not prove that the
instruction had no influence."""


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


class InstructionVisibilityRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.SerializerMethodField()
    instruction = serializers.CharField(help_text="The free text ('' for a ledger instruction).")
    ledger_instruction = serializers.IntegerField(source="ledger_instruction_id", allow_null=True)
    delivery = serializers.CharField()
    filters = serializers.DictField()
    job = JobSerializer(allow_null=True)
    seconds = serializers.FloatField(help_text="Time the count took, once done.")
    created_at = serializers.DateTimeField()
    result = InstructionVisibilitySerializer(
        allow_null=True, help_text="Null until the job has succeeded."
    )

    def get_url(self, run) -> str:
        path = f"/api/v1/analytics/instruction-visibility/runs/{run.pk}/"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class InstructionVisibilityRunRequestSerializer(serializers.Serializer):
    """For the schema: the body is read by the same checks as the GET's parameters."""

    instruction = serializers.CharField(required=False, help_text="Free text to look for.")
    ledger_instruction = serializers.IntegerField(
        required=False, help_text="An instruction id from the ledger."
    )
    delivery = serializers.ChoiceField(choices=list(Delivery.CHOICES), required=False)
    started_after = serializers.DateField(required=False)
    started_before = serializers.DateField(required=False)
    harness = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    project = serializers.CharField(required=False)
    task_type = serializers.CharField(required=False)
    exclude_forks = serializers.BooleanField(required=False)


def _subject(request, params):
    return subject_for(
        workspace=request.workspace,
        instruction=params.get("instruction", ""),
        ledger_instruction=params.get("ledger_instruction", ""),
        delivery=params.get("delivery", ""),
    )


class InstructionVisibilityRunsView(APIView):
    read_role = Role.VIEWER
    write_role = Role.VIEWER  # asking for a count changes no data

    @extend_schema(
        summary="Count instruction visibility in a job",
        description=RUN_DESCRIPTION,
        request=InstructionVisibilityRunRequestSerializer,
        responses={202: InstructionVisibilityRunSerializer},
    )
    def post(self, request):
        params = request.data
        form = AnalyticsFilterForm(params)
        if not form.is_valid():
            return Response(dict(form.errors), status=status.HTTP_400_BAD_REQUEST)
        run = instruction_visibility_start(
            workspace=request.workspace,
            subject=_subject(request, params),
            filters=form.filters(),
            user=request.user,
        )
        data = InstructionVisibilityRunSerializer(run, context={"request": request}).data
        return Response(data, status=status.HTTP_202_ACCEPTED)


class InstructionVisibilityRunView(APIView):
    read_role = Role.VIEWER

    @extend_schema(
        summary="An instruction-visibility job: progress, then result",
        description=RUN_DESCRIPTION,
        responses={200: InstructionVisibilityRunSerializer},
    )
    def get(self, request, pk: int):
        run = instruction_visibility_run_get(workspace=request.workspace, pk=pk)
        return Response(InstructionVisibilityRunSerializer(run, context={"request": request}).data)
