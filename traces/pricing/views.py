"""Price table pages: the current table and its history, one version, and editing a price."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from governance.errors import InputError
from governance.models import Role
from governance.views import WorkspaceTemplateView
from traces.pricing import charts, selectors, services
from traces.pricing.analysis.list_prices import AS_OF
from traces.pricing.forms import ModelPriceForm


class PriceTablePage(WorkspaceTemplateView):
    """The current version (or `number`), every version, and for editors the actions."""

    template_name = "pricing/price_table.html"

    def get_context_data(self, **kwargs):
        versions = list(selectors.price_table_versions(workspace=self.workspace))
        if "number" in self.kwargs:
            version = selectors.price_table_version_get(
                workspace=self.workspace, number=self.kwargs["number"]
            )
        else:
            version = versions[0] if versions else None
        return super().get_context_data(
            version=version,
            is_current=bool(versions) and version is not None and version.pk == versions[0].pk,
            prices=list(selectors.model_prices(version=version)) if version else [],
            versions=versions,
            can_edit=self.membership.role >= Role.EDITOR,
            list_prices_as_of=AS_OF,
            **kwargs,
        )


class LoadListPricesView(WorkspaceTemplateView):
    write_role = Role.EDITOR

    def post(self, request, *args, **kwargs):
        version = services.price_table_load_list_prices(workspace=self.workspace, user=request.user)
        messages.success(request, f"Saved price table v{version.number}: {version.note}.")
        return redirect(self.wreverse("pricing:price_table"))

    def get(self, request, *args, **kwargs):
        return redirect(self.wreverse("pricing:price_table"))


class ModelPriceEditPage(WorkspaceTemplateView):
    """Add a model's price (`?model=` prefills a name seen in the traces) or change one
    (`?edit=` names the current row); saving makes a new version."""

    template_name = "pricing/price_edit.html"
    read_role = Role.EDITOR
    write_role = Role.EDITOR

    def get_context_data(self, **kwargs):
        editing = self.request.GET.get("edit", "")
        price = (
            selectors.model_price_get(workspace=self.workspace, model=editing) if editing else None
        )
        form = kwargs.pop("form", None) or ModelPriceForm(
            initial=ModelPriceForm.initial_for(price, self.request.GET.get("model", ""))
        )
        current = selectors.price_table_current(workspace=self.workspace)
        return super().get_context_data(
            form=form,
            editing=price,
            next_number=(current.number + 1) if current else 1,
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        form = ModelPriceForm(request.POST)
        editing = request.GET.get("edit", "")
        if form.is_valid():
            try:
                version = services.model_price_set(
                    workspace=self.workspace,
                    user=request.user,
                    values=form.price(),
                    replaces=editing,
                    note=form.cleaned_data["note"],
                )
            except InputError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, f"Saved price table v{version.number}: {version.note}.")
                return redirect(self.wreverse("pricing:price_table"))
        return self.render_to_response(self.get_context_data(form=form), status=400)


class ModelPriceRemoveView(WorkspaceTemplateView):
    write_role = Role.EDITOR

    def post(self, request, *args, **kwargs):
        version = services.model_price_remove(
            workspace=self.workspace, user=request.user, model=request.POST.get("model", "")
        )
        messages.success(request, f"Saved price table v{version.number}: {version.note}.")
        return redirect(self.wreverse("pricing:price_table"))

    def get(self, request, *args, **kwargs):
        return redirect(self.wreverse("pricing:price_table"))


class SubagentCostPage(WorkspaceTemplateView):
    """Cost by telemetry query source and agent name, fork starts marked: a chart and a table."""

    template_name = "pricing/subagent_cost.html"

    def get_context_data(self, **kwargs):
        costs = selectors.subagent_costs(workspace=self.workspace)
        rows = costs["rows"]
        endpoint = self.request.build_absolute_uri("/").rstrip("/")
        return super().get_context_data(
            rows=rows,
            total=costs["total"],
            telemetry_only=costs["telemetry_only"],
            forks=sum(1 for r in rows if r["start_kind"] == "fork"),
            with_telemetry=sum(1 for r in rows if r["query_source"]),
            figure=charts.agent_type_cost(rows)
            if any(r["cost"].priced_calls for r in rows)
            else None,
            otlp_endpoint=endpoint,
            upload_url=self.wreverse("traces:upload"),
            empty_message="Upload transcripts, or send Claude Code's telemetry here so that each "
            "request carries its query source, agent name and cost: CLAUDE_CODE_ENABLE_TELEMETRY=1 "
            "OTEL_LOGS_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf "
            f"OTEL_EXPORTER_OTLP_ENDPOINT={endpoint} "
            'OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer <your API token>" claude',
            **kwargs,
        )
