"""The compaction-survival page: the share of settled spec items each compaction kept, by
trigger, and the items lost most often (read from the stored audits)."""

from __future__ import annotations

from governance.models import Role
from governance.views import WorkspaceTemplateView
from specs.selectors.survival import survival_by_trigger
from traces.analytics.views import theme_tabs


class SurvivalPage(WorkspaceTemplateView):
    template_name = "analytics/survival.html"
    read_role = Role.VIEWER

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            summary=survival_by_trigger(workspace=self.workspace),
            themes=theme_tabs(self.workspace),
            theme="analytics:survival",
            **kwargs,
        )
