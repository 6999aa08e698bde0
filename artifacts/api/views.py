"""Artifacts API: write (raw or multipart, streamed), pointer metadata, bounded reads, delete."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from artifacts import selectors, services
from artifacts.api import serializers as s
from artifacts.api.uploads import ArtifactUploadHandler, RawBodyParser, header_text
from artifacts.filters import ArtifactFilter
from artifacts.models import Artifact, ArtifactWriteFailure
from artifacts.storage import StorageFailed
from governance.api.exceptions import register_body
from governance.api.permissions import resolve_api_workspace
from governance.api.viewsets import WorkspaceReadOnlyViewSet, WorkspaceScopedMixin
from governance.models import Role
from governance.services import InputError

HEADERS = {
    "run_id": "X-Run-Id",
    "tool_call_id": "X-Tool-Call-Id",
    "command": "X-Command",
    "exit_status": "X-Exit-Status",
    "complete": "X-Complete",
    "dropped_bytes": "X-Dropped-Bytes",
    "dropped_lines": "X-Dropped-Lines",
    "started_at": "X-Started-At",
    "finished_at": "X-Finished-At",
}


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class LengthRequired(exceptions.APIException):
    status_code = status.HTTP_411_LENGTH_REQUIRED
    default_detail = (
        "Send Content-Length with a raw body (chunked transfer encoding is not supported)."
    )
    default_code = "length_required"


class StorageUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "storage_failed"


def _read_limit_body(exc: services.ReadLimitExceeded, context: dict) -> dict:
    # Serialized here, not by a ValidationError: DRF turns every value of an error into a
    # string, and `allowed` is a number a client compares with what it asked for.
    data = {"detail": str(exc), "limit": exc.limit, "allowed": exc.allowed}
    return s.ReadLimitSerializer(data).data


LIMIT_RESPONSE = OpenApiResponse(
    s.ReadLimitSerializer,
    description="Over a workspace limit: `limit` names it, `allowed` is its value. Bad "
    "parameters also answer 400, naming the parameter.",
)


def _gone_body(exc: services.ArtifactGone, context: dict) -> dict:
    data = {
        "detail": str(exc),
        "reason": exc.reason,
        "gone_at": exc.at,
        "artifact": exc.artifact,
    }
    return s.GoneSerializer(data, context={"request": context.get("request")}).data


# The exception handler answers these with their status (400, 410); the body carries the
# limit as a number and the tombstone's pointer, which need this app's serializers.
register_body(services.ReadLimitExceeded, _read_limit_body)
register_body(services.ArtifactGone, _gone_body)


WRITE_DESCRIPTION = """
Store a tool's output and get back its **pointer**. Two body forms:

* **Raw**: the body is the output (any content type except multipart; send
  `Content-Length`). Metadata in headers: `X-Run-Id` (required), `X-Command` (required),
  `X-Tool-Call-Id`, `X-Exit-Status`, `X-Complete` (`true`/`false`, default true),
  `X-Dropped-Bytes`/`X-Dropped-Lines` (with `X-Complete: false`), `X-Started-At` and
  `X-Finished-At` (ISO 8601 with a timezone). A non-ASCII value may be sent as
  `utf-8''<percent-encoded>`.
* **Multipart**: a `file` part plus the same metadata as form fields (`run_id`, `command`,
  `tool_call_id`, `exit_status`, `complete`, `dropped_bytes`, `dropped_lines`,
  `started_at`, `finished_at`).

