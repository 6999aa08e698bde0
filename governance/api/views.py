"""Core API: the current workspace, jobs, members, tokens and the audit log."""

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import services
from governance.api import serializers
from governance.api.viewsets import WorkspaceReadOnlyViewSet, WorkspaceScopedMixin
from governance.filters import JobFilter
from governance.models import ApiToken, AuditEvent, Job, Membership, Role


class CurrentWorkspaceView(APIView):
    @extend_schema(responses=serializers.CurrentWorkspaceSerializer, summary="Who and where am I")
    def get(self, request):
        data = {
            "workspace": request.workspace,
            "user": request.user.get_username(),
            "role": Role(request.membership.role).label,
        }
        return Response(serializers.CurrentWorkspaceSerializer(data).data)


class JobViewSet(WorkspaceReadOnlyViewSet):
    """Background jobs (ingests, uploads, analyses) with progress, counts and errors."""

    queryset = Job.objects.select_related("created_by")
    serializer_class = serializers.JobSerializer
    filterset_class = JobFilter  # the jobs page's: same names and choices
    ordering_fields = ["created_at", "finished_at"]


class AuditEventViewSet(WorkspaceReadOnlyViewSet):
    """Every state-changing action in the workspace: who, what, when and which object."""

    queryset = AuditEvent.objects.select_related("actor")
    serializer_class = serializers.AuditEventSerializer
    filterset_fields = ["action", "object_type", "object_id"]


class MembershipViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Members of the workspace. Admins add, re-role and remove them."""

    queryset = Membership.objects.select_related("user")
    serializer_class = serializers.MembershipSerializer
    write_role = Role.ADMIN

    @extend_schema(
        request=serializers.MembershipCreateSerializer, responses=serializers.MembershipSerializer
    )
    def create(self, request):
        payload = serializers.MembershipCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        user = get_object_or_404(get_user_model(), username=payload.validated_data["username"])
        membership = services.membership_set(
            workspace=request.workspace,
            user=user,
            role=payload.validated_data["role"],
            actor=request.user,
        )
        return Response(
            serializers.MembershipSerializer(membership).data, status=status.HTTP_201_CREATED
        )

    def perform_destroy(self, instance):
        services.membership_remove(membership=instance, actor=self.request.user)


class ApiTokenViewSet(
    WorkspaceScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Your API tokens in this workspace (admins see everyone's). Only hashes are stored."""

    queryset = ApiToken.objects.select_related("user")
    serializer_class = serializers.ApiTokenSerializer
    write_role = Role.VIEWER

    def get_queryset(self):
        tokens = super().get_queryset()
        if self.request.membership.has_role(Role.ADMIN):
            return tokens
        return tokens.filter(user=self.request.user)

    @extend_schema(
        request=serializers.ApiTokenCreateSerializer,
        responses={201: serializers.IssuedTokenSerializer},
    )
    def create(self, request):
        payload = serializers.ApiTokenCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        issued = services.api_token_create(
            workspace=request.workspace,
            user=request.user,
            actor=request.user,
            **payload.validated_data,
        )
        data = serializers.ApiTokenSerializer(issued.token).data | {"token": issued.plaintext}
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=serializers.ApiTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        token = services.api_token_revoke(token=self.get_object(), actor=request.user)
        return Response(serializers.ApiTokenSerializer(token).data)
