"""backfill_text_facts [--workspace SLUG]: recompute the calls' text facts from their texts."""

from django.core.management.base import BaseCommand, CommandError

from governance.models import Workspace
from governance.services import workspace_bump_data_version
from traces.ingest.text_facts import text_facts_backfill
from traces.models import Call, CallText, OperatorPrompt


class Command(BaseCommand):
    help = (
        "Recompute each stored call's prompt kind, operator prompt and tool result and error "
        "counts from its text (what behaviour after compaction reads). The migration that "
        "added them ran this once; run it again after changing how prompts are classified "
        "(traces.analysis.post_compaction.message_kind). Writes only what differs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--workspace", default=None, help="Workspace slug (default: all).")

    def handle(self, *args, **options):
        workspaces = Workspace.objects.all()
        if options["workspace"]:
            workspaces = workspaces.filter(slug=options["workspace"])
            if not workspaces.exists():
                raise CommandError(f"--workspace: no workspace {options['workspace']!r}")
        for workspace in workspaces:
            counts = text_facts_backfill(Call, CallText, OperatorPrompt, workspace_id=workspace.pk)
            if counts["updated"]:
                # Cached analyses read the old facts: let them be recomputed.
                workspace_bump_data_version(workspace=workspace)
            self.stdout.write(
                f"{workspace.slug}: {counts['calls']} calls read, {counts['updated']} updated, "
                f"{counts['operator_prompts']} operator prompts"
            )
