"""create_workspace SLUG [--name NAME]: create a workspace."""

from django.core.management.base import BaseCommand, CommandError

from governance.models import Workspace
from governance.services import InputError, workspace_create


class Command(BaseCommand):
    help = "Create a workspace."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args, slug, name, **options):
        if Workspace.objects.filter(slug=slug).exists():
            raise CommandError(f"Workspace {slug!r} already exists.")
        try:
            workspace = workspace_create(slug=slug, name=name)
        except InputError as exc:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.field_errors.items()) or exc.message
            ) from exc
        self.stdout.write(f"Created workspace {workspace.slug} ({workspace.name}).")
