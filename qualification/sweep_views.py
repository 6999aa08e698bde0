"""Pages of sweeps (qualifications): list, create, the sweep page and its uploads and analysis, trials, and the CSV exports. Thin: parse, call a service or selector, render."""

from __future__ import annotations

import csv

from django.contrib import messages
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django_htmx.http import HttpResponseStopPolling

from governance.errors import Conflict
from governance.htmx import htmx_partial
from governance.models import Role
from governance.services import InputError
from governance.views import WorkspaceListView, WorkspaceTemplateView
from qualification import filters, forms, selectors, services
from qualification.analysis.refusals import RULE_TITLES
from qualification.analysis.sweep import requalification_shifts
from qualification.models import QualificationAnalysis

# --- qualifications ------------------------------------------------------------------


class QualificationListView(WorkspaceListView):
    template_name = "qualification/qualification_list.html"
    filterset_class = filters.QualificationFilter
    default_sort = "-created"

    def get_queryset(self):
        return selectors.qualifications_for(workspace=self.workspace)

    def get_context_data(self, **kwargs):
        page = list(kwargs["object_list"])
        analyses = {
            a.qualification_id: a.result
            for a in QualificationAnalysis.objects.filter(
                workspace=self.workspace, qualification__in=page
            ).order_by("data_version")
        }
        rows = [{"q": q, "result": analyses.get(q.pk)} for q in page]
        return {**kwargs, "rows": rows}


def _supersede_choices(workspace):
    return [
        (q.pk, f"#{q.pk} {q.name} — {q.configuration.model_name} on {q.workload}")
        for q in selectors.qualifications_for(workspace=workspace).filter(
            status__in=forms.SUPERSEDABLE
        )
    ]


class QualificationCreateView(WorkspaceTemplateView):
    template_name = "qualification/qualification_form.html"

    def _form(self, data=None):
        initial = {}
        previous_pk = self.request.GET.get("supersedes")
        if data is None and previous_pk and previous_pk.isdigit():
            previous = selectors.qualification_get(workspace=self.workspace, pk=int(previous_pk))
            config = previous.configuration
            initial = {
                "name": f"{previous.name} (requalification)",
                "model_name": config.model_name,
                "model_version": config.model_version,
                "decoding": config.decoding,
                "harness_version": config.harness_version,
                "prompt_version": config.prompt_version,
                "evaluator_version": config.evaluator_version,
                "workload_name": previous.workload.name,
                "workload_version": previous.workload.version,
                "strata": ", ".join(str(s) for s in previous.strata),
                "threshold": previous.threshold,
                "consequence": previous.consequence,
                "supersedes": previous.pk,
                "analysis_params": previous.analysis_params,
            }
        return forms.QualificationForm(
            data,
            initial=initial,
            supersede_choices=_supersede_choices(self.workspace),
        )

    def get_context_data(self, **kwargs):
        kwargs.setdefault("form", self._form())
        return super().get_context_data(**kwargs)

    def post(self, request, *args, **kwargs):
        form = self._form(request.POST)
        if form.is_valid():
            supersedes = None
            if form.cleaned_data.get("supersedes"):
                supersedes = selectors.qualification_get(
                    workspace=self.workspace, pk=form.cleaned_data["supersedes"]
                )
            try:
                qualification = services.qualification_create(
                    workspace=self.workspace,
                    supersedes=supersedes,
                    actor=request.user,
                    **form.service_kwargs(),
                )
            except InputError as exc:
                forms.apply_input_error(form, str(exc))
            except Conflict as exc:
                form.add_error("supersedes", exc.message)
            else:
                messages.success(request, f"Created {qualification.name}. Upload its trials next.")
                return redirect(self.wreverse("qualification:detail", qualification.pk))
        return render(request, self.template_name, self.get_context_data(form=form), status=400)


class QualificationDetailView(WorkspaceTemplateView):
    """A sweep: configuration, trials, results with their uncertainty, and the proposed limit."""

    template_name = "qualification/qualification_detail.html"

    def get(self, request, *args, **kwargs):
        qualification = selectors.qualification_get(workspace=self.workspace, pk=kwargs["pk"])
        context = qualification_context(request, qualification)
        if htmx_partial(request) and request.GET.get("region") == "analysis":
            response = render(request, f"{self.template_name}#analysis", context)
            if not context["analysis_pending"]:
                response.status_code = HttpResponseStopPolling.status_code
            return response
        return render(request, self.template_name, context)