The body is streamed: secrets are redacted, and size, line count, estimated tokens and the
sha256 of the stored bytes are computed on the way to storage. The pointer exists only once
the content is fully stored: an interrupted or failed write answers an error and leaves
nothing. **201** for a new artifact; **200** with the same pointer when the same run,
tool-call id and content were stored before (a retry). A run-scoped token may write only to
its run (403).
"""


@extend_schema(tags=["artifacts"])
class ArtifactViewSet(WorkspaceScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Bulk tool output behind costed pointers, with bounded reads."""

    serializer_class = s.ArtifactSerializer
    filterset_class = ArtifactFilter
    ordering_fields = ["created_at", "size_bytes", "estimated_tokens"]
    action_roles = {"destroy": Role.EDITOR, "create": Role.EDITOR}
    parser_classes = [MultiPartParser, RawBodyParser]
    upload: ArtifactUploadHandler | None = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular building the schema
            return Artifact.objects.none()
        return selectors.artifacts_for(workspace=self.request.workspace, run_scope=self._run_scope)

    @property
    def _run_scope(self) -> str:
        token = getattr(self.request, "auth", None)
        return getattr(token, "run_id", "") or ""

    def _artifact(self, pk):
        return selectors.artifact_get(
            workspace=self.request.workspace, pk=pk, run_scope=self._run_scope
        )

    def _reader(self) -> services.Reader:
        token = self.request.auth if hasattr(self.request.auth, "run_id") else None
        return services.Reader(actor=self.request.user, token=token, via="api")

    # --- write ---------------------------------------------------------------

    def initialize_request(self, request, *args, **kwargs):
        if request.method == "POST" and request.content_type == "multipart/form-data":
            self.upload = ArtifactUploadHandler(request, lambda: self._open_writer(request))
            request.upload_handlers = [self.upload]
        return super().initialize_request(request, *args, **kwargs)

    def _open_writer(self, django_request) -> services.ArtifactWriter:
        # With a session, Django's CSRF check parses the form before DRF resolves the
        # workspace and the role, so resolve them here too; DRF re-checks them afterwards.
        membership = getattr(django_request, "membership", None) or resolve_api_workspace(
            django_request
        )
        if membership.role < Role.EDITOR:
            raise PermissionDenied("Writing artifacts needs the editor role.")
        return services.ArtifactWriter(workspace=membership.workspace)

    def finalize_response(self, request, response, *args, **kwargs):
        if self.upload is not None:
            self.upload.discard()  # a no-op once published
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(
        summary="Store output and get its pointer",
        description=WRITE_DESCRIPTION,
        request={
            "multipart/form-data": s.MultipartWriteSerializer,
            "application/octet-stream": OpenApiTypes.BINARY,
            "text/plain": OpenApiTypes.STR,
        },
        parameters=[
            OpenApiParameter(header, OpenApiTypes.STR, OpenApiParameter.HEADER, required=False)
            for header in HEADERS.values()
        ],
        responses={
            201: s.ArtifactSerializer,
            200: OpenApiResponse(s.ArtifactSerializer, description="A retry: the same pointer."),
            400: OpenApiResponse(
                description="Bad metadata (names the field) or an interrupted body."
            ),
            403: OpenApiResponse(
                description="Not an editor, or a run-scoped token writing elsewhere."
            ),
            411: OpenApiResponse(description="A raw body without Content-Length."),
            413: OpenApiResponse(description="Over the workspace's max_artifact_bytes."),
            503: OpenApiResponse(description="Storage failed; nothing was stored."),
        },
    )
    def create(self, request):
        token = self.request.auth if hasattr(self.request.auth, "run_id") else None
        try:
            if self.upload is not None:
                stored = self._create_multipart(request, token)
            else:
                stored = self._create_raw(request, token)
        except services.ArtifactTooLarge as exc:
            raise PayloadTooLarge({"detail": str(exc), "limit": "max_artifact_bytes"}) from None
        except StorageFailed as exc:
            raise StorageUnavailable(f"{exc}; nothing was stored") from None
        data = s.ArtifactSerializer(stored.artifact, context={"request": request}).data
        response = Response(data, status=status.HTTP_201_CREATED if stored.created else 200)
        response["Location"] = data["url"]
        return response

    def _fail(self, request, token, reason: str, values: dict | None = None, received: int = 0):
        values = values or {}
        services.artifact_write_failure_record(
            workspace=request.workspace,
            reason=reason,
            run_id=str(values.get("run_id") or ""),
            tool_call_id=str(values.get("tool_call_id") or ""),
            command=str(values.get("command") or ""),
            bytes_received=received,
            actor=request.user,
            token=token,
        )

    def _create_raw(self, request, token):
        values, errors = {}, {}
        for name, header in HEADERS.items():
            try:
                value = header_text(request.headers.get(header))
            except UnicodeDecodeError:
                errors[header] = ["utf-8'' value is not valid percent-encoded UTF-8."]
                continue
            if value is not None:
                values[name] = value.strip()
        metadata = s.WriteInputSerializer(data=values)
        if not metadata.is_valid() or errors:
            errors = {HEADERS.get(k, k): v for k, v in metadata.errors.items()} | errors
            self._fail(request, token, f"bad metadata: {errors}", values)
            raise exceptions.ValidationError(errors)
        length = request.META.get("CONTENT_LENGTH") or ""
        if not length.strip():
            self._fail(request, token, "no Content-Length", values)
            raise LengthRequired()
        try:
            expected = int(length)
        except ValueError:
            raise exceptions.ValidationError({"Content-Length": "Must be an integer."}) from None
        policy = services.artifact_policy_for(workspace=request.workspace)
        if expected > policy.max_artifact_bytes:
            message = (
                f"Content-Length {expected:,} is over this workspace's max_artifact_bytes "
                f"limit ({policy.max_artifact_bytes:,} bytes)"
            )
            self._fail(request, token, message, values)
            raise PayloadTooLarge({"detail": message, "limit": "max_artifact_bytes"})
        return services.artifact_store(
            workspace=request.workspace,
            source=request._request,  # Django's request reads the body stream in chunks
            expected_bytes=expected,
            actor=request.user,
            token=token,
            **metadata.validated_data,
        )

    def _create_multipart(self, request, token):
        upload = self.upload
        form = {key: request.data.get(key) for key in HEADERS if key in request.data}
        if upload.error is not None:
            received = upload.writer.received if upload.writer else 0
            self._fail(request, token, str(upload.error), form, received)
            if isinstance(upload.error, InputError | PermissionDenied | StorageFailed):
                raise upload.error
            raise exceptions.ValidationError({"file": str(upload.error)})
        if upload.writer is None:
            self._fail(request, token, "no file part", form)
            raise exceptions.ValidationError(
                {"file": "Send the output as a file part named 'file'."}
            )
        if upload.interrupted or not upload.completed:
            self._fail(request, token, "upload interrupted", form, upload.writer.received)
            raise services.WriteInterrupted(
                f"the upload ended after {upload.writer.received:,} bytes, before the file part "
                "was complete; nothing was stored"
            )
        metadata = s.WriteInputSerializer(data=form)
        if not metadata.is_valid():
            self._fail(request, token, f"bad metadata: {metadata.errors}", form)
            raise exceptions.ValidationError(metadata.errors)
        return services.artifact_store(
            workspace=request.workspace,
            source=None,
            staged=upload.writer,
            actor=request.user,
            token=token,
            **metadata.validated_data,
        )

    # --- pointer -------------------------------------------------------------

    @extend_schema(
        summary="List pointers (and tombstones)",
        description="Newest first. Filter by `run_id`, `command` (contains), `tool_call_id` and "
        "`status` (available, truncated, expired, deleted). A run-scoped token sees its run only.",
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        summary="The pointer: what loading would cost",
        description="Metadata only: bytes, lines, estimated tokens, fingerprint, completeness, "
        "redactions, expiry. An expired or deleted artifact answers **410** with the reason, the "
        "date and its tombstone.",
        responses={200: s.ArtifactSerializer, 410: s.GoneSerializer},
    )
    def retrieve(self, request, pk=None):
        artifact = self._artifact(pk)
        services.ensure_readable(artifact)
        return Response(s.ArtifactSerializer(artifact, context={"request": request}).data)

    @extend_schema(
        summary="Delete early",
        description="Editors may delete an artifact before it expires. The content is removed; "
        "the tombstone stays and every pointer to it answers 410 from now on.",
        request=s.DeleteInputSerializer,
        responses={200: s.ArtifactSerializer, 410: s.GoneSerializer},
    )
    def destroy(self, request, pk=None):
        artifact = self._artifact(pk)
        payload = s.DeleteInputSerializer(data=request.query_params)
        payload.is_valid(raise_exception=True)
        artifact = services.artifact_delete(
            artifact=artifact, actor=request.user, reason=payload.validated_data["reason"]
        )
        return Response(s.ArtifactSerializer(artifact, context={"request": request}).data)

    # --- bounded reads ---------------------------------------------------------

    def _read(self, request, pk, query_serializer, read):
        artifact = self._artifact(pk)
        query = query_serializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return artifact, query.validated_data, read(artifact, query.validated_data)

    def _excerpt_response(self, request, pk, mode, query_serializer, read):
        artifact, _, result = self._read(request, pk, query_serializer, read)
        data = s.excerpt_data(artifact, result) | {
            "mode": mode,
            "artifact_lines": artifact.line_count,
            "artifact_bytes": artifact.size_bytes,
        }
        return Response(s.ReadSerializer(data).data)

    @extend_schema(
        summary="The last N lines",
        parameters=[s.LinesQuerySerializer],
        responses={
            200: s.ReadSerializer,
            400: LIMIT_RESPONSE,
            410: s.GoneSerializer,
        },
    )
    @action(detail=True, methods=["get"])
    def tail(self, request, pk=None):
        return self._excerpt_response(
            request,
            pk,
            "tail",
            s.LinesQuerySerializer,
            lambda artifact, q: services.artifact_read_tail(
                artifact=artifact, lines=q["lines"], reader=self._reader()
            ),
        )

    @extend_schema(
        summary="The first N lines",
        parameters=[s.LinesQuerySerializer],
        responses={200: s.ReadSerializer, 400: LIMIT_RESPONSE, 410: s.GoneSerializer},
    )
    @action(detail=True, methods=["get"])
    def head(self, request, pk=None):
        return self._excerpt_response(
            request,
            pk,
            "head",
            s.LinesQuerySerializer,
            lambda artifact, q: services.artifact_read_head(
                artifact=artifact, lines=q["lines"], reader=self._reader()
            ),
        )

    @extend_schema(
        summary="A bounded range of lines or bytes",
        description="`start_line`/`end_line` (1-based, inclusive; end_line past the last line is "
        "clamped) or `start_byte`/`end_byte` (0-based, end exclusive: an excerpt's own offsets "
        "read it back). Over max_read_lines or max_read_bytes answers 400 naming the limit.",
        parameters=[s.RangeQuerySerializer],
        responses={200: s.ReadSerializer, 400: LIMIT_RESPONSE, 410: s.GoneSerializer},
    )
    @action(detail=True, methods=["get"])
    def range(self, request, pk=None):
        return self._excerpt_response(
            request,
            pk,
            "range",
            s.RangeQuerySerializer,
            lambda artifact, q: services.artifact_read_range(
                artifact=artifact, reader=self._reader(), **q
            ),
        )

    @extend_schema(
        summary="Search: matches with line numbers and excerpts",
        description="Plain text by default; `regex=1` for a regular expression (Python `regex` "
        "syntax) stopped after the workspace's search timeout (400). `ignore_case=1`, "
        "`context=N` lines each side, `max_matches=M` (at most the workspace limit). Matches "
        "do not overlap; each carries an excerpt that resolves to the source bytes.",
        parameters=[s.SearchQuerySerializer],
        responses={200: s.SearchSerializer, 400: LIMIT_RESPONSE, 410: s.GoneSerializer},
        examples=[
            OpenApiExample(
                "A failing test",
                value={"artifact_id": "6f1c…", "q": "FAILED", "match_count": 1, "matches": []},
                response_only=True,
            )
        ],
    )
    @action(detail=True, methods=["get"])
    def search(self, request, pk=None):
        artifact, query, result = self._read(
            request,
            pk,
            s.SearchQuerySerializer,
            lambda artifact, q: services.artifact_search(
                artifact=artifact,
                reader=self._reader(),
                q=q["q"],
                is_regex=q["regex"],
                ignore_case=q["ignore_case"],
                context=q["context"],
                max_matches=q["max_matches"],
            ),
        )
        data = {
            "artifact_id": artifact.pk,
            "artifact_sha256": artifact.sha256,
            "q": query["q"],
            "regex": query["regex"],
            "ignore_case": query["ignore_case"],
            "match_count": len(result.matches),
            "truncated": result.truncated,
            "stopped_by": result.stopped_by,
            "bytes_returned": result.bytes_returned,
            "matches": [
                {
                    "line": match.line,
                    "start_byte": match.start_byte,
                    "end_byte": match.end_byte,
                    "excerpt": s.excerpt_data(artifact, match.excerpt),
                }
                for match in result.matches
            ],
        }
        return Response(s.SearchSerializer(data).data)

    @extend_schema(
        summary="The full load",
        description="Streams the stored (redacted) bytes as text/plain, with the sha256 in "
        "`ETag` and `X-Artifact-Sha256`. Refused (400) above the workspace's max_content_bytes.",
        responses={
            (200, "text/plain"): OpenApiTypes.BINARY,
            400: LIMIT_RESPONSE,
            410: s.GoneSerializer,
        },
    )
    @action(detail=True, methods=["get"])
    def content(self, request, pk=None):
        artifact, _, handle = self._read(
            request,
            pk,
            s.ContentQuerySerializer,
            lambda artifact, q: services.artifact_open_content(
                artifact=artifact, reader=self._reader()
            ),
        )
        response = FileResponse(handle, content_type="text/plain; charset=utf-8")
        response["Content-Length"] = str(artifact.size_bytes)
        response["ETag"] = f'"{artifact.sha256}"'
        response["X-Artifact-Sha256"] = artifact.sha256
        response["Content-Disposition"] = f'inline; filename="artifact-{artifact.pk}.log"'
        return response

    @extend_schema(
        summary="The read log: who loaded which portions",
        responses={200: s.ArtifactReadSerializer(many=True)},
    )
    @action(detail=True, methods=["get"])
    def reads(self, request, pk=None):
        artifact = self._artifact(pk)
        page = self.paginate_queryset(selectors.artifact_reads_for(artifact=artifact))
        return self.get_paginated_response(s.ArtifactReadSerializer(page, many=True).data)


@extend_schema(tags=["artifacts"])
class WriteFailureViewSet(WorkspaceReadOnlyViewSet):
    """Writes that stored nothing, with the reason: failures stay visible."""

    serializer_class = s.WriteFailureSerializer
    filterset_fields = ["run_id", "tool_call_id"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ArtifactWriteFailure.objects.none()
        token = getattr(self.request, "auth", None)
        return selectors.write_failures_for(
            workspace=self.request.workspace, run_scope=getattr(token, "run_id", "") or ""
        )
