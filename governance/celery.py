"""The Celery application. Without CELERY_BROKER_URL, tasks run in-process after commit."""

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

app = Celery("governance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.setup_logging.connect
def use_django_logging(loglevel=None, **kwargs):
    """Workers log through settings.LOGGING (every handler masks secrets).

    With a receiver connected, Celery installs no handlers of its own: neither on the root
    logger nor on its task logger, which would otherwise print task logs unfiltered.
    """
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
