"""Pages under /w/<workspace>/qualification/: sweeps and their results, operating limits and
their review, and budget audits. Thin: parse, call a service or selector, render."""

from __future__ import annotations

import csv

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django_htmx.http import HttpResponseStopPolling

from governance.errors import Conflict
from governance.htmx import htmx_partial
from governance.models import Role
from governance.services import InputError
from governance.views import WorkspaceListView, WorkspaceTemplateView
from qualification import charts, filters, forms, selectors, services
from qualification.analysis.limits import RESERVE_ACTIONS, SOURCE_SUGGESTIONS
from qualification.analysis.refusals import RULE_TITLES
from qualification.analysis.sweep import requalification_shifts
from qualification.models import LimitStatus, QualificationAnalysis

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


# --- operating limits --------------------------------------------------------------------


def _limit_formsets(data=None, *, sources=None, stages=None):
    source_initial = [{"source": k, "tokens": v} for k, v in (sources or {}).items()]
    stage_initial = [
        {k: s.get(k) for k in ("key", "label", "max_tokens", "target_tokens", "action")}
        for s in stages or []
    ]
    return (
        forms.SourceLimitFormSet(data, initial=source_initial, prefix="sources"),
        forms.StageBudgetFormSet(data, initial=stage_initial, prefix="stages"),
    )


class LimitFormMixin:
    template_name = "qualification/limit_form.html"

    def _save(self, request, form, source_formset, stage_formset, save):
        if form.is_valid() and source_formset.is_valid() and stage_formset.is_valid():
            values = dict(form.cleaned_data)
            values["source_limits"] = forms.formset_sources(source_formset)
            values["stage_budgets"] = forms.formset_stages(stage_formset)
            try:
                return save(values)
            except InputError as exc:
                forms.apply_input_error(form, str(exc))
            except Conflict as exc:
                form.add_error(None, exc.message)
        return None


class LimitProposeView(LimitFormMixin, WorkspaceTemplateView):
    """Propose an operating limit from a qualification's analysis (editors)."""

    read_role = Role.EDITOR

    def _context(self, qualification, form=None, formsets=None):
        analysis = selectors.analysis_current(qualification=qualification)
        result = analysis.result if analysis else None
        proposed = result["proposed_limit_tokens"] if result else None
        notes = []
        if form is None:
            reserve = (proposed or 0) // 4
            room = (proposed or 0) - reserve
            stages, notes = services.seed_004_stages(room=room) if proposed else ([], [])
            form = forms.LimitForm(
                initial={
                    "name": f"{qualification.configuration.model_name} on {qualification.workload.name}",
                    "max_context_tokens": proposed,
                    "reserve_tokens": reserve,
                    "max_initial_assembly_tokens": room,
                    "reserve_action": "compact",
                    "rationale": result["proposal"]["margin_reason"] if result else "",
                }
            )
            formsets = _limit_formsets(stages=stages)
        return self.get_context_data(
            qualification=qualification,
            result=result,
            form=form,
            source_formset=formsets[0],
            stage_formset=formsets[1],
            template_notes=notes,
            source_suggestions=SOURCE_SUGGESTIONS,
            mode="propose",
        )

    def get(self, request, *args, **kwargs):
        qualification = selectors.qualification_get(workspace=self.workspace, pk=kwargs["pk"])
        return render(request, self.template_name, self._context(qualification))

    def post(self, request, *args, **kwargs):
        qualification = selectors.qualification_get(workspace=self.workspace, pk=kwargs["pk"])
        form = forms.LimitForm(request.POST)
        formsets = _limit_formsets(request.POST)

        def save(values):
            name = values.pop("name")
            return services.operating_limit_propose(
                qualification=qualification, actor=request.user, name=name, values=values
            )

        limit = self._save(request, form, *formsets, save)
        if limit is not None:
            messages.success(
                request, "Limit proposed. A reviewer who did not edit it must approve it."
            )
            return redirect(self.wreverse("qualification:limit_detail", limit.pk))
        context = self._context(qualification, form=form, formsets=formsets)
        return render(request, self.template_name, context, status=400)


