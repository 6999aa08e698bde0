"""Traces API: uploads, sessions with their calls, compactions, agents and runs, ingest jobs,
telemetry settings."""

from django.conf import settings
from django.core.exceptions import TooManyFilesSent
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.serializers import JobSerializer
from governance.api.viewsets import WorkspaceReadOnlyViewSet, WorkspaceScopedMixin
from governance.models import Job, Role
from governance.services import too_many_files_message
from traces import selectors
from traces.api import serializers
from traces.filters import SessionFilter
from traces.models import Session, UploadSource
from traces.services import (
    JOB_KIND,
    UploadTooLarge,
    hook_events_record,
    hook_policy_update,
    telemetry_policy_update,
    trace_uploads_receive,
    transcript_lines_receive,
)


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"


class TraceUploadViewSet(viewsets.GenericViewSet):
    """Upload transcripts or archives; they are stored durably, then ingested as a job."""

    parser_classes = [MultiPartParser]
    serializer_class = serializers.TraceUploadSerializer
    write_role = Role.EDITOR

    @extend_schema(
        request=serializers.TraceUploadSerializer,
        responses={202: serializers.TraceUploadAcceptedSerializer},
        summary="Upload trace files",
        description=(
            "Multipart upload of one or more files (field `files`, repeated): Claude Code session "
            "JSONL, Codex rollout JSONL, OTLP/JSON, or .zip/.tar.gz archives of whole folders. The raw "
            "bytes are committed before the 202 answer. Poll `job_url` for progress, counts and "
            "line-numbered errors. Over the size limit: 413. Over the number of files in one request "
            "(GOVERNANCE_MAX_UPLOAD_FILES, default 2,000): 400 with a message."
        ),
    )
    def create(self, request):
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.GOVERNANCE_MAX_UPLOAD_BYTES:
            raise PayloadTooLarge(
                f"Request body is {length:,} bytes; the limit is {settings.GOVERNANCE_MAX_UPLOAD_BYTES:,} bytes."
            )
        try:
            files = request.FILES.getlist("files") or list(request.FILES.values())
        except TooManyFilesSent:  # the API skips the CSRF check, so it parses here
            raise ParseError(too_many_files_message()) from None
        payload = serializers.TraceUploadSerializer(
            data={"files": files, "format": request.data.get("format", "auto")}
        )
        payload.is_valid(raise_exception=True)
        try:
            job = trace_uploads_receive(
                workspace=request.workspace,
                user=request.user,
                files=payload.validated_data["files"],
                source=UploadSource.API,
                fmt=payload.validated_data["format"],
            )
        except UploadTooLarge as exc:
            raise PayloadTooLarge(str(exc)) from None
        job.refresh_from_db()
        job_url = request.build_absolute_uri(f"/api/v1/ingest-jobs/{job.pk}/")
        return Response(
            {"job": JobSerializer(job, context={"request": request}).data, "job_url": job_url},
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": job_url},
        )


class IngestJobViewSet(WorkspaceReadOnlyViewSet):
    """Trace ingest jobs: progress, counts (calls, duplicates dropped, malformed lines…) and errors."""

    queryset = Job.objects.filter(kind=JOB_KIND).select_related("created_by")
    serializer_class = JobSerializer


