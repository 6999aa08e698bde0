"""create_api_token --user NAME --workspace SLUG: print a new token (only the token) on stdout."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from governance.models import Workspace
from governance.services import InputError, api_token_create


class Command(BaseCommand):
    help = "Issue an API token for a user in a workspace. Prints only the token."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--workspace", required=True)
        parser.add_argument("--name", default="cli")
        parser.add_argument("--run-id", default="", help="Limit the token to one run's artifacts.")

    def handle(self, *args, user, workspace, name, run_id, **options):
        user_obj = get_user_model().objects.filter(username=user).first()
        if user_obj is None:
            raise CommandError(f"No user {user!r}.")
        workspace_obj = Workspace.objects.filter(slug=workspace).first()
        if workspace_obj is None:
            raise CommandError(f"No workspace {workspace!r}.")
        try:
            issued = api_token_create(
                workspace=workspace_obj, user=user_obj, name=name, run_id=run_id
            )
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(issued.plaintext)
