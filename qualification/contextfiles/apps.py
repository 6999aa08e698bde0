from django.apps import AppConfig


class ContextFilesConfig(AppConfig):
    name = "qualification.contextfiles"
    label = "contextfiles"
    verbose_name = "Context files"
    default_auto_field = "django.db.models.BigAutoField"
