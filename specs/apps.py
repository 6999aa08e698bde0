from django.apps import AppConfig


class SpecsConfig(AppConfig):
    name = "specs"
    verbose_name = "Specifications"
    default_auto_field = "django.db.models.BigAutoField"