@extend_schema(
    parameters=[
        OpenApiParameter("harness", str, description="claude-code, codex or otlp"),
        OpenApiParameter(
            "model",
            str,
            description="Sessions with a call to this model, by its whole name (the same name "
            "in another case is taken as it); any other value is a 400 naming the models "
            "containing it",
        ),
        OpenApiParameter("project", str, description="Project or working directory contains"),
        OpenApiParameter("started_after", str, description="YYYY-MM-DD"),
        OpenApiParameter("started_before", str, description="YYYY-MM-DD"),
    ]
)
class SessionViewSet(
    WorkspaceScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Ingested sessions with token totals by class and the largest context reached."""

    queryset = Session.objects.all()
    serializer_class = serializers.SessionSerializer
    filterset_class = SessionFilter
    ordering_fields = ["started_at", "call_count", "max_context", "compaction_count"]
    ordering = ["-started_at"]

    @extend_schema(
        responses=serializers.CallSerializer(many=True), summary="The session's calls, in order"
    )
    @action(detail=True)
    def calls(self, request, pk=None):
        session = self.get_object()
        page = self.paginate_queryset(selectors.session_calls(session=session))
        return self.get_paginated_response(serializers.CallSerializer(page, many=True).data)

    @extend_schema(
        responses=serializers.CompactionSerializer(many=True), summary="The session's compactions"
    )
    @action(detail=True, pagination_class=None)
    def compactions(self, request, pk=None):
        session = self.get_object()
        return Response(
            serializers.CompactionSerializer(
                selectors.session_compactions(session=session), many=True
            ).data
        )

    @extend_schema(
        responses=serializers.ReconciliationSerializer,
        summary="The session's calls as each source saw them",
        description="A call can be seen by its transcript line, an OTLP span "
        "(`claude_code.llm_request` or a GenAI span) and a `claude_code.api_request` event; "
        "they are joined on `requestId` = `request_id` and `message.id` = "
        "`gen_ai.response.id` within the session. Lists the calls whose sources disagree "
        "(the field and each source's value), and the calls seen in only one source when "
        "the session has another source at all; at most 500 rows each.",
    )
    @action(detail=True, pagination_class=None)
    def reconciliation(self, request, pk=None):
        session = self.get_object()
        return Response(
            serializers.ReconciliationSerializer(
                selectors.session_reconciliation(session=session)
            ).data
        )

    @extend_schema(responses=serializers.AgentSerializer(many=True), summary="The session's agents")
    @action(detail=True, pagination_class=None)
    def agents(self, request, pk=None):
        session = self.get_object()
        return Response(
            serializers.AgentSerializer(selectors.session_agents(session=session), many=True).data
        )

    @extend_schema(
        responses=serializers.RunSerializer(many=True), summary="The session's runs with task types"
    )
    @action(detail=True, pagination_class=None)
    def runs(self, request, pk=None):
        session = self.get_object()
        return Response(
            serializers.RunSerializer(selectors.session_runs(session=session), many=True).data
        )


class TelemetrySettingsView(APIView):
    """The workspace's OTLP telemetry settings: everyone reads them, admins change them."""

    write_role = Role.ADMIN

    @extend_schema(
        responses=serializers.TelemetryPolicySerializer,
        summary="Telemetry settings",
        description="How identity attributes in OTLP traces, logs and metrics are stored.",
    )
    def get(self, request):
        policy = selectors.telemetry_policy_peek(workspace=request.workspace)
        return Response(serializers.TelemetryPolicySerializer(policy).data)

    @extend_schema(
        request=serializers.TelemetryPolicySerializer,
        responses=serializers.TelemetryPolicySerializer,
        summary="Change telemetry settings",
        description=(
            "Admins only. The change applies to requests received from now on (their raw "
            "bodies included); stored data keeps the treatment it was stored with. Audited as "
            "`telemetry_policy.update`."
        ),
    )
    def patch(self, request):
        payload = serializers.TelemetryPolicySerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        policy = telemetry_policy_update(
            workspace=request.workspace,
            actor=request.user,
            identity=payload.validated_data["identity"],
        )
        return Response(serializers.TelemetryPolicySerializer(policy).data)


class HookEventViewSet(viewsets.GenericViewSet):
    """Harness hook events from `context-governance hook …` (Claude Code SessionStart,
    PreCompact, PostCompact) and `context-governance codex-notify` (Codex turns)."""

    serializer_class = serializers.HookBatchInputSerializer
    write_role = Role.EDITOR
    action_roles = {"PATCH": Role.ADMIN}  # the policy

    @extend_schema(
        request=serializers.HookBatchInputSerializer,
        responses={201: serializers.HookBatchResponseSerializer},
        summary="Record harness hook events",
        description=(
            "What `context-governance hook session-start|pre-compact|post-compact` sends: each "
            "event's raw stdin payload with the event name, the client's `event_id` and the "
            "time the hook ran. Events are stored once per `event_id` (the client resends the "
            "ones it could not deliver), with the payload's `session_id` and `trigger` (or "
            "SessionStart's `source`), linked to the session when it has been ingested. A "
            "PostCompact's `compact_summary` is also stored on that session's latest compaction "
            "that has none yet; until the transcript is ingested it stays in the event only. "
            "At most 200 events per request.\n\n"
            "`answer` is what the harness should be told for the batch's last event (the hook "
            "that is running; earlier ones are resent from the client's spool), by the "
            "workspace's hook policy (`GET /api/v1/hooks/policy/`): at PreCompact above the "
            "qualified ECL of the session's model, a suggestion to restart from the "
            "authoritative specification with a link to a prefilled restart package, or a "
            "block of an automatic compaction; at SessionStart, the operating limit and the "
            "specification's key as additional context. The client prints it in the harness's "
            "format."
        ),
    )
    def create(self, request):
        payload = serializers.HookBatchInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        events = payload.validated_data["events"]
        result = hook_events_record(workspace=request.workspace, actor=request.user, events=events)
        answer = selectors.hook_answer(
            workspace=request.workspace, event=events[-1], absolute=request.build_absolute_uri
        )
        body = {**serializers.HookBatchResultSerializer(result).data, "answer": answer}
        return Response(
            serializers.HookBatchResponseSerializer(body).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        request=serializers.TranscriptLinesInputSerializer,
        responses={200: serializers.TranscriptLinesResultSerializer},
        summary="Send the lines a transcript gained",
        description=(
            "What `context-governance hook …` sends besides the event: the whole lines the "
            "hook's transcript gained since the last send (base64 in `data`), from byte "
            "`offset`. They are ingested into their session as an upload's are: every call is "
            "keyed by its natural key, so lines sent again add nothing. The answer's `offset` "
            "is where the next chunk starts. A chunk that does not start where the server "
            "stands is a 409 whose body holds the server's `offset`, `head_size` and "
            "`head_sha256` (the fingerprint of the file's first bytes): the client goes on from "
            "there when its file begins with those bytes, else it sends from 0, which starts "
            "the transcript again. At most 6 MiB of lines per request. The session's totals are "
            "derived a moment later (as for OTLP), not in this request."
        ),
    )
    @action(detail=False, methods=["post"], url_path="lines")
    def lines(self, request):
        payload = serializers.TranscriptLinesInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        result = transcript_lines_receive(
            workspace=request.workspace, actor=request.user, **payload.validated_data
        )
        return Response(serializers.TranscriptLinesResultSerializer(result).data)

    @extend_schema(
        methods=["get"],
        responses=serializers.HookPolicySerializer,
        summary="Hook policy",
        description="What `context-governance hook …` answers the harness in this workspace.",
    )
    @extend_schema(
        methods=["patch"],
        request=serializers.HookPolicySerializer,
        responses=serializers.HookPolicySerializer,
        summary="Change the hook policy",
        description="Admins only. Applies from the next hook on. Audited as `hook_policy.update`.",
    )
    @action(detail=False, methods=["get", "patch"], url_path="policy")
    def policy(self, request):
        if request.method == "GET":
            policy = selectors.hook_policy_peek(workspace=request.workspace)
            return Response(serializers.HookPolicySerializer(policy).data)
        data = serializers.HookPolicySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        policy = hook_policy_update(
            workspace=request.workspace,
            actor=request.user,
            pre_compact_action=data.validated_data["pre_compact_action"],
            session_start_context=data.validated_data["session_start_context"],
            spec_slug=data.validated_data.get("spec") or "",
        )
        return Response(serializers.HookPolicySerializer(policy).data)