class LimitEditView(LimitFormMixin, WorkspaceTemplateView):
    read_role = Role.EDITOR

    def _limit(self):
        limit = selectors.operating_limit_get(workspace=self.workspace, pk=self.kwargs["pk"])
        if limit.status != LimitStatus.PROPOSED:
            messages.error(
                self.request,
                f"This limit is {limit.status} and immutable; propose a new one to supersede it.",
            )
            return limit, redirect(self.wreverse("qualification:limit_detail", limit.pk))
        return limit, None

    def _context(self, limit, form=None, formsets=None):
        form = form or forms.LimitForm(
            initial={
                f: getattr(limit, f)
                for f in (
                    "name",
                    "max_context_tokens",
                    "reserve_tokens",
                    "max_initial_assembly_tokens",
                    "reserve_action",
                    "rationale",
                )
            }
        )
        formsets = formsets or _limit_formsets(
            sources=limit.source_limits, stages=limit.stage_budgets
        )
        return self.get_context_data(
            limit=limit,
            qualification=limit.qualification,
            result=None,
            form=form,
            source_formset=formsets[0],
            stage_formset=formsets[1],
            source_suggestions=SOURCE_SUGGESTIONS,
            mode="edit",
        )

    def get(self, request, *args, **kwargs):
        limit, stop = self._limit()
        return stop or render(request, self.template_name, self._context(limit))

    def post(self, request, *args, **kwargs):
        limit, stop = self._limit()
        if stop:
            return stop
        form = forms.LimitForm(request.POST)
        formsets = _limit_formsets(request.POST)
        saved = self._save(
            request,
            form,
            *formsets,
            lambda values: services.operating_limit_update(
                limit=limit, actor=request.user, **values
            ),
        )
        if saved is not None:
            messages.success(request, "Saved. You edited it, so another reviewer must approve it.")
            return redirect(self.wreverse("qualification:limit_detail", limit.pk))
        return render(request, self.template_name, self._context(limit, form, formsets), status=400)


class LimitListView(WorkspaceListView):
    template_name = "qualification/limit_list.html"
    filterset_class = filters.OperatingLimitFilter
    default_sort = "-created"

    def get_queryset(self):
        return selectors.operating_limits_for(workspace=self.workspace)

    def get_context_data(self, **kwargs):
        latest: dict = {}
        rows = [
            {
                "limit": limit,
                "requalification": selectors.requalification_status(
                    limit=limit, latest_memo=latest
                ),
            }
            for limit in kwargs["object_list"]
        ]
        return {**kwargs, "rows": rows}


def limit_context(request, limit, **extra) -> dict:
    """Everything the limit page shows: the record, its justification, review and checks."""
    stages = [(s["key"], s.get("label") or s["key"]) for s in limit.stage_budgets]
    sources = list(limit.source_limits) or list(SOURCE_SUGGESTIONS)[:4]
    check_form = extra.pop("check_form", None) or forms.BudgetCheckForm(stages=stages)
    allocation_formset = extra.pop("allocation_formset", None) or forms.AllocationFormSet(
        initial=[{"source": s} for s in sources], prefix="allocation"
    )
    analysis = selectors.limit_analysis(limit=limit)
    thumbnail = None
    if analysis is not None and analysis.result["families"]:
        thumbnail = charts.decline_thumbnail(analysis.result, limit_tokens=limit.max_context_tokens)
    review = selectors.limit_review(limit=limit)
    return dict(
        limit=limit,
        qualification=limit.qualification,
        requalification=selectors.requalification_status(limit=limit),
        audits=limit.audits.select_related("created_by")[:10],
        successors=limit.successors.order_by("-created_at"),
        review=review,
        approval=selectors.limit_approval(limit=limit),
        thumbnail=thumbnail,
        approve_form=extra.pop("approve_form", None)
        or forms.LimitApproveForm(
            initial={"reviewed": selectors.limit_review_digest(limit=limit, review=review)}
        ),
        is_contributor=request.user.pk in limit.contributor_ids,
        check_form=check_form,
        allocation_formset=allocation_formset,
        source_suggestions=SOURCE_SUGGESTIONS,
        actions=RESERVE_ACTIONS,
        **extra,
    )


