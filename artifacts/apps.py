from django.apps import AppConfig


class ArtifactsConfig(AppConfig):
    name = "artifacts"
    verbose_name = "Artifacts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Importing the tasks registers the purge in celery beat's schedule wherever Django
        # starts: web, worker and beat alike.
        from artifacts import tasks  # noqa: F401
