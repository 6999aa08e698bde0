from django.contrib import admin

from governance.models import ApiToken, AuditEvent, Job, Membership, Workspace


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["workspace", "user", "role"]
    list_filter = ["workspace", "role"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "workspace", "user", "created_at", "last_used_at", "revoked_at"]
    exclude = ["token_hash"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
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
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "workspace", "actor", "action", "object_type", "object_id"]
    list_filter = ["action"]
