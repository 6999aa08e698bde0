"""Pages under /w/<workspace>/qualification/: operating limits and their review here, sweeps
in `sweep_views` and budget audits in `audit_views` (re-exported for urls.py). Thin: parse,
call a service or selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render

from governance.errors import Conflict
from governance.htmx import htmx_partial
from governance.models import Role
from governance.services import InputError
from governance.views import WorkspaceListView, WorkspaceTemplateView
from qualification import charts, filters, forms, selectors, services
from qualification.analysis.limits import RESERVE_ACTIONS, SOURCE_SUGGESTIONS

# Sweep and audit pages live in their own modules; urls.py finds every page here.
from qualification.audit_views import AuditDetailView, AuditListView  # noqa: F401
from qualification.models import LimitStatus
from qualification.sweep_views import (  # noqa: F401
    QualificationAnalyseView,
    QualificationCreateView,
    QualificationDetailView,
    QualificationListView,
    QualificationLockView,
    QualificationUploadView,
    ResultsCsvView,
    TrialListView,
    TrialsCsvView,
    qualification_context,
)
from traces.analytics.recommendation_views import recommendation_context

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
        context = limit_context(request, limit)
        if limit.is_active:
            context.update(
                recommendation_context(
                    request,
                    workspace=self.workspace,
                    model=limit.qualification.configuration.model_name,
                    workload=limit.qualification.workload.name,
                )
            )
        return render(request, self.template_name, context)


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
