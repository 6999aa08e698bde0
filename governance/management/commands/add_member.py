"""add_member SLUG USERNAME ROLE [--create-user --password P]: add or re-role a member."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from governance.models import Role, Workspace
from governance.services import membership_set, user_get_or_create


class Command(BaseCommand):
    help = (
        "Add a user to a workspace with a role (viewer, editor, reviewer or admin), or change it."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("role", help="viewer, editor, reviewer or admin")
        parser.add_argument(
            "--create-user", action="store_true", help="Create the user if missing."
        )
        parser.add_argument("--password", help="Set this password (with --create-user).")

    def handle(self, *args, slug, username, role, create_user, password, **options):
        try:
            role_value = Role.from_name(role)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        workspace = Workspace.objects.filter(slug=slug).first()
        if workspace is None:
            raise CommandError(f"No workspace {slug!r}. Create it with create_workspace first.")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"No user {username!r}. Pass --create-user to create one.")
            user = user_get_or_create(username=username, password=password)
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
        membership_set(workspace=workspace, user=user, role=role_value)
        self.stdout.write(f"{username} is {Role(role_value).label} in {slug}.")
