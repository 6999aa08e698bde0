"""Pages of budget audits."""

from __future__ import annotations

from governance.views import WorkspaceListView, WorkspaceTemplateView
from qualification import charts, filters, selectors

# --- budget audits ------------------------------------------------------------------------


class AuditListView(WorkspaceListView):
    template_name = "qualification/audit_list.html"
    filterset_class = filters.AssemblyAuditFilter
    default_sort = "-created"

    def get_queryset(self):
        return selectors.audits_for(workspace=self.workspace)

    def get_context_data(self, **kwargs):
        return {**kwargs, "counts": selectors.audit_counts(workspace=self.workspace)}


class AuditDetailView(WorkspaceTemplateView):
    template_name = "qualification/audit_detail.html"

    def get_context_data(self, **kwargs):
        audit = selectors.audit_get(workspace=self.workspace, pk=kwargs["pk"])
        limit = audit.operating_limit
        return super().get_context_data(
            audit=audit,
            limit=limit,
            figure=charts.allocation_figure(
                audit.allocation, limit.source_limits, total_limit=audit.limit
            ),
            **kwargs,
        )
