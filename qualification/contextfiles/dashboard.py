"""Dashboard card: standing context files, flagged ledger entries and the latest verdict."""

from django.urls import reverse

from governance.dashboard import DashboardCard
from qualification.contextfiles import selectors


def card(workspace) -> DashboardCard:
    rows = selectors.file_summaries(workspace=workspace)
    if not rows:
        return DashboardCard(
            title="Context files",
            order=40,
            empty=True,
            empty_message="No AGENTS.md or CLAUDE.md yet. Import one to build its instruction "
            "ledger and check it for drift.",
            action_label="Import a context file",
            action_url=reverse("contextfiles:file_import", args=[workspace.slug]),
        )
    evaluations = [r["evaluation"] for r in rows if r["evaluation"] is not None]
    latest = max(evaluations, key=lambda e: e.created_at, default=None)
    verdict = "–"
    if latest is not None:
        results = selectors.evaluation_results(evaluation=latest)
        verdict = (
            results.primary.comparison.verdict.value if results.has_results else "awaiting trials"
        )
    return DashboardCard(
        title="Context files",
        order=40,
        empty=False,
        stats=[
            ("Files", str(len(rows))),
            ("Flagged instructions", str(sum(r["flagged"] for r in rows))),
            ("Drift findings", str(sum(r["problems"] for r in rows))),
            ("Latest verdict", verdict),
        ],
        link_label="Ledger and evaluations",
        link_url=reverse("contextfiles:file_list", args=[workspace.slug]),
    )
