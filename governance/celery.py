"""The Celery application. Without CELERY_BROKER_URL, tasks run in-process after commit."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

app = Celery("governance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
