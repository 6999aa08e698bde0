"""Trace pages: upload, sessions list, session detail, task-type rules."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render

from governance.htmx import htmx_partial
from governance.models import Job, JobStatus, Role
from governance.services import InputError
from governance.views import WorkspaceListView, WorkspaceTemplateView
from specs.selectors.survival import session_survival_context
from traces import selectors
from traces.analysis import task_types
from traces.charts import AgentSeries, CompactionMark, context_timeline, reconciliation_figure
from traces.filters import SessionFilter
from traces.forms import HookPolicyForm, TelemetryPolicyForm, UploadForm
from traces.models import AgentKind, UploadSource
from traces.pricing import selectors as pricing_selectors
from traces.services import (
    JOB_KIND,
    UploadTooLarge,
    hook_policy_update,
    telemetry_policy_update,
    trace_uploads_receive,
)

PROJECT_CHARS = 26  # two lines of the narrow project column


def project_tail(project: str) -> str:
    """The end of a project path (its most telling part), at most PROJECT_CHARS long; the
    list shows the whole path in the cell's title."""
    if len(project) <= PROJECT_CHARS:
        return project
    return "…\u2060" + project[-(PROJECT_CHARS - 1) :]  # a word joiner: no break after "…"


class SessionListView(WorkspaceListView):
    template_name = "traces/session_list.html"
    filterset_class = SessionFilter
    default_sort = "-started"

    def get_queryset(self):
        return selectors.sessions_for(workspace=self.workspace)

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        if self.invalid_filters and not htmx_partial(request):  # htmx swaps only a 2xx in
            response.status_code = 400
        return response

    def get_context_data(self, **kwargs):
        filterset = kwargs["filterset"]
        # Filters that cannot be applied list nothing (the base view would list everything).
        self.invalid_filters = filterset.is_bound and not filterset.is_valid()
        if self.invalid_filters:
            return super().get_context_data(**{**kwargs, "object_list": []}, invalid_filters=True)
        sessions = list(kwargs.pop("object_list"))
        costs = pricing_selectors.sessions_costs(workspace=self.workspace, sessions=sessions)
        for session in sessions:
            session.cost = costs[session.pk]
            session.project_tail = project_tail(session.project)
        # The cost column shows dollars only; its sources are named once above the table.
        sources = sorted(
            {
                part
                for cost in costs.values()
                if cost.priced_calls
                for part in cost.source.split(" + ")
            }
        )
        return super().get_context_data(object_list=sessions, cost_sources=sources, **kwargs)


class SessionDetailView(WorkspaceTemplateView):
    template_name = "traces/session_detail.html"
    calls_per_page = 100
    rows = 50  # runs and compactions listed before "Show all": a long session has hundreds

    def get(self, request, *args, **kwargs):
        session = selectors.session_get(workspace=self.workspace, pk=kwargs["pk"])
        calls = Paginator(selectors.session_calls(session=session), self.calls_per_page)
        page = calls.get_page(request.GET.get("page"))
        table = pricing_selectors.current_table(workspace=self.workspace)
        page_calls = list(page.object_list)
        for call in page_calls:
            call.cost = pricing_selectors.call_cost(call=call, table=table)
        context = {"session": session, "page_obj": page, "calls": page_calls}
        if htmx_partial(request):
            return render(request, f"{self.template_name}#calls", context)
        agents = list(selectors.session_agents(session=session))
        cost, agent_costs = pricing_selectors.session_and_agents_costs(session=session)
        for agent in agents:
            agent.cost = agent_costs.get(agent.pk)
        compactions = list(selectors.session_compactions(session=session))
        figure, downsampled = self._timeline(session, agents, compactions)
        runs = list(selectors.session_runs(session=session))
        shown = request.GET.get("all")
        context.update(
            agents=agents,
            compactions=compactions,
            compactions_shown=compactions if shown == "compactions" else compactions[: self.rows],
            runs=runs,
            runs_shown=runs if shown == "runs" else runs[: self.rows],
            figure=figure,
            downsampled=downsampled,
            point_count=session.call_count,
            subagent_count=sum(1 for a in agents if a.kind == AgentKind.SUBAGENT),
            uploads=selectors.session_uploads(session=session),
            cost=cost,
            **session_survival_context(session=session, membership=self.membership),
            sources=_sources_context(selectors.session_reconciliation(session=session, limit=50)),
        )
        return render(request, self.template_name, context)

    @staticmethod
    def _timeline(session, agents: list, compactions: list):
        """The context timeline: one series per agent, full compactions marked; and whether
        it was downsampled."""
        labels = {
            a.pk: ("main" if a.kind == AgentKind.MAIN else a.description or a.external_id[:12])
            for a in agents
        }
        main = {a.pk for a in agents if a.kind == AgentKind.MAIN}
        series = [
            AgentSeries(
                label=labels.get(agent_pk, str(agent_pk)),
                is_main=agent_pk in main,
                index=columns["index"],
                context=columns["context"],
            )
            for agent_pk, columns in selectors.session_timeline(session=session).items()
        ]
        marks = [
            CompactionMark(
                c.after_call_index
                if c.after_call_index is not None
                else (c.before_call_index or 0),
                c.pre_tokens,
                c.post_tokens,
                c.trigger,
            )
            for c in compactions
            if c.kind == "full"
        ]
        return context_timeline(series, marks)


