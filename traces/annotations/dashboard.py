"""The annotations card on the home dashboard."""

from django.db.models import Count, Q
from django.urls import reverse

from governance.dashboard import DashboardCard
from traces.annotations.models import AnnotationQueue, Divergence, MarkKind, QueueStatus


def card(workspace) -> DashboardCard:
    current = Divergence.objects.filter(workspace=workspace, replaced_at__isnull=True)
    totals = current.aggregate(
        marks=Count("id"),
        runs=Count("run", distinct=True),
        annotators=Count("annotator", distinct=True, filter=Q(kind=MarkKind.MARK)),
    )
    queues = AnnotationQueue.objects.filter(workspace=workspace, status=QueueStatus.OPEN).count()
    queue_url = reverse("annotations:queue_list", args=[workspace.slug])
    if not totals["marks"] and not queues:
        return DashboardCard(
            title="Divergence annotations",
            order=15,
            empty=True,
            empty_message=(
                "No divergences marked yet. Open a session's trace viewer and press d at the first "
                "step that went wrong, or build an annotation queue of runs to review."
            ),
            action_label="Annotation queues",
            action_url=queue_url,
        )
    finals = current.filter(kind=MarkKind.ADJUDICATION).count()
    return DashboardCard(
        title="Divergence annotations",
        order=15,
        empty=False,
        stats=[
            ("Runs marked", f"{totals['runs']:,}"),
            ("Marks", f"{totals['marks'] - finals:,}"),
            ("Annotators", f"{totals['annotators']:,}"),
            ("Final marks", f"{finals:,}"),
            ("Open queues", f"{queues:,}"),
        ],
        link_label="Divergences",
        link_url=reverse("annotations:divergence_list", args=[workspace.slug]),
    )