def _captions(result: dict, previous) -> dict:
    alpha = result["params"]["alpha"]
    sizes = ", ".join(f"{f['family']} {f['tasks']}" for f in result["families"])
    decline = (
        f"Task correctness by stratum: mean of per-task pass rates (n tasks: {sizes}); band = "
        f"two-sided {1 - 2 * alpha:.0%} task-clustered interval, whose lower edge is the one-sided "
        f"{1 - alpha:.0%} bound the fixed-sequence ECL test compares with θ = "
        f"{result['params']['threshold']:g} (grey dashes). Vertical lines: ECL (blue), knee from "
        "the paired-drop test (orange dots), saturation (green), proposed limit (red)."
    )
    if previous is not None:
        decline += f" Grey dashed curves: superseded qualification #{previous.pk}."
    return {"decline": decline}


def qualification_context(request, qualification, **extra) -> dict:
    """Everything the sweep page shows. It only reads: a missing or stale analysis is shown
    as such, with the job computing it if one is queued. The analysis is requested by a POST
    (the trial-load job when a complete upload lands, or the page's Run analysis button)."""
    summary = selectors.trial_summary(qualification=qualification)
    analysis = selectors.analysis_current(qualification=qualification)
    job = None
    if analysis is None and summary["trials"]:
        job = selectors.analysis_job_pending(qualification=qualification)
    shown = analysis or selectors.analysis_latest(qualification=qualification)
    result = shown.result if shown else None
    previous = qualification.supersedes
    previous_result = None
    if previous is not None and result is not None:
        previous_result = selectors.analysis_result_to_compare(qualification=previous)
    figures, captions = {}, {}
    if result and result["families"]:
        captions = _captions(result, previous if previous_result else None)
        figures = selectors.sweep_figures(
            result=result,
            previous_result=previous_result,
            failures=selectors.failure_classes(qualification=qualification),
        )
    return dict(
        qualification=qualification,
        config=qualification.configuration,
        summary=summary,
        analysis=shown,
        analysis_stale=shown is not None and analysis is None,
        analysis_pending=job is not None and analysis is None,
        analysis_job=job,
        result=result,
        previous=previous,
        previous_result=previous_result,
        shifts=requalification_shifts(result, previous_result)
        if result and previous_result
        else [],
        figures=figures,
        captions=captions,
        results_csv_url=reverse(
            "qualification:results_csv", args=[qualification.workspace.slug, qualification.pk]
        ),
        rule_titles=RULE_TITLES,
        uploads=selectors.uploads_for(qualification=qualification)[:10],
        upload_job=selectors.upload_job_running(qualification=qualification),
        upload_form=extra.pop("upload_form", None) or forms.TrialUploadForm(),
        limits=qualification.operating_limits.select_related("approved_by").order_by("-created_at"),
        awaiting_review=selectors.limits_awaiting_review(
            membership=request.membership, qualification=qualification
        ),
        superseded_by=getattr(qualification, "superseded_by", None),
        **extra,
    )


class QualificationUploadView(WorkspaceTemplateView):
    template_name = "qualification/qualification_detail.html"
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        qualification = selectors.qualification_get(workspace=self.workspace, pk=kwargs["pk"])
        form = forms.TrialUploadForm(request.POST, request.FILES)
        if form.is_valid():
            upload_file = form.cleaned_data["file"]
            try:
                upload = services.trial_batch_submit(
                    qualification=qualification,
                    content=upload_file.read(),
                    filename=upload_file.name,
                    content_type=upload_file.content_type or "",
                    source="web",
                    partial=form.cleaned_data["partial"],
                    actor=request.user,
                )
            except InputError as exc:
                form.add_error("file", str(exc))
            except Conflict as exc:
                form.add_error(None, exc.message)
            else:
                messages.info(
                    request,
                    f"Received {upload.original_name}; loading it in job #{upload.job_id}.",
                )
                return redirect(self.wreverse("qualification:detail", qualification.pk))
        context = qualification_context(request, qualification, upload_form=form)
        return render(request, self.template_name, context, status=400)


