"""The utility audit card on the home dashboard."""

from django.urls import reverse

from governance.dashboard import DashboardCard
from traces.audit.models import Audit, AuditStatus, Judgment


def card(workspace) -> DashboardCard:
    audits = Audit.objects.filter(workspace=workspace)
    url = reverse("audit:list", args=[workspace.slug])
    if not audits.exists():
        return DashboardCard(
            title="Utility audit",
            order=16,
            empty=True,
            empty_message=(
                "No audits yet. Sample steps by task type and context band, then judge which "
                "context each step drew on, in the browser or with an LLM judge through the API."
            ),
            action_label="Utility audits",
            action_url=url,
        )
    judgments = Judgment.objects.filter(workspace=workspace)
    return DashboardCard(
        title="Utility audit",
        order=16,
        empty=False,
        stats=[
            ("Audits", f"{audits.count():,}"),
            ("Open", f"{audits.filter(status=AuditStatus.OPEN).count():,}"),
            ("Steps judged", f"{judgments.values('step').distinct().count():,}"),
            ("Judgments", f"{judgments.count():,}"),
        ],
        link_label="Utility audits",
        link_url=url,
    )