class LimitDetailView(WorkspaceTemplateView):
    template_name = "qualification/limit_detail.html"

    def get(self, request, *args, **kwargs):
        limit = selectors.operating_limit_get(workspace=self.workspace, pk=kwargs["pk"])
        return render(request, self.template_name, limit_context(request, limit))


class LimitApproveView(WorkspaceTemplateView):
    template_name = "qualification/limit_detail.html"
    http_method_names = ["post"]
    write_role = Role.REVIEWER

    def post(self, request, *args, **kwargs):
        limit = selectors.operating_limit_get(workspace=self.workspace, pk=kwargs["pk"])
        form = forms.LimitApproveForm(request.POST)
        if not form.is_valid():  # a comment too long; the service judges the confirmation
            context = limit_context(request, limit, approve_form=form)
            return render(request, self.template_name, context, status=400)
        try:
            services.operating_limit_approve(
                limit=limit,
                reviewer=request.user,
                membership=self.membership,
                confirmed=form.cleaned_data["confirm"],
                comment=form.cleaned_data["comment"],
                reviewed=form.cleaned_data["reviewed"] or None,
            )
        except PermissionDenied as exc:
            context = limit_context(request, limit, approval_error=str(exc))
            return render(request, self.template_name, context, status=403)
        except InputError as exc:
            forms.apply_input_error(form, str(exc))
            context = limit_context(request, limit, approve_form=form)
            return render(request, self.template_name, context, status=400)
        except Conflict as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Approved {limit.name}. It is now the active limit.")
        return redirect(self.wreverse("qualification:limit_detail", limit.pk))


class LimitWithdrawView(WorkspaceTemplateView):
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        limit = selectors.operating_limit_get(workspace=self.workspace, pk=kwargs["pk"])
        try:
            services.operating_limit_withdraw(limit=limit, actor=request.user)
        except Conflict as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Withdrew {limit.name}.")
        return redirect(self.wreverse("qualification:limit_detail", limit.pk))


class LimitCheckView(WorkspaceTemplateView):
    """Run a budget check from the page; it is kept as an assembly audit like an API check."""

    template_name = "qualification/limit_detail.html"
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        limit = selectors.operating_limit_get(workspace=self.workspace, pk=kwargs["pk"])
        stages = [(s["key"], s.get("label") or s["key"]) for s in limit.stage_budgets]
        form = forms.BudgetCheckForm(request.POST, stages=stages)
        allocation_formset = forms.AllocationFormSet(request.POST, prefix="allocation")
        audit = None
        if form.is_valid() and allocation_formset.is_valid():
            allocation = {
                f.cleaned_data["source"].strip(): f.cleaned_data["tokens"]
                for f in allocation_formset
                if f.cleaned_data.get("source") and f.cleaned_data.get("tokens") is not None
            }
            try:
                audit = services.budget_check_record(
                    limit=limit,
                    allocation=allocation,
                    stage=form.cleaned_data["stage"],
                    assembled_prompt=form.cleaned_data["assembled_prompt"],
                    omissions=form.omission_list(),
                    run_ref=form.cleaned_data["run_ref"],
                    source="web",
                    actor=request.user,
                )
            except InputError as exc:
                forms.apply_input_error(form, str(exc))
            except Conflict as exc:
                form.add_error(None, exc.message)
        context = limit_context(
            request, limit, check_form=form, allocation_formset=allocation_formset, check=audit
        )
        if htmx_partial(request):
            # htmx swaps only 2xx answers: the region itself shows the field errors.
            return render(request, f"{self.template_name}#check", context)
        status = 200 if audit else 400
        return render(request, self.template_name, context, status=status)


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
