from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces"
    default_auto_field = "django.db.models.BigAutoField"
