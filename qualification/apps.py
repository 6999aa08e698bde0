from django.apps import AppConfig


class QualificationConfig(AppConfig):
    name = "qualification"
    verbose_name = "Qualification"
    default_auto_field = "django.db.models.BigAutoField"
