"""Pages of the utility audit: the list, the create form, an audit's packets and progress, the
judging queue (one step at a time) and the results."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponseNotAllowed, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import render

from governance.errors import InputError
from governance.views import WorkspaceTemplateView
from traces.audit import charts, selectors, services
from traces.audit.analysis.fractions import COUNTERFACTUAL_QUESTION
from traces.audit.analysis.sampling import STEPS_PER_RUN
from traces.audit.forms import SIZE_PREFIX, AuditCreateForm, JudgmentForm, StrataFilterForm
from traces.audit.models import AuditStatus, JudgeKind, Judgment
from traces.audit.results import results_dict

ITEM_PREVIEW_CHARS = 4000


class AuditListView(WorkspaceTemplateView):
    template_name = "audit/audit_list.html"

    def get_context_data(self, **kwargs):
        audits = list(selectors.audits_for(workspace=self.workspace)[:100])
        progress = {a.pk: selectors.audit_progress(audit=a) for a in audits}
        return super().get_context_data(
            audits=audits,
            progress=progress,
            can_create=self.membership.has_role(services.CREATE_ROLE),
            **kwargs,
        )


class AuditCreateView(WorkspaceTemplateView):
    template_name = "audit/audit_create.html"
    write_role = services.CREATE_ROLE

    def _page(self, request, form, filter_form, status=200):
        strata = form.strata
        typed = {
            k[len(SIZE_PREFIX) :]: v
            for k, v in (form.data or {}).items()
            if k.startswith(SIZE_PREFIX)
        }
        for row in strata["rows"]:
            for cell in row["cells"]:
                default = min(2 * STEPS_PER_RUN, cell["drawable"])
                cell["value"] = typed.get(cell["key"], default if form.data == {} else "")
        context = self.get_context_data(
            form=form, filter_form=filter_form, strata=strata, size_prefix=SIZE_PREFIX
        )
        return render(request, self.template_name, context, status=status)

    def get(self, request, *args, **kwargs):
        filter_form = StrataFilterForm.from_query(request.GET)
        exclude = filter_form.exclude
        strata = selectors.strata_table(workspace=self.workspace, exclude_forks=exclude)
        form = AuditCreateForm(strata=strata, initial={"exclude_forks": exclude})
        return self._page(request, form, filter_form)

    def post(self, request, *args, **kwargs):
        form = AuditCreateForm(request.POST, strata={})
        exclude = form.data.get("exclude_forks", "True").strip().lower() not in {"false", "0"}
        filter_form = StrataFilterForm.from_query(
            {"filtered": "1", **({"exclude_forks": "on"} if exclude else {})}
        )
        form.strata = selectors.strata_table(workspace=self.workspace, exclude_forks=exclude)
        if form.is_valid():
            try:
                audit = services.audit_create(
                    workspace=self.workspace,
                    actor=request.user,
                    name=form.cleaned_data["name"],
                    strata_sizes=form.cleaned_data["strata_sizes"],
                    seed=form.cleaned_data.get("seed"),
                    exclude_forks=exclude,
                )
            except InputError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(
                    request, f"Audit “{audit.name}” created: its packets are being built."
                )
                return HttpResponseRedirect(self.wreverse("audit:detail", audit.pk))
        return self._page(request, form, filter_form, status=400)


class AuditDetailView(WorkspaceTemplateView):
    template_name = "audit/audit_detail.html"

    def get_context_data(self, **kwargs):
        audit = selectors.audit_get(workspace=self.workspace, pk=self.kwargs["pk"])
        packets = list(
            selectors.packets_of(audit=audit).defer("data").prefetch_related("steps")[:500]
        )
        return super().get_context_data(
            audit=audit,
            packets=packets,
            progress=selectors.audit_progress(audit=audit),
            can_judge=self.membership.has_role(services.JUDGE_ROLE),
            can_close=self.membership.has_role(services.CREATE_ROLE),
            **kwargs,
        )


class AuditStatusView(WorkspaceTemplateView):
    """Close an open audit (it takes no more judgments) or reopen a closed one. POST only;
    the service checks the role and records the change in the audit log."""

    write_role = services.CREATE_ROLE

    def get(self, request, *args, **kwargs):
        return HttpResponseNotAllowed(["POST"])

    def post(self, request, *args, **kwargs):
        audit = selectors.audit_get(workspace=self.workspace, pk=self.kwargs["pk"])
        status = request.POST.get("status", "")
        services.audit_set_status(audit=audit, actor=request.user, status=status)
        messages.success(
            request,
            f"Audit “{audit.name}” closed: it takes no more judgments; its results stay."
            if status == AuditStatus.CLOSED
            else f"Audit “{audit.name}” reopened: its steps can be judged again.",
        )
        return HttpResponseRedirect(self.wreverse("audit:detail", audit.pk))


class AuditJudgeView(WorkspaceTemplateView):
    """One step of a packet, judged in the browser. Without a step in the URL: your next one."""

    template_name = "audit/audit_judge.html"
    write_role = services.JUDGE_ROLE

    def get(self, request, *args, **kwargs):
        audit = selectors.audit_get(workspace=self.workspace, pk=kwargs["pk"])
        if "step" not in kwargs:
            step = selectors.next_step_for(audit=audit, user=request.user)
            if step is None or audit.status != AuditStatus.OPEN:
                return render(
                    request,
                    self.template_name,
                    self.get_context_data(audit=audit, done=True),
                )
            return HttpResponseRedirect(self.wreverse("audit:judge_step", audit.pk, step.pk))
        step = selectors.step_get(audit=audit, pk=kwargs["step"])
        existing = Judgment.objects.filter(
            step=step, judge_kind=JudgeKind.HUMAN, user=request.user
        ).first()
        initial = None
        if existing:
            initial = {
                "active_item_ids": existing.active_item_ids,
                "helpful_item_ids": existing.helpful_item_ids,
                "verbatim_needed": existing.verbatim_needed,
                "counterfactual": existing.counterfactual,
                "confidence": existing.confidence,
                "note": existing.note,
            }
        form = JudgmentForm(initial=initial, had_through_item=step.had_through_item)
        return self._page(request, audit, step, form, existing=existing)

    def _page(self, request, audit, step, form, *, existing=None, status=200):
        packet = selectors.packet_dict(step.packet)
        step_data = next(s for s in packet["steps"] if s["number"] == step.number)
        items = packet["items"][: step.had_through_item]
        for item in items:
            item["preview"] = item["text"][:ITEM_PREVIEW_CHARS]
            item["cut"] = len(item["text"]) > ITEM_PREVIEW_CHARS
        active = {int(i) for i in (form["active_item_ids"].value() or [])}
        helpful = {int(i) for i in (form["helpful_item_ids"].value() or [])}
        context = self.get_context_data(
            audit=audit,
            step=step,
            packet=packet,
            step_data=step_data,
            items=items,
            active=active,
            helpful=helpful,
            form=form,
            existing=existing,
            question=COUNTERFACTUAL_QUESTION,
            progress=selectors.audit_progress(audit=audit),
        )
        return render(request, self.template_name, context, status=status)

    def post(self, request, *args, **kwargs):
        audit = selectors.audit_get(workspace=self.workspace, pk=kwargs["pk"])
        step = selectors.step_get(audit=audit, pk=kwargs["step"])
        form = JudgmentForm(request.POST, had_through_item=step.had_through_item)
        if form.is_valid():
            data = form.cleaned_data
            try:
                services.judgment_record(
                    step=step,
                    actor=request.user,
                    judge_kind=JudgeKind.HUMAN,
                    active_item_ids=data["active_item_ids"],
                    helpful_item_ids=data["helpful_item_ids"],
                    verbatim_needed=data["verbatim_needed"],
                    counterfactual=data["counterfactual"],
                    confidence=data["confidence"],
                    note=data["note"],
                )
            except InputError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(
                    request, f"Step {step.number} of packet {step.packet.position} judged."
                )
                return HttpResponseRedirect(self.wreverse("audit:judge", audit.pk))
        return self._page(request, audit, step, form, status=400)


class AuditResultsView(WorkspaceTemplateView):
    template_name = "audit/audit_results.html"

    def get_context_data(self, **kwargs):
        audit = selectors.audit_get(workspace=self.workspace, pk=self.kwargs["pk"])
        judge_kind = self.request.GET.get("judge_kind") or None
        if judge_kind not in (None, "human", "llm"):
            judge_kind = None
        confidence = self.request.GET.get("min_confidence") or "low"
        if confidence not in ("low", "medium", "high"):
            confidence = "low"
        results = selectors.audit_results(
            audit=audit, judge_kind=judge_kind, min_confidence=confidence
        )
        data = results_dict(results)
        return super().get_context_data(
            audit=audit,
            results=data,
            judge_kind=judge_kind or "",
            min_confidence=confidence,
            figure=charts.active_by_band_figure(data) if results.n_steps else None,
            **kwargs,
        )


class _Jsonl(WorkspaceTemplateView):
    rows = None
    suffix = ""

    def get(self, request, *args, **kwargs):
        audit = selectors.audit_get(workspace=self.workspace, pk=kwargs["pk"])
        response = StreamingHttpResponse(
            type(self).rows(audit=audit), content_type="application/x-ndjson"
        )
        response["Content-Disposition"] = (
            f'attachment; filename="audit-{audit.pk}-{self.suffix}.jsonl"'
        )
        return response


class PacketsJsonlView(_Jsonl):
    rows = staticmethod(selectors.packets_jsonl)
    suffix = "packets"


class JudgmentsJsonlView(_Jsonl):
    rows = staticmethod(selectors.judgments_jsonl)
    suffix = "judgments"
