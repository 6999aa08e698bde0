"""Core API: the current workspace, jobs, members, invitations, tokens and the audit log."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import services
from governance.api import serializers
from governance.api.viewsets import (
    WorkspaceReadOnlyViewSet,
    WorkspaceScopedMixin,
    WorkspaceViewSet,
)
from governance.filters import JobFilter
from governance.models import (
    ApiToken,
    AuditEvent,
    Invitation,
    InvitationStatus,
    Job,
    Membership,
    Role,
)


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
    """Members of the workspace. Admins change roles and remove members; new members come
    in through invitations (`/invitations/`), which they accept themselves."""

    queryset = Membership.objects.select_related("user")
    serializer_class = serializers.MembershipSerializer
    write_role = Role.ADMIN

    @extend_schema(
        request=serializers.MembershipRoleSerializer, responses=serializers.MembershipSerializer
    )
    def partial_update(self, request, pk=None):
        membership = self.get_object()
        payload = serializers.MembershipRoleSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        membership = services.membership_set(
            workspace=request.workspace,
            user=membership.user,
            role=payload.validated_data["role"],
            actor=request.user,
        )
        return Response(serializers.MembershipSerializer(membership).data)

    def perform_destroy(self, instance):
        services.membership_remove(membership=instance, actor=self.request.user)


class InvitationViewSet(WorkspaceViewSet):
    """Open invitations (admins only). The answer to an invitation is the same whether or
    not its invitee is a user of this instance; the invitee accepts in the browser."""

    queryset = Invitation.objects.filter(status=InvitationStatus.PENDING).select_related(
        "invited_by"
    )
    serializer_class = serializers.InvitationSerializer
    read_role = Role.ADMIN
    write_role = Role.ADMIN

    @extend_schema(
        request=serializers.InvitationCreateSerializer,
        responses={201: serializers.InvitationSerializer},
    )
    def create(self, request):
        payload = serializers.InvitationCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        invitation = services.invitation_create(
            workspace=request.workspace,
            invitee=payload.validated_data["invitee"],
            role=payload.validated_data["role"],
            actor=request.user,
        )
        return Response(
            serializers.InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(request=None, responses=serializers.InvitationSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        invitation = services.invitation_revoke(invitation=self.get_object(), actor=request.user)
        return Response(serializers.InvitationSerializer(invitation).data)


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
