"""Context-file API: import files, edit the ledger, run drift checks, register evaluations,
record trials, read results, record decisions, and a paired-comparison calculator."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import mixins, parsers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.viewsets import WorkspaceScopedMixin
from governance.models import Role
from governance.services import InputError
from qualification.analysis.paired import PairedTable
from qualification.contextfiles import selectors, services
from qualification.contextfiles.analysis.evaluation import bare_table_summary
from qualification.contextfiles.api import serializers as s
from qualification.contextfiles.filters import InstructionFilter
from qualification.contextfiles.models import (
    CommandVerification,
    ContextFile,
    Evaluation,
    Instruction,
    RepositoryListing,
)


class RawBodyParser(parsers.BaseParser):
    """Hands the raw body to the service so errors can name the line they came from."""

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read() if stream is not None else b""


class RawJSONParser(RawBodyParser):
    media_type = "application/json"


class CSVParser(RawBodyParser):
    media_type = "text/csv"


class PlainTextParser(RawBodyParser):
    media_type = "text/plain"


# --- context files -----------------------------------------------------------------


class ContextFileViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Standing context files (AGENTS.md, CLAUDE.md …) and their revision history."""

    queryset = ContextFile.objects.prefetch_related("revisions")
    serializer_class = s.ContextFileSerializer
    filterset_fields = ["repository", "path"]

    @extend_schema(
        summary="Import a revision of a context file",
        description="Parses the text into instructions (bullets, paragraphs, code blocks and "
        "table rows under headings), guesses each one's category, diffs it against the "
        "previous revision, carries ledger entries forward to matching instructions, and "
        "starts a drift-check job. Importing the same revision with the same text again "
        "returns it with `created: false` (200).",
        request=s.ContextFileImportSerializer,
        responses={
            201: s.ContextFileImportResultSerializer,
            200: s.ContextFileImportResultSerializer,
        },
        examples=[
            OpenApiExample(
                "AGENTS.md",
                value={
                    "repository": "acme/shop",
                    "path": "AGENTS.md",
                    "revision": "9f2c1e7",
                    "text": "# AGENTS.md\n\n## Build\n- Run `make test` before committing.\n",
                },
                request_only=True,
            )
        ],
    )
    def create(self, request):
        payload = s.ContextFileImportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        result = services.context_file_import(
            workspace=request.workspace, actor=request.user, **payload.validated_data
        )
        check = result.drift_check
        data = {
            "id": result.context_file.pk,
            "repository": result.context_file.repository,
            "path": result.context_file.path,
            "created": result.created,
            "revision": s.ContextFileRevisionDetailSerializer(result.revision).data,
            "instructions": s.InstructionSerializer(
                result.revision.instructions.order_by("position"), many=True
            ).data,
            "drift_check": check.pk if check else None,
            "drift_check_job": check.job_id if check else None,
        }
        return Response(data, status=status.HTTP_201_CREATED if result.created else 200)

    @extend_schema(
        summary="Instruction diff between two revisions",
        parameters=[
            OpenApiParameter("from", int, description="Older revision number (default: previous)"),
            OpenApiParameter("to", int, description="Newer revision number (default: latest)"),
        ],
        responses=s.InstructionDiffSerializer,
    )
    @action(detail=True, methods=["get"])
    def diff(self, request, pk=None):
        context_file = self.get_object()
        new = selectors.revision_get(context_file=context_file, number=request.GET.get("to"))
        old_number = request.GET.get("from") or (new.number - 1)
        old = selectors.revision_get(context_file=context_file, number=old_number)
        summary, old_rows, new_rows = selectors.revision_diff(old=old, new=new)

        def brief(row):
            return {"id": row.pk, "position": row.position, "text": row.text,
                    "category": row.category, "line_start": row.line_start}  # fmt: skip

        changes = [
            {
                "kind": c.kind.value,
                "old": brief(old_rows[c.old_index]) if c.old_index is not None else None,
                "new": brief(new_rows[c.new_index]) if c.new_index is not None else None,
                "similarity": c.similarity,
                "segments": [{"op": seg.op, "text": seg.text} for seg in c.segments],
            }
            for c in summary.changes
        ]
        return Response(
            {"from_revision": old.number, "to_revision": new.number,
             "counts": summary.counts, "changes": changes}
        )  # fmt: skip

    @extend_schema(
        methods=["GET"],
        summary="The latest drift check of a revision, with its findings",
        parameters=[OpenApiParameter("revision", int, description="Revision number (latest)")],
        responses=s.DriftCheckSerializer,
    )
    @extend_schema(
        methods=["POST"],
        summary="Run the drift checks on a revision (a background job)",
        request=s.DriftCheckStartSerializer,
        responses={202: s.DriftCheckSerializer},
    )
    @action(detail=True, methods=["get", "post"], url_path="drift-checks")
    def drift_checks(self, request, pk=None):
        context_file = self.get_object()
        if request.method == "GET":
            revision = selectors.revision_get(
                context_file=context_file, number=request.GET.get("revision")
            )
            check = selectors.latest_drift_check(revision=revision)
            if check is None:
                raise Http404("No drift check has run on this revision yet.")
            return Response(s.DriftCheckSerializer(check).data)
        payload = s.DriftCheckStartSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        revision = selectors.revision_get(
            context_file=context_file, number=payload.validated_data.get("revision")
        )
        listing_id = payload.validated_data.get("listing")
        listing = (
            selectors.listing_get(workspace=request.workspace, pk=listing_id)
            if listing_id
            else selectors.latest_listing(
                workspace=request.workspace, repository=context_file.repository
            )
        )
        check = services.drift_check_start(revision=revision, listing=listing, actor=request.user)
        check.refresh_from_db()
        return Response(s.DriftCheckSerializer(check).data, status=status.HTTP_202_ACCEPTED)


class InstructionViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Instructions with their ledger entries. PATCH edits the ledger of the latest revision."""

    queryset = Instruction.objects.select_related("revision__context_file")
    serializer_class = s.InstructionSerializer
    filterset_class = InstructionFilter
    ordering_fields = ["position", "updated_at"]

    @extend_schema(
        summary="Edit an instruction's ledger entry",
        description="Owner, reason, the failure or outcome it affects, review trigger, "
        "deletion condition, last-reviewed and review-due dates, and the category (a person's "
        "correction replaces the guess). Only instructions of a file's latest revision can be "
        "edited. Every change is audited with its before and after values.",
        request=s.LedgerUpdateSerializer,
        responses=s.InstructionSerializer,
        examples=[
            OpenApiExample(
                "Ledger",
                value={
                    "owner": "platform-team",
                    "reason": "Agents regenerated gen/ by hand twice in May.",
                    "affects": "hand-edited generated code (incident class GEN-1)",
                    "review_trigger": "the code generator changes",
                    "deletion_condition": "gen/ is no longer checked in",
                    "review_due_on": "2027-03-01",
                },
                request_only=True,
            )
        ],
    )
    def partial_update(self, request, pk=None):
        payload = s.LedgerUpdateSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        instruction = services.instruction_update_ledger(
            instruction=self.get_object(), actor=request.user, **payload.validated_data
        )
        return Response(s.InstructionSerializer(instruction).data)


class RepositoryListingViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Repository listings used by the path and generated-section checks."""

    queryset = RepositoryListing.objects.defer("paths", "hashes")
    serializer_class = s.RepositoryListingSerializer
    filterset_fields = ["repository"]
    parser_classes = [parsers.MultiPartParser, parsers.FormParser, parsers.JSONParser]

    @extend_schema(
        summary="Upload a repository listing (file list or tarball)",
        description="A plain file list, `git ls-tree -r HEAD` or `sha256sum` output (hashes "
        "make generated-section checks possible), or a .tar/.tar.gz/.tar.bz2/.tar.xz whose "
        "member names are read without extracting anything. Uploading the same bytes again "
        "returns the existing listing.",
        request={
            "multipart/form-data": s.RepositoryListingUploadSerializer,
            "application/json": s.RepositoryListingUploadSerializer,
        },
        responses={201: s.RepositoryListingSerializer},
    )
    def create(self, request):
        payload = s.RepositoryListingUploadSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        upload = payload.validated_data.get("file")
        if upload is not None:
            if upload.size > services.MAX_LISTING_BYTES:
                raise InputError(f"file: larger than {services.MAX_LISTING_BYTES // 1024**2} MiB")
            data = upload.read()
        else:
            data = "\n".join(payload.validated_data["paths"]).encode()
        listing = services.listing_upload(
            workspace=request.workspace,
            repository=payload.validated_data["repository"],
            label=payload.validated_data.get("label", ""),
            data=data,
            actor=request.user,
        )
        return Response(s.RepositoryListingSerializer(listing).data, status=201)


class CommandVerificationViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Recorded results of running the commands a context file names."""

    queryset = CommandVerification.objects.select_related("verified_by")
    serializer_class = s.CommandVerificationSerializer
    filterset_fields = ["context_file", "command", "passed"]

    @extend_schema(
        summary="Record the result of running a command",
        request=s.CommandVerificationCreateSerializer,
        responses={201: s.CommandVerificationSerializer},
        examples=[
            OpenApiExample(
                "CI run",
                value={
                    "context_file": 1,
                    "command": "make test",
                    "passed": True,
                    "exit_code": 0,
                    "repository_revision": "9f2c1e7",
                },
                request_only=True,
            )
        ],
    )
    def create(self, request):
        payload = s.CommandVerificationCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        context_file = selectors.context_file_get(
            workspace=request.workspace, pk=data.pop("context_file")
        )
        record = services.command_verification_record(
            context_file=context_file, actor=request.user, via="api", **data
        )
        return Response(s.CommandVerificationSerializer(record).data, status=201)


# --- evaluations ---------------------------------------------------------------------


class EvaluationViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Pre-registered with/without comparisons of a context file."""

    queryset = Evaluation.objects.select_related("revision").prefetch_related("arms")
    serializer_class = s.EvaluationSerializer
    filterset_fields = ["context_file", "status"]
    action_roles = {"decisions": Role.VIEWER}

    def get_queryset(self):
        return selectors.evaluations_for(workspace=self.request.workspace).prefetch_related("arms")

    @extend_schema(
        summary="Pre-register an evaluation",
        description="Arms are always `baseline` (no file) and `full`; `ablations` adds arms "
        "that keep only the named categories. Δ defaults to 0.10, or 0.15 when "
        "expected_tasks < 80; δ defaults to 0.05.",
        request=s.EvaluationRegistrationSerializer,
        responses={201: s.EvaluationSerializer},
        examples=[
            OpenApiExample(
                "Registration",
                value={
                    "context_file": 1,
                    "revision": 3,
                    "name": "AGENTS.md r3 vs no file",
                    "model_name": "claude-sonnet",
                    "model_version": "4.5-20250929",
                    "harness_version": "claude-code 2.0.14",
                    "decoding": {"temperature": 0},
                    "task_set_version": "shop-tasks v3",
                    "expected_tasks": 120,
                    "delta": 0.05,
                    "margin": 0.10,
                    "ablations": [{"name": "rules-only", "categories": ["failure_prevention"]}],
                },
                request_only=True,
            )
        ],
    )
    def create(self, request):
        payload = s.EvaluationRegistrationSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        context_file = selectors.context_file_get(
            workspace=request.workspace, pk=data.pop("context_file")
        )
        if "revision" in data:
            data["revision"] = selectors.revision_get(
                context_file=context_file, number=data["revision"]
            )
        evaluation = services.evaluation_register(
            context_file=context_file, data=data, actor=request.user
        )
        return Response(s.EvaluationSerializer(evaluation).data, status=201)

    @extend_schema(
        summary="Change a registration",
        description="Before any trial is accepted the registration changes in place (200). "
        "Once results exist it is locked: the change creates a new evaluation that supersedes "
        "this one (201, `supersedes` names this one) and the trials stay with the original. "
        "A superseded registration cannot change (400).",
        request=s.EvaluationRegistrationChangeSerializer,
        responses={200: s.EvaluationSerializer, 201: s.EvaluationSerializer},
    )
    def partial_update(self, request, pk=None):
        evaluation = self.get_object()
        payload = s.EvaluationRegistrationChangeSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        reason = data.pop("reason", "")
        if "revision" in data:
            data["revision"] = selectors.revision_get(
                context_file=evaluation.context_file, number=data["revision"]
            )
        result = services.evaluation_change(
            evaluation=evaluation, data=data, actor=request.user, reason=reason
        )
        body = s.EvaluationSerializer(result.evaluation).data
        if result.superseded is not None:
            response = Response(body, status=201)
            response["Location"] = f"/api/v1/context-file-evaluations/{result.evaluation.pk}/"
            return response
        return Response(body)

    @extend_schema(
        methods=["POST"],
        summary="Record trials (a JSON list or CSV)",
        description="Columns/fields: task_id, arm, repeat, success, adherence, input_tokens, "
        "output_tokens, model_calls, tool_calls (optional: cost, latency_ms, failure_class). "
        "All or nothing: any bad row refuses the whole batch with every problem and its line. "
        "Every (task_id, repeat) must end up with a trial in every arm. Identical re-uploads "
        "are counted as already recorded. The first accepted trial locks the registration.",
        request={
            "application/json": s.EvaluationTrialInputSerializer(many=True),
            "text/csv": OpenApiTypes.STR,
            "multipart/form-data": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
            },
        },
        responses={201: s.EvaluationTrialUploadSerializer, 400: s.EvaluationTrialErrorSerializer},
    )
    @extend_schema(
        methods=["GET"], summary="The trials", responses=s.EvaluationTrialSerializer(many=True)
    )
    @action(
        detail=True,
        methods=["get", "post"],
        parser_classes=[RawJSONParser, CSVParser, PlainTextParser, parsers.MultiPartParser],
    )
    def trials(self, request, pk=None):
        evaluation = self.get_object()
        if request.method == "GET":
            page = self.paginate_queryset(selectors.trials_for(evaluation=evaluation))
            return self.get_paginated_response(s.EvaluationTrialSerializer(page, many=True).data)
        content_type = request.content_type or ""
        if content_type.startswith("multipart/"):
            upload = request.FILES.get("file")
            if upload is None:
                raise InputError("file: attach the trials as a CSV or JSON file")
            body, content_type = upload.read(), upload.content_type or ""
        else:
            body = request.data if isinstance(request.data, bytes) else b""
        try:
            result = services.trials_record(
                evaluation=evaluation, data=body, content_type=content_type, actor=request.user
            )
        except services.TrialUploadError as exc:
            return Response({"detail": str(exc), "errors": exc.errors}, status=400)
        except UnicodeDecodeError:
            return Response({"detail": "The body is not UTF-8 text.", "errors": []}, status=400)
        return Response(
            {"accepted": result.accepted, "already_recorded": result.already_recorded,
             "locked_now": result.locked_now, "batch": result.batch,
             "status": Evaluation.objects.get(pk=evaluation.pk).status},
            status=201,
        )  # fmt: skip

    @extend_schema(
        summary="Results: paired table, intervals, verdict, power",
        responses=s.EvaluationResultsSerializer,
    )
    @action(detail=True, methods=["get"])
    def results(self, request, pk=None):
        evaluation = self.get_object()
        return Response(selectors.evaluation_results(evaluation=evaluation).to_dict())

    @extend_schema(
        methods=["GET"],
        summary="Decision records",
        responses=s.EvaluationDecisionSerializer(many=True),
    )
    @extend_schema(
        methods=["POST"],
        summary="Record a decision (reviewers)",
        request=s.EvaluationDecisionCreateSerializer,
        responses={201: s.EvaluationDecisionSerializer},
    )
    @action(detail=True, methods=["get", "post"])
    def decisions(self, request, pk=None):
        evaluation = self.get_object()
        if request.method == "GET":
            return Response(
                s.EvaluationDecisionSerializer(
                    selectors.decisions_for(evaluation=evaluation), many=True
                ).data
            )
        if request.membership.role < Role.REVIEWER:
            from rest_framework.exceptions import PermissionDenied

            raise PermissionDenied("Recording a decision needs the reviewer role.")
        payload = s.EvaluationDecisionCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        record = services.decision_record(
            evaluation=evaluation, actor=request.user, **payload.validated_data
        )
        return Response(s.EvaluationDecisionSerializer(record).data, status=201)


class PairedComparisonView(APIView):
    """The same statistics as an evaluation's results, for a bare paired 2×2 table."""

    @extend_schema(
        summary="Paired comparison calculator",
        parameters=[s.PairedComparisonQuerySerializer],
        responses=s.EvaluationResultsSerializer,
        examples=[
            OpenApiExample(
                "Cavo 2012",
                value=None,
                description="?both=59&with_only=6&without_only=16&neither=80 → difference "
                "−0.0621, ci95 [−0.1186, −0.0046], verdict hurts",
            )
        ],
    )
    def get(self, request):
        query = s.PairedComparisonQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        table = PairedTable(
            both=data["both"], with_only=data["with_only"],
            without_only=data["without_only"], neither=data["neither"],
        )  # fmt: skip
        return Response(
            bare_table_summary(
                table,
                delta=data["delta"],
                margin=data["margin"],
                pilot_discordance=data.get("pilot_discordance"),
            )
        )
