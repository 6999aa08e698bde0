"""The traces card on the home dashboard."""

from django.urls import reverse

from governance.dashboard import DashboardCard
from numfmt import tokens
from traces.selectors import workspace_trace_totals


def card(workspace) -> DashboardCard:
    totals = workspace_trace_totals(workspace=workspace)
    upload_url = reverse("traces:upload", args=[workspace.slug])
    if not totals["sessions"]:
        return DashboardCard(
            title="Traces",
            order=10,
            empty=True,
            empty_message=(
                "No traces yet. Upload Claude Code or Codex transcripts (or a .zip of ~/.claude/projects), "
                "run `manage.py ingest_traces`, or point an OTLP exporter at /v1/traces."
            ),
            action_label="Upload traces",
            action_url=upload_url,
        )
    billed = sum(totals[k] or 0 for k in ("input", "cache_creation", "cache_read", "output"))
    return DashboardCard(
        title="Traces",
        order=10,
        empty=False,
        stats=[
            ("Sessions", f"{totals['sessions']:,}"),
            ("Calls", f"{totals['calls'] or 0:,}"),
            ("Compactions", f"{totals['compactions'] or 0:,}"),
            ("Tokens billed", tokens(billed)),
            ("Largest context", tokens(totals["max_context"])),
        ],
        link_label="Sessions",
        link_url=reverse("traces:session_list", args=[workspace.slug]),
    )
