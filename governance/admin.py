"""Django admin for the core models.

Writes go through the services, so every change made here is in the audit log like any
other. Tokens, jobs and the audit log itself are read-only: a token can only be revoked
(never un-revoked), and audit rows are never edited or deleted.
"""

from django.contrib import admin, messages
from django.db import transaction

from governance import services
from governance.models import ApiToken, AuditEvent, Job, Membership, Workspace


class ReadOnlyAdmin(admin.ModelAdmin):
    """List and view only: no add, change or delete."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    fields = ["slug", "name"]

    def get_readonly_fields(self, request, obj=None):
        return ["slug"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        if not change:
            created = services.workspace_create(slug=obj.slug, name=obj.name, actor=request.user)
            obj.pk, obj.created_at = created.pk, created.created_at
            return
        if not form.has_changed():
            return
        with transaction.atomic():
            obj.save(update_fields=["name"])
            services.audit_record(
                workspace=obj,
                actor=request.user,
                action="workspace.update",
                obj=obj,
                data={"name": obj.name, "via": "admin"},
            )


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["workspace", "user", "role"]
    list_filter = ["workspace", "role"]
    fields = ["workspace", "user", "role"]

    def get_readonly_fields(self, request, obj=None):
        # Moving a membership to another user or workspace is a remove plus an add.
        return ["workspace", "user"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        membership = services.membership_set(
            workspace=obj.workspace, user=obj.user, role=obj.role, actor=request.user
        )
        obj.pk, obj.created_at = membership.pk, membership.created_at

    def delete_model(self, request, obj):
        services.membership_remove(membership=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for membership in queryset.select_related("workspace", "user"):
            services.membership_remove(membership=membership, actor=request.user)


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ["prefix", "workspace", "user", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["workspace"]
    exclude = ["token_hash"]
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True).select_related("workspace"):
            services.api_token_revoke(token=token, actor=request.user)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "workspace",
        "kind",
        "status",
        "progress_done",
        "progress_total",
        "created_at",
    ]
    list_filter = ["kind", "status"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "workspace", "actor", "action", "object_type", "object_id"]
    list_filter = ["action"]
