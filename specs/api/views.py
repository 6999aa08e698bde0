"""Specifications API: specs, versions and their review, diffs, exports, restart packages.

Each view parses input with a serializer, calls one service and renders the result. A stale
base or a lost race is 409 and names the current authoritative version; self-review is 403.
"""

from __future__ import annotations

import json

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, renderers, status, viewsets
from rest_framework import serializers as drf_serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from governance.api.viewsets import WorkspaceScopedMixin
from governance.models import Role
from specs import selectors, services
from specs.api import serializers, survival_serializers
from specs.filters import RestartPackageFilter, SpecFilter, SpecVersionFilter
from specs.formats.restart import (
    Discrepancy,
    Instruction,
    Repository,
    package_json,
    package_markdown,
)
from specs.models import RestartPackage, SourceKind, Spec, SpecVersion, SurvivalVerdict
from specs.selectors import survival as survival_selectors

CONFLICT = OpenApiResponse(description="Stale base or lost race; names the current version.")
FORMAT_PARAM = OpenApiParameter(
    "format", str, enum=["json", "md"], description="json (default) or md (Markdown)."
)


class MarkdownRenderer(renderers.BaseRenderer):
    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, str):
            return data.encode()
        return json.dumps(data, default=str).encode()


class PlainTextRenderer(MarkdownRenderer):
    media_type = "text/plain"
    format = "txt"


class FormatChoiceMixin:
    """`?format=` picks a renderer; an unknown one is a 400 naming the choices, not a 404."""

    def perform_content_negotiation(self, request, force=False):
        try:
            return super().perform_content_negotiation(request, force)
        except Http404:
            formats = ", ".join(r.format for r in self.get_renderers())
            self.request.accepted_renderer = renderers.JSONRenderer()
            self.request.accepted_media_type = "application/json"
            raise drf_serializers.ValidationError({"format": [f"Use one of: {formats}."]}) from None


