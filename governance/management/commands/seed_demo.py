"""seed_demo: the `demo` workspace with one user per role and each app's demo data. Idempotent."""

from importlib import import_module

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import transaction

from governance.models import Role, Workspace
from governance.services import membership_set, user_get_or_create, workspace_create

DEMO_SLUG = "demo"
DEMO_USERS = {
    "admin": (Role.ADMIN, "admin-demo-pass"),
    "reviewer": (Role.REVIEWER, "reviewer-demo-pass"),
    "editor": (Role.EDITOR, "editor-demo-pass"),
    "viewer": (Role.VIEWER, "viewer-demo-pass"),
}


class Command(BaseCommand):
    help = "Load the demo workspace, its users (one per role) and demo data. Safe to run twice."

    def handle(self, *args, **options):
        with transaction.atomic():
            workspace = Workspace.objects.filter(slug=DEMO_SLUG).first() or workspace_create(
                slug=DEMO_SLUG, name="Demo team"
            )
            users = {}
            for username, (role, password) in DEMO_USERS.items():
                user = user_get_or_create(username=username, password=password)
                if username == "admin":
                    user.is_staff = user.is_superuser = True
                    user.save(update_fields=["is_staff", "is_superuser"])
                membership_set(workspace=workspace, user=user, role=role)
                users[username] = user
        for config in apps.get_app_configs():
            try:
                module = import_module(f"{config.name}.demo")
            except ModuleNotFoundError as exc:
                if exc.name != f"{config.name}.demo":
                    raise
                continue
            self.stdout.write(f"Seeding {config.verbose_name}…")
            module.seed(workspace=workspace, users=users, stdout=self.stdout)
        self.stdout.write(self.style.SUCCESS("Demo workspace 'demo' is ready. Sign in as:"))
        for username, (role, password) in DEMO_USERS.items():
            self.stdout.write(f"  {username:<9} password: {password:<20} role: {Role(role).label}")