class UploadView(WorkspaceTemplateView):
    """Drag and drop transcripts or archives; each upload becomes a job with live progress."""

    template_name = "traces/upload.html"

    def get_context_data(self, **kwargs):
        jobs = Job.objects.filter(workspace=self.workspace, kind=JOB_KIND).select_related(
            "created_by"
        )[:10]
        return super().get_context_data(
            form=kwargs.pop("form", UploadForm()),
            jobs=jobs,
            max_upload=settings.GOVERNANCE_MAX_UPLOAD_BYTES,
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.GOVERNANCE_MAX_UPLOAD_BYTES:
            return self._too_large(
                request,
                f"The upload is {length:,} bytes; the limit is {settings.GOVERNANCE_MAX_UPLOAD_BYTES:,} bytes.",
            )
        form = UploadForm(request.POST, request.FILES)
        if not form.is_valid():
            return render(request, self.template_name, self.get_context_data(form=form), status=400)
        try:
            job = trace_uploads_receive(
                workspace=self.workspace,
                user=request.user,
                files=request.FILES.getlist("files"),
                source=UploadSource.WEB,
                fmt=form.cleaned_data["format"],
            )
        except UploadTooLarge as exc:
            return self._too_large(request, str(exc))
        except InputError as exc:
            form.add_error("files", str(exc))
            return render(request, self.template_name, self.get_context_data(form=form), status=400)
        job.refresh_from_db()  # without a broker the job has already run
        if job.status == JobStatus.FAILED:
            messages.error(request, f"Upload stored, but ingest job #{job.pk} failed: {job.error}")
        elif job.status == JobStatus.SUCCEEDED:
            messages.success(
                request,
                f"Upload stored and ingested by job #{job.pk}: "
                f"{job.counts.get('calls', 0):,} calls in {job.counts.get('sessions', 0):,} sessions.",
            )
        else:
            messages.success(
                request, f"Upload stored. Ingest job #{job.pk} is {job.status}; progress below."
            )
        return redirect("traces:upload", workspace=self.workspace.slug)

    def _too_large(self, request, message):
        return render(
            request, self.template_name, self.get_context_data(too_large=message), status=413
        )


class TaskTypesView(WorkspaceTemplateView):
    template_name = "traces/task_types.html"

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            rules=task_types.__doc__, labels=task_types.LABELS, **kwargs
        )


