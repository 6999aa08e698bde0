from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "traces.annotations"
    label = "annotations"
    verbose_name = "Annotations"
    default_auto_field = "django.db.models.BigAutoField"