def attachment(response, filename: str):
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class SpecViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Specifications: the single authoritative statement of settled requirements per subject."""

    queryset = Spec.objects.all()
    serializer_class = serializers.SpecSerializer
    filterset_class = SpecFilter
    ordering_fields = ["title", "created_at", "updated_at"]
    action_roles = {"partial_update": Role.REVIEWER}

    def get_queryset(self):
        return selectors.specs_for(workspace=self.request.workspace)

    @extend_schema(
        request=serializers.SpecCreateSerializer,
        responses={201: serializers.SpecSerializer},
        summary="Create a specification",
    )
    def create(self, request):
        payload = serializers.SpecCreateSerializer(data=request.data, context={"request": request})
        payload.is_valid(raise_exception=True)
        spec = services.spec_create(
            workspace=request.workspace, actor=request.user, **payload.validated_data
        )
        spec = selectors.spec_get(workspace=request.workspace, pk=spec.pk)
        return Response(self.get_serializer(spec).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=serializers.SpecUpdateSerializer,
        responses=serializers.SpecSerializer,
        summary="Change title, summary, owner or consequence (reviewers)",
    )
    def partial_update(self, request, pk=None):
        spec = self.get_object()
        payload = serializers.SpecUpdateSerializer(data=request.data, context={"request": request})
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        services.spec_update(
            spec=spec,
            actor=request.user,
            title=data.get("title", spec.title),
            consequence=data.get("consequence", spec.consequence),
            summary=data.get("summary", spec.summary),
            owner=data.get("owner", spec.owner),
            project=data.get("project", spec.project),
        )
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        methods=["GET"],
        responses=serializers.VersionSummarySerializer(many=True),
        summary="List a specification's versions, newest first",
    )
    @extend_schema(
        methods=["POST"],
        request=serializers.VersionCreateSerializer,
        responses={201: serializers.VersionSerializer, 409: CONFLICT},
        summary="Create a draft version",
        description="`supersedes` must be the current authoritative version (null for the first "
        "version); otherwise 409 names the current one. Items are validated field by field.",
    )
    @action(detail=True, methods=["get", "post"])
    def versions(self, request, pk=None):
        spec = self.get_object()
        if request.method == "GET":
            versions = selectors.versions_of(spec=spec)
            page = self.paginate_queryset(versions)
            data = serializers.VersionSummarySerializer(
                page, many=True, context={"request": request}
            ).data
            return self.get_paginated_response(data)
        payload = serializers.VersionCreateSerializer(
            data=request.data, spec=spec, context={"request": request}
        )
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        version = services.spec_version_create(
            spec=spec,
            author=request.user,
            supersedes=data["supersedes"],
            items=data["items"],
            note=data["note"],
            sources=[_source_input(source) for source in data["sources"]],
        )
        return Response(
            serializers.VersionSerializer(
                selectors.version_get(workspace=request.workspace, pk=version.pk),
                context={"request": request},
            ).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        request=serializers.MarkdownImportSerializer,
        responses={201: serializers.VersionSerializer, 409: CONFLICT},
        summary="Create a draft version from Markdown",
        description="The documented structure (docs/specs.md). Errors name their line.",
    )
    @action(detail=True, methods=["post"], url_path="import")
    def import_markdown(self, request, pk=None):
        spec = self.get_object()
        payload = serializers.MarkdownImportSerializer(
            data=request.data, spec=spec, context={"request": request}
        )
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        version, result = services.spec_version_import(
            spec=spec,
            author=request.user,
            markdown=data["markdown"],
            supersedes=data["supersedes"],
            note=data["note"],
        )
        body = serializers.VersionSerializer(
            selectors.version_get(workspace=request.workspace, pk=version.pk),
            context={"request": request},
        ).data
        body["import"] = {
            "declared_fingerprint": result.declared_fingerprint,
            "matches_declared_fingerprint": result.matches_declared,
            "notices": list(result.notices),
        }
        return Response(body, status=status.HTTP_201_CREATED)


class SpecVersionViewSet(
    FormatChoiceMixin,
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Versions: drafts are edited in place; once submitted a version is immutable."""

    queryset = SpecVersion.objects.all()
    serializer_class = serializers.VersionSerializer
    filterset_class = SpecVersionFilter
    ordering_fields = ["created_at", "submitted_at", "number"]
    action_roles = {"approve": Role.REVIEWER, "reject": Role.REVIEWER}

    def get_queryset(self):
        return selectors.versions_for(workspace=self.request.workspace).prefetch_related(
            selectors.ITEMS_PREFETCH, "sources"
        )

    def get_serializer_class(self):
        return (
            serializers.VersionSummarySerializer
            if self.action == "list"
            else serializers.VersionSerializer
        )

    def _respond(self, version):
        version = selectors.version_get(workspace=self.request.workspace, pk=version.pk)
        return Response(
            serializers.VersionSerializer(version, context={"request": self.request}).data
        )

    @extend_schema(
        request=serializers.VersionContentSerializer,
        responses={200: serializers.VersionSerializer, 409: CONFLICT},
        summary="Replace a draft's note, items and sources",
    )
    def update(self, request, pk=None):
        version = self.get_object()
        payload = serializers.VersionContentSerializer(
            data=request.data, context={"request": request}
        )
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        version = services.spec_version_update(
            version=version,
            actor=request.user,
            items=data["items"],
            note=data["note"],
            sources=[_source_input(source) for source in data["sources"]],
        )
        return self._respond(version)

    @extend_schema(responses={204: None, 409: CONFLICT}, summary="Discard a draft")
    def destroy(self, request, pk=None):
        services.spec_version_discard(version=self.get_object(), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=serializers.SubmitSerializer,
        responses={200: serializers.VersionSerializer, 409: CONFLICT},
        summary="Submit a draft",
        description="High consequence: the version goes to review. Low consequence: it becomes "
        "authoritative now, superseding its predecessor; if it resolves open questions, list "
        "their keys in `acknowledged_resolutions`.",
    )
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        version = self.get_object()
        payload = serializers.SubmitSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        version = services.spec_version_submit(
            version=version,
            actor=request.user,
            acknowledged_resolutions=payload.validated_data["acknowledged_resolutions"],
        )
        return self._respond(version)

    @extend_schema(
        request=serializers.ApproveSerializer,
        responses={200: serializers.VersionSerializer, 403: None, 409: CONFLICT},
        summary="Approve a version in review (reviewers; not its author)",
        description="Atomically supersedes the current authoritative version. Fails with 409 "
        "when the version's base is no longer authoritative or another approval won. Every "
        "open question the version resolves must be acknowledged by key.",
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        version = self.get_object()
        payload = serializers.ApproveSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        version = services.spec_version_approve(
            version=version,
            reviewer=request.user,
            acknowledged_resolutions=payload.validated_data["acknowledged_resolutions"],
            comment=payload.validated_data["comment"],
        )
        return self._respond(version)

    @extend_schema(
        request=serializers.RejectSerializer,
        responses={200: serializers.VersionSerializer, 403: None, 409: CONFLICT},
        summary="Reject a version in review, with a comment (reviewers; not its author)",
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        version = self.get_object()
        payload = serializers.RejectSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        version = services.spec_version_reject(
            version=version, reviewer=request.user, comment=payload.validated_data["comment"]
        )
        return self._respond(version)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "against",
                int,
                description="Another version of the same spec; defaults to the one it supersedes.",
            )
        ],
        responses=serializers.DiffSerializer,
        summary="Compare with another version, key by key",
    )
    @action(detail=True, methods=["get"])
    def diff(self, request, pk=None):
        version = self.get_object()
        against = selectors.comparison_base(version=version, against_id=request.GET.get("against"))
        summary = selectors.version_diff(version=version, against=against).as_summary()
        return Response(
            {"version": version.pk, "against": against.pk if against else None, **summary}
        )

    @extend_schema(
        parameters=[FORMAT_PARAM],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/markdown"): OpenApiTypes.STR,
        },
        summary="Export as Markdown (round-trips through import) or JSON",
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[renderers.JSONRenderer, MarkdownRenderer],
    )
    def export(self, request, pk=None):
        version = self.get_object()
        name = f"{version.spec.slug}-v{version.number}"
        if request.accepted_renderer.format == "md":
            return attachment(Response(selectors.version_markdown(version=version)), f"{name}.md")
        return attachment(Response(selectors.version_json(version=version)), f"{name}.json")