class TelemetrySettingsView(WorkspaceTemplateView):
    """How identity attributes in OTLP telemetry are stored. Everyone sees it; admins change it."""

    template_name = "traces/telemetry_settings.html"
    write_role = Role.ADMIN

    def get_context_data(self, **kwargs):
        policy = selectors.telemetry_policy_peek(workspace=self.workspace)
        return super().get_context_data(
            policy=policy,
            form=kwargs.pop("form", None)
            or TelemetryPolicyForm(initial={"identity": policy.identity}),
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        form = TelemetryPolicyForm(request.POST)
        if not form.is_valid():
            return render(request, self.template_name, self.get_context_data(form=form), status=400)
        telemetry_policy_update(
            workspace=self.workspace, actor=request.user, identity=form.cleaned_data["identity"]
        )
        messages.success(request, "Telemetry settings saved.")
        return redirect("traces:telemetry_settings", self.workspace.slug)


class HookSettingsView(WorkspaceTemplateView):
    """What `context-governance hook …` answers Claude Code. Everyone sees it; admins change it."""

    template_name = "traces/hook_settings.html"
    write_role = Role.ADMIN

    def specs(self):
        from specs.selectors import specs_for

        return specs_for(workspace=self.workspace)

    def get_context_data(self, **kwargs):
        policy = selectors.hook_policy_peek(workspace=self.workspace)
        spec, version = selectors.hook_restart_spec(workspace=self.workspace, policy=policy)
        initial = {
            "pre_compact_action": policy.pre_compact_action,
            "session_start_context": policy.session_start_context,
            "spec": policy.spec.slug if policy.spec_id else "",
        }
        return super().get_context_data(
            policy=policy,
            restart_spec=spec,
            restart_version=version,
            restart_key=selectors.spec_key(spec, version) if version else "",
            form=kwargs.pop("form", None) or HookPolicyForm(initial=initial, specs=self.specs()),
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        form = HookPolicyForm(request.POST, specs=self.specs())
        if form.is_valid():
            try:
                hook_policy_update(
                    workspace=self.workspace,
                    actor=request.user,
                    pre_compact_action=form.cleaned_data["pre_compact_action"],
                    session_start_context=form.cleaned_data["session_start_context"],
                    spec_slug=form.cleaned_data["spec"],
                )
            except InputError as exc:
                for field, errors in exc.field_errors.items():
                    for error in errors:
                        form.add_error(field if field in form.fields else None, error)
            else:
                messages.success(request, "Hook policy saved.")
                return redirect("traces:hook_settings", self.workspace.slug)
        return render(request, self.template_name, self.get_context_data(form=form), status=400)


FIELD_LABELS = {
    "input_tokens": "input",
    "cache_creation_tokens": "cache write",
    "cache_read_tokens": "cache read",
    "output_tokens": "output",
}


def _sources_context(result) -> dict:
    """The reconciliation, shaped for the session page: rows with labelled fields."""
    return {
        "result": result,
        "compared": len(result.by_source) > 1,
        "totals": [
            {
                "source": source,
                **counts,
                "calls": result.by_source.get(source, 0),
                "cost_usd": result.cost_usd.get(source),
            }
            for source, counts in result.totals.items()
        ],
        "disagreements": [
            {
                "d": d,
                "label": FIELD_LABELS.get(d.field, d.field),
                "transcript": d.values.get("transcript"),
                "span": d.values.get("span"),
                "event": d.values.get("event"),
            }
            for d in result.disagreements
        ],
    }


class ReconciliationView(WorkspaceTemplateView):
    """Tokens by day and source (transcripts, OTLP spans, api_request events) with the
    calls whose sources disagree."""

    template_name = "traces/reconciliation.html"
    day_choices = (30, 90, 365, 3650)

    def get_context_data(self, **kwargs):
        try:
            self.days = min(max(int(self.request.GET.get("days", 90)), 1), 3650)
        except ValueError:
            self.days = 90
        rows = selectors.workspace_reconciliation_days(workspace=self.workspace, days=self.days)
        by_day: dict = {}
        for row in rows:
            row["total"] = sum(row[c] for c in FIELD_LABELS)
            by_day.setdefault(row["day"], {})[row["source"]] = row
        for row in rows:
            reference = by_day[row["day"]].get("transcript")
            if row["source"] != "transcript" and reference and reference["total"]:
                row["difference"] = (row["total"] - reference["total"]) / reference["total"]
            else:
                row["difference"] = None
            row["disagreeing_share"] = (
                row["disagreeing_calls"] / row["calls"] if row["calls"] else None
            )
        has_telemetry = any(row["source"] != "transcript" for row in rows)
        return super().get_context_data(
            rows=sorted(rows, key=lambda r: r["day"], reverse=True),
            figure=reconciliation_figure(rows) if has_telemetry else None,
            has_telemetry=has_telemetry,
            days=self.days,
            day_choices=self.day_choices,
            day_count=len(by_day),
            **kwargs,
        )
