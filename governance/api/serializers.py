"""Serializers for the core API: jobs, workspace, members, tokens and audit events."""

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework import serializers

from governance.models import ApiToken, AuditEvent, Invitation, Job, Membership, Role, Workspace


class NamedChoiceField(serializers.ChoiceField):
    """A ChoiceField documented as its own named enum, so field names shared across apps
    ("status", "confidence", "consequence") never collide in the OpenAPI schema."""

    def __init__(self, *, enum_name: str, **kwargs):
        self.enum_name = enum_name
        super().__init__(**kwargs)


class NamedChoiceFieldExtension(OpenApiSerializerFieldExtension):
    target_class = "governance.api.serializers.NamedChoiceField"

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        component = ResolvedComponent(
            name=field.enum_name,
            type=ResolvedComponent.SCHEMA,
            object=field.enum_name,
            schema={"type": "string", "enum": [str(value) for value in field.choices]},
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref


class RoleField(serializers.ChoiceField):
    def __init__(self, **kwargs):
        super().__init__(choices=[role.label for role in Role], **kwargs)

    def to_representation(self, value):
        return Role(value).label

    def to_internal_value(self, data):
        return Role.from_name(super().to_internal_value(data))


class JobSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    percent = serializers.IntegerField(read_only=True, allow_null=True)
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = Job
        fields = [
            "id", "url", "kind", "label", "status", "progress_done", "progress_total",
            "progress_unit", "percent", "counts", "error_count", "errors", "error",
            "attempts", "attempt_log", "heartbeat_at", "created_by", "created_at", "started_at",
            "finished_at",
        ]  # fmt: skip

    def get_url(self, job) -> str:
        request = self.context.get("request")
        path = f"/api/v1/jobs/{job.pk}/"
        return request.build_absolute_uri(path) if request else path


class WorkspaceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Workspace
        fields = ["id", "slug", "name", "created_at"]


class CurrentWorkspaceSerializer(serializers.Serializer):
    workspace = WorkspaceSerializer()
    user = serializers.CharField()
    role = serializers.CharField()


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    role = RoleField()

    class Meta:
        model = Membership
        fields = ["id", "username", "role", "created_at"]


class MembershipRoleSerializer(serializers.Serializer):
    role = RoleField()


class InvitationSerializer(serializers.ModelSerializer):
    role = RoleField(read_only=True)
    state = serializers.CharField(source="state_label", read_only=True)
    invited_by = serializers.CharField(source="invited_by.username", default=None, read_only=True)

    class Meta:
        model = Invitation
        fields = ["id", "invitee", "role", "state", "invited_by", "created_at", "expires_at"]


class InvitationCreateSerializer(serializers.Serializer):
    invitee = serializers.CharField(max_length=254, help_text="A username or an e-mail address.")
    role = RoleField()


class ApiTokenSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "user",
            "run_id",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]


class ApiTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, max_length=100)
    run_id = serializers.CharField(required=False, allow_blank=True, max_length=200)


class IssuedTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(help_text="The secret. It is shown only in this response.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "actor",
            "action",
            "object_type",
            "object_id",
            "object_repr",
            "data",
            "created_at",
        ]