class RestartPackageViewSet(
    FormatChoiceMixin,
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Restart packages: a pinned authoritative spec, an execution handoff, a starting instruction."""

    queryset = RestartPackage.objects.all()
    serializer_class = serializers.PackageSummarySerializer
    filterset_class = RestartPackageFilter
    ordering_fields = ["created_at"]

    def get_queryset(self):
        return selectors.packages_for(workspace=self.request.workspace)

    def _export(self, package, *, include_output=False):
        package = selectors.package_get(workspace=self.request.workspace, pk=package.pk)
        return selectors.package_export(
            package=package,
            absolute=self.request.build_absolute_uri,
            include_output=include_output,
        )

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        summary="A package in full (the JSON export)",
    )
    def retrieve(self, request, pk=None):
        return Response(package_json(self._export(self.get_object())))

    @extend_schema(
        request=serializers.PackageCreateSerializer,
        responses={201: OpenApiTypes.OBJECT, 409: CONFLICT},
        summary="Create a restart package",
        description="`spec_version` must be authoritative now (a superseded one is 409). "
        "Each verification's raw output is stored verbatim with its sha256.",
    )
    def create(self, request):
        payload = serializers.PackageCreateSerializer(
            data=request.data, context={"request": request}
        )
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        handoff = data["handoff"]
        package = services.restart_package_create(
            workspace=request.workspace,
            actor=request.user,
            title=data["title"],
            spec_version=data["spec_version"],
            trace_session=data["trace_session"],
            repository=Repository(**handoff["repository"]),
            completed_changes=handoff["completed_changes"],
            changed_files=handoff["changed_files"],
            current_failures=handoff["current_failures"],
            verifications=[services.VerificationInput(**v) for v in handoff["verifications"]],
            discrepancies=[Discrepancy(**d) for d in handoff["discrepancies"]],
            instruction=Instruction(
                next_action=data["instruction"]["next_action"],
                authoritative_sources=tuple(data["instruction"]["authoritative_sources"]),
            ),
            indicators=data["indicators"],
        )
        return Response(package_json(self._export(package)), status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            FORMAT_PARAM,
            OpenApiParameter(
                "inline_output", bool, description="Embed each verification's raw output."
            ),
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/markdown"): OpenApiTypes.STR,
        },
        summary="Export as JSON (machine-readable) or Markdown (for a person or a fresh agent)",
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[renderers.JSONRenderer, MarkdownRenderer],
    )
    def export(self, request, pk=None):
        inline = request.GET.get("inline_output", "").lower() in {"1", "true", "yes"}
        export = self._export(self.get_object(), include_output=inline)
        name = f"restart-package-{export.id}"
        if request.accepted_renderer.format == "md":
            return attachment(Response(package_markdown(export)), f"{name}.md")
        return attachment(Response(package_json(export)), f"{name}.json")

    @extend_schema(
        responses={(200, "text/plain"): OpenApiTypes.STR},
        summary="A verification's raw output, verbatim",
    )
    @action(
        detail=True,
        methods=["get"],
        url_path=r"verifications/(?P<position>\d+)/output",
        url_name="output",
        renderer_classes=[PlainTextRenderer],
    )
    def output(self, request, pk=None, position=None):
        verification = selectors.verification_get(package=self.get_object(), position=int(position))
        blob = verification.output
        response = HttpResponse(blob.content, content_type="text/plain; charset=utf-8")
        response["X-Content-SHA256"] = blob.sha256
        response["Content-Length"] = str(blob.size_bytes)
        return response


def _source_input(data: dict) -> services.SourceInput:
    if data.get("trace_session"):
        return services.SourceInput(
            SourceKind.TRACE_SESSION, trace_session=data["trace_session"], label=data["label"]
        )
    if data.get("run"):
        return services.SourceInput(SourceKind.TRACE_RUN, run=data["run"], label=data["label"])
    if data.get("divergence"):
        return services.SourceInput(
            SourceKind.DIVERGENCE, divergence=data["divergence"], label=data["label"]
        )
    return services.SourceInput(SourceKind.REFERENCE, url=data["url"], label=data["label"])


class SurvivalVerdictViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """What each compaction summary kept of the governing spec's settled items (the latest and
    earlier audits), with people's corrections."""

    queryset = SurvivalVerdict.objects.all()
    serializer_class = survival_serializers.SurvivalVerdictSerializer
    action_roles = {"correct": Role.EDITOR, "run": Role.EDITOR}

    def get_queryset(self):
        rows = survival_selectors.verdicts_for(workspace=self.request.workspace).order_by(
            "audit__compaction_id", "-audit__ran_at", "position"
        )
        params = self.request.query_params
        for name, field in (
            ("session", "audit__compaction__session_id"),
            ("compaction", "audit__compaction_id"),
        ):
            value = params.get(name)
            if value is not None:
                if not value.isdigit():
                    raise drf_serializers.ValidationError({name: ["An integer id."]})
                rows = rows.filter(**{field: int(value)})
        return rows

    @extend_schema(
        parameters=[
            OpenApiParameter("session", int, description="Only this session's compactions."),
            OpenApiParameter("compaction", int, description="Only this compaction."),
        ],
        summary="List survival verdicts",
        description="One row per settled item per audited compaction: `verdict` (kept or lost) "
        "is a person's correction when there is one, else `computed`. The method and threshold "
        "are documented in docs/specs.md (Survival audit).",
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=survival_serializers.SurvivalCorrectSerializer,
        responses=survival_serializers.SurvivalVerdictSerializer,
        summary="Correct one verdict (editors)",
        description="Sets your verdict (kept or lost) on one item; a re-run of the audit never "
        "overwrites it. `computed` withdraws the correction.",
    )
    @action(detail=True, methods=["post"])
    def correct(self, request, pk=None):
        verdict = self.get_object()
        payload = survival_serializers.SurvivalCorrectSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        services.survival_verdict_correct(
            verdict=verdict,
            actor=request.user,
            verdict_value=payload.validated_data["verdict"],
            note=payload.validated_data["note"],
        )
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        request=survival_serializers.SurvivalRunSerializer,
        responses=survival_serializers.SurvivalRunResultSerializer,
        summary="Audit existing compaction summaries again (editors)",
        description="Runs the audit for every compaction with a summary (in one session, or "
        "the whole workspace) against the current authoritative version; corrections are kept.",
    )
    @action(detail=False, methods=["post"])
    def run(self, request):
        from traces import selectors as trace_selectors

        payload = survival_serializers.SurvivalRunSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        session_id = payload.validated_data.get("session")
        session = (
            trace_selectors.session_get(workspace=request.workspace, pk=session_id)
            if session_id is not None
            else None
        )
        result = services.survival_audits_run(
            workspace=request.workspace, actor=request.user, session=session
        )
        return Response(survival_serializers.SurvivalRunResultSerializer(result).data)