class QualificationAnalyseView(WorkspaceTemplateView):
    """Queue the analysis of the current trials (a cached computation: viewers may ask)."""

    write_role = Role.VIEWER
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        qualification = selectors.qualification_get(workspace=self.workspace, pk=kwargs["pk"])
        services.analysis_request(qualification=qualification, actor=request.user)
        previous = qualification.supersedes
        # The page compares with the superseded sweep's curves: ask for them too if missing.
        if previous is not None and selectors.trial_summary(qualification=previous)["trials"]:
            services.analysis_request(qualification=previous, actor=request.user)
        return redirect(self.wreverse("qualification:detail", qualification.pk))


class QualificationLockView(WorkspaceTemplateView):
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        qualification = selectors.qualification_get(workspace=self.workspace, pk=kwargs["pk"])
        services.qualification_lock(qualification=qualification, actor=request.user)
        messages.success(request, f"{qualification.name} is locked: it takes no more trials.")
        return redirect(self.wreverse("qualification:detail", qualification.pk))


class TrialListView(WorkspaceListView):
    template_name = "qualification/trial_list.html"
    filterset_class = filters.TrialFilter
    paginate_by = 100
    default_sort = "task"

    def get_queryset(self):
        self.qualification = selectors.qualification_get(
            workspace=self.workspace, pk=self.kwargs["pk"]
        )
        return selectors.trials_for(qualification=self.qualification)

    def get_context_data(self, **kwargs):
        return {**kwargs, "qualification": self.qualification}


class _Echo:
    def write(self, value):
        return value


TRIAL_CSV_COLUMNS = [
    "task_id", "family", "stratum_tokens", "repeat", "retrieval_correct", "task_correct",
    "input_tokens", "output_tokens", "model_calls", "tool_calls", "cost_usd", "latency_ms",
    "failure_class", "session_id",
]  # fmt: skip


class TrialsCsvView(WorkspaceTemplateView):
    """The trials in the upload format, so a download can be uploaded again."""

    def get(self, request, *args, **kwargs):
        qualification = selectors.qualification_get(workspace=self.workspace, pk=kwargs["pk"])
        rows = (
            selectors.trials_for(qualification=qualification)
            .order_by("task__family__key", "task__external_id", "stratum_tokens", "repeat")
            .values_list(
                "task__external_id",
                "task__family__key",
                "stratum_tokens",
                "repeat",
                "retrieval_correct",
                "task_correct",
                "input_tokens",
                "output_tokens",
                "model_calls",
                "tool_calls",
                "cost_usd",
                "latency_ms",
                "failure_class",
                "session_ref",
            )
        )
        writer = csv.writer(_Echo())

        def lines():
            yield writer.writerow(TRIAL_CSV_COLUMNS)
            for row in rows.iterator(chunk_size=2000):
                yield writer.writerow(["" if v is None else v for v in row])

        response = StreamingHttpResponse(lines(), content_type="text/csv")
        response["Content-Disposition"] = (
            f'attachment; filename="qualification-{qualification.pk}-trials.csv"'
        )
        return response


class ResultsCsvView(WorkspaceTemplateView):
    """Per family and stratum: the numbers behind the charts."""

    def get(self, request, *args, **kwargs):
        qualification = selectors.qualification_get(workspace=self.workspace, pk=kwargs["pk"])
        analysis = selectors.analysis_current(qualification=qualification)
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = (
            f'attachment; filename="qualification-{qualification.pk}-results.csv"'
        )
        writer = csv.writer(response)
        writer.writerow(
            [
                "family", "tokens", "tasks", "repeats", "trials", "accuracy", "ci_low", "ci_high",
                "passes_theta", "reliability", "reliability_low", "reliability_high", "retrieval",
                "retrieval_low", "retrieval_high", "input_tokens", "output_tokens", "model_calls",
                "tool_calls", "cost_per_trial_usd", "cost_per_success_usd", "p_ecl_at_least",
            ]
        )  # fmt: skip
        if analysis is None:
            return response
        result = analysis.result
        for family in [*result["families"], *([result["overall"]] if result["overall"] else [])]:
            prob = family.get("p_ecl_at_least") or []
            for index, s in enumerate(family["strata"]):
                writer.writerow(
                    [
                        family["family"], s["tokens"], s["tasks"], s["repeats"], s["trials"],
                        s["accuracy"], *s["ci"], s["passes"], s["reliability"], *s["reliability_ci"],
                        s["retrieval"], *s["retrieval_ci"], s["input_tokens"], s["output_tokens"],
                        s["model_calls"], s["tool_calls"], s["cost"], s["cost_per_success"],
                        prob[index] if index < len(prob) else "",
                    ]
                )  # fmt: skip
        return response
