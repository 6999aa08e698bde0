"""Context Governance: the project package and its core app (workspaces, roles, tokens, jobs, audit)."""

from governance.celery import app as celery_app

__all__ = ("celery_app",)
