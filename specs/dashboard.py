"""The specifications card on the home dashboard."""

from django.urls import reverse

from governance.dashboard import DashboardCard
from specs import selectors
from specs.models import VersionStatus


def card(workspace) -> DashboardCard:
    specs = selectors.specs_for(workspace=workspace)
    total = specs.count()
    if not total:
        return DashboardCard(
            title="Specifications",
            order=40,
            empty=True,
            empty_message=(
                "No specifications yet. Consolidate settled requirements and open questions into "
                "a versioned, reviewed specification, then restart lost runs from it."
            ),
            action_label="Create a specification",
            action_url=reverse("specs:spec_create", args=[workspace.slug]),
        )
    versions = selectors.versions_for(workspace=workspace)
    return DashboardCard(
        title="Specifications",
        order=40,
        empty=False,
        stats=[
            ("Specifications", f"{total:,}"),
            ("Authoritative", f"{versions.filter(status=VersionStatus.AUTHORITATIVE).count():,}"),
            ("Waiting for review", f"{versions.filter(status=VersionStatus.IN_REVIEW).count():,}"),
            ("Restart packages", f"{selectors.packages_for(workspace=workspace).count():,}"),
        ],
        link_label="Specifications",
        link_url=reverse("specs:spec_list", args=[workspace.slug]),
    )
