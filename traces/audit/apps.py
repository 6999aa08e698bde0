from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "traces.audit"
    label = "audit"
    verbose_name = "Utility audit"
    default_auto_field = "django.db.models.BigAutoField"
