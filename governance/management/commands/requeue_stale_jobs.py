"""requeue_stale_jobs [--stale-after SECONDS] [--server-start]: requeue or fail running jobs
whose worker was lost (what the beat task governance.requeue_stale_jobs does every minute)."""

from django.conf import settings
from django.core.management.base import BaseCommand

from governance.celery import app
from governance.services import jobs_requeue_stale


class Command(BaseCommand):
    help = (
        "Requeue running jobs whose heartbeat is older than the stale threshold (their "
        "worker was lost), or fail them after GOVERNANCE_JOB_MAX_ATTEMPTS starts."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--stale-after",
            type=float,
            default=None,
            help=f"Seconds without a heartbeat (default {settings.GOVERNANCE_JOB_STALE_SECONDS}).",
        )
        parser.add_argument(
            "--server-start",
            action="store_true",
            help="The web server is starting (`make run`). Without a broker it runs every job "
            "itself, so no job can be running now: every running job is requeued (and run "
            "here, before the server starts) or failed. With a broker, the usual threshold "
            "applies.",
        )

    def handle(self, *args, stale_after, server_start, **options):
        if server_start and app.conf.task_always_eager and stale_after is None:
            stale_after = 0
        swept = jobs_requeue_stale(stale_after=stale_after)
        self.stdout.write(
            f"Requeued {len(swept.requeued)} job(s){_ids(swept.requeued)}, "
            f"failed {len(swept.failed)}{_ids(swept.failed)}."
        )


def _ids(ids: list[int]) -> str:
    return f" ({', '.join(f'#{pk}' for pk in ids)})" if ids else ""
