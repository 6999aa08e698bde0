"""The artifacts card on the workspace dashboard."""

from django.template.defaultfilters import filesizeformat
from django.urls import reverse

from artifacts import selectors
from governance.dashboard import DashboardCard
from numfmt import tokens


def card(workspace) -> DashboardCard:
    totals = selectors.artifact_totals(workspace=workspace)
    url = reverse("artifacts:list", args=[workspace.slug])
    count = totals["count"] or 0
    return DashboardCard(
        title="Artifacts",
        order=50,
        stats=[
            ("Stored", f"{count:,}"),
            ("Size", filesizeformat(totals["bytes"] or 0)),
            ("Est. tokens", tokens(totals["tokens"] or 0)),
        ],
        empty=count == 0,
        empty_message="No bulk output stored yet. Point your agent harness at "
        "POST /api/v1/artifacts/ to keep long logs out of the context window.",
        action_label="How to store output",
        action_url=url,
        link_label="All artifacts",
        link_url=url,
    )
