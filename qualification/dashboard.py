"""The qualification card on the workspace dashboard."""

from django.urls import reverse

from governance.dashboard import DashboardCard
from qualification import selectors
from qualification.models import LimitStatus


def card(workspace) -> DashboardCard:
    qualifications = selectors.qualifications_for(workspace=workspace)
    count = qualifications.count()
    if not count:
        return DashboardCard(
            title="Qualification",
            order=20,
            empty=True,
            empty_message="No qualifications yet. Record a context-size sweep to learn how "
            "much context each model can be trusted with.",
            action_label="New qualification",
            action_url=reverse("qualification:create", args=[workspace.slug]),
        )
    limits = selectors.operating_limits_for(workspace=workspace)
    audits = selectors.audit_counts(workspace=workspace)
    return DashboardCard(
        title="Qualification",
        order=20,
        empty=False,
        stats=[
            ("Qualifications", str(count)),
            ("Active limits", str(limits.filter(status=LimitStatus.APPROVED).count())),
            ("Awaiting review", str(limits.filter(status=LimitStatus.PROPOSED).count())),
            ("Requalification due", str(selectors.requalification_due_count(workspace=workspace))),
            ("Budget checks over", f"{audits['over']} of {audits['total']}"),
        ],
        link_label="Qualifications",
        link_url=reverse("qualification:list", args=[workspace.slug]),
    )
