"""Pages under /w/<workspace>/context-files/: files, the ledger, drift, evaluations, a calculator."""

from __future__ import annotations

import csv
import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from governance.htmx import htmx_partial
from governance.models import Role
from governance.services import InputError
from governance.views import WorkspaceTemplateView
from qualification.analysis.paired import PairedTable
from qualification.contextfiles import forms, selectors, services
from qualification.contextfiles.analysis.evaluation import bare_table_summary
from qualification.contextfiles.charts import forest_plot
from qualification.contextfiles.models import Evaluation


def _wanted_revision(request):
    return request.GET.get("revision") or None


class FileListView(WorkspaceTemplateView):
    template_name = "contextfiles/file_list.html"

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            rows=selectors.file_summaries(workspace=self.workspace),
            evaluations=selectors.evaluations_for(workspace=self.workspace)[:20],
            listings=selectors.listings_for(workspace=self.workspace)[:10],
            **kwargs,
        )


class ImportView(WorkspaceTemplateView):
    template_name = "contextfiles/file_import.html"
    read_role = Role.EDITOR

    def get_context_data(self, **kwargs):
        form = kwargs.pop("form", None)
        if form is None:
            initial = {}
            file_pk = self.request.GET.get("file")
            if file_pk:
                existing = selectors.context_file_get(workspace=self.workspace, pk=file_pk)
                initial = {"repository": existing.repository, "path": existing.path}
            form = forms.ImportForm(initial=initial)
        return super().get_context_data(form=form, **kwargs)

    def post(self, request, *args, **kwargs):
        form = forms.ImportForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                result = services.context_file_import(
                    workspace=self.workspace,
                    repository=form.cleaned_data["repository"],
                    path=form.cleaned_data["path"],
                    revision=form.cleaned_data["revision"],
                    text=form.cleaned_data["text"],
                    actor=request.user,
                )
            except InputError as exc:
                forms.apply_input_error(form, exc)
            else:
                revision = result.revision
                if result.created:
                    messages.success(
                        request,
                        f"Imported revision {revision.revision}: "
                        f"{revision.instruction_count} instructions, ≈{revision.token_estimate:,} "
                        "tokens. Drift checks are running.",
                    )
                else:
                    messages.info(request, f"Revision {revision.revision} was already imported.")
                url = self.wreverse("contextfiles:file_detail", result.context_file.pk)
                return redirect(f"{url}?revision={revision.number}")
        return render(request, self.template_name, self.get_context_data(form=form), status=400)


def _source_blocks(revision, instructions):
    """The file's lines grouped into instruction blocks (highlighted) and plain lines."""
    lines = revision.text.split("\n")
    by_start = {i.line_start: i for i in instructions}
    blocks, number = [], 1
    while number <= len(lines):
        instruction = by_start.get(number)
        if instruction is not None:
            span = range(instruction.line_start, instruction.line_end + 1)
            blocks.append({"instruction": instruction,
                           "lines": [(n, lines[n - 1]) for n in span]})  # fmt: skip
            number = instruction.line_end + 1
        else:
            text = lines[number - 1]
            blocks.append({"instruction": None, "lines": [(number, text)],
                           "heading": text.lstrip().startswith("#")})  # fmt: skip
            number += 1
    return blocks


def _filtered_rows(rows: list[dict], filter_form) -> list[dict]:
    """The ledger rows the filter form keeps: of one category, or flagged for review."""
    if not filter_form.is_valid():
        return rows
    category = filter_form.cleaned_data.get("category")
    if category:
        rows = [r for r in rows if r["instruction"].category == category]
    if filter_form.cleaned_data.get("flagged"):
        rows = [r for r in rows if set(r["flags"]) - {"never reviewed"}]
    return rows


class FileDetailView(WorkspaceTemplateView):
    template_name = "contextfiles/file_detail.html"
    regions = {"flag_summary", "drift"}

    def get(self, request, *args, **kwargs):
        context = self.get_context_data(**kwargs)
        region = request.GET.get("region")
        if htmx_partial(request) and region in self.regions:
            return render(request, f"{self.template_name}#{region}", context)
        return render(request, self.template_name, context)

    def get_context_data(self, **kwargs):
        context_file = selectors.context_file_get(workspace=self.workspace, pk=self.kwargs["pk"])
        revision = selectors.revision_get(
            context_file=context_file, number=_wanted_revision(self.request)
        )
        latest = selectors.latest_revision(context_file=context_file)
        filter_form = forms.LedgerFilterForm(self.request.GET or None)
        all_rows = selectors.ledger_rows(revision=revision)
        rows = _filtered_rows(all_rows, filter_form)
        instructions = [r["instruction"] for r in all_rows]
        check = selectors.latest_drift_check(revision=revision)
        listings = selectors.listings_for(workspace=self.workspace)
        return super().get_context_data(
            file=context_file,
            revision=revision,
            latest=latest,
            is_latest=latest.pk == revision.pk,
            revisions=context_file.revisions.order_by("-number"),
            blocks=_source_blocks(revision, instructions),
            rows=rows,
            row_total=len(all_rows),
            flagged=sum(1 for r in all_rows if set(r["flags"]) - {"never reviewed"}),
            filter_form=filter_form,
            category_counts=selectors.category_counts(instructions),
            check=check,
            findings=check.findings.select_related("instruction").all() if check else [],
            commands=selectors.command_rows(check=check, context_file=context_file),
            drift_form=forms.DriftCheckForm(
                listings=listings,
                initial={
                    "listing": selectors.latest_listing(
                        workspace=self.workspace, repository=context_file.repository
                    )
                },
            ),
            verify_form=forms.VerificationForm(),
            diff=selectors.revision_changes(revision=revision),
            evaluations=context_file.evaluations.order_by("-created_at"),
            today=timezone.localdate(),
            **kwargs,
        )


class InstructionView(WorkspaceTemplateView):
    """One ledger row: shown, edited inline (htmx) or on its own page without JavaScript."""

    template_name = "contextfiles/instruction_edit.html"

    def _instruction(self):
        instruction = selectors.instruction_get(workspace=self.workspace, pk=self.kwargs["ipk"])
        if instruction.revision.context_file_id != int(self.kwargs["pk"]):
            raise Http404("No such instruction in this file.")
        return instruction

    def _render(self, request, instruction, form=None, *, editing: bool, status=200, changed=False):
        row = selectors.ledger_row(instruction=instruction)
        latest = selectors.latest_revision(context_file=instruction.revision.context_file)
        context = {"row": row, "file": instruction.revision.context_file,
                   "revision": instruction.revision, "form": form, "editing": editing,
                   "is_latest": latest.pk == instruction.revision_id}  # fmt: skip
        if htmx_partial(request):
            region = "edit_row" if editing else "ledger_row"
            response = render(request, f"contextfiles/file_detail.html#{region}", context)
            if changed:
                response["HX-Trigger"] = "ledgerChanged"
            return response
        return render(request, self.template_name, context, status=status)

    def get(self, request, *args, **kwargs):
        instruction = self._instruction()
        editing = "edit" in request.GET
        if editing and self.membership.role < Role.EDITOR:
            raise PermissionDenied("Editing the ledger needs the editor role.")
        form = forms.LedgerForm(instance=instruction) if editing else None
        return self._render(request, instruction, form, editing=editing)

    def post(self, request, *args, **kwargs):
        instruction = self._instruction()
        form = forms.LedgerForm(request.POST, instance=selectors.instruction_get(
            workspace=self.workspace, pk=instruction.pk))  # fmt: skip
        if form.is_valid():
            try:
                instruction = services.instruction_update_ledger(
                    instruction=instruction,
                    actor=request.user,
                    **{name: form.cleaned_data[name] for name in form.Meta.fields},
                )
            except InputError as exc:
                forms.apply_input_error(form, exc)
            else:
                if htmx_partial(request):
                    return self._render(request, instruction, editing=False, changed=True)
                messages.success(
                    request, f"Saved the ledger entry of instruction #{instruction.position}."
                )
                url = self.wreverse(
                    "contextfiles:file_detail", instruction.revision.context_file_id
                )
                return redirect(f"{url}#ledger-{instruction.pk}")
        return self._render(
            request, instruction, form, editing=True, status=200 if htmx_partial(request) else 400
        )


class DriftCheckStartView(WorkspaceTemplateView):
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        context_file = selectors.context_file_get(workspace=self.workspace, pk=kwargs["pk"])
        revision = selectors.revision_get(
            context_file=context_file, number=request.POST.get("revision")
        )
        form = forms.DriftCheckForm(
            request.POST, listings=selectors.listings_for(workspace=self.workspace)
        )
        if not form.is_valid():
            messages.error(request, "Choose a listing of this workspace.")
        else:
            services.drift_check_start(
                revision=revision, listing=form.cleaned_data["listing"], actor=request.user
            )
            messages.success(request, "Drift checks started.")
        url = self.wreverse("contextfiles:file_detail", context_file.pk)
        return redirect(f"{url}?revision={revision.number}#drift")


class FileSettingsView(WorkspaceTemplateView):
    """The file's review interval, which dates the reviews of undated ledger entries."""

    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        context_file = selectors.context_file_get(workspace=self.workspace, pk=kwargs["pk"])
        form = forms.FileSettingsForm(request.POST)
        if form.is_valid():
            services.context_file_update_settings(
                context_file=context_file,
                review_interval_days=form.cleaned_data["review_interval_days"],
                actor=request.user,
            )
            messages.success(request, "Review interval saved.")
        else:
            messages.error(
                request, "Review interval: " + " ".join(form.errors["review_interval_days"])
            )
        return redirect(self.wreverse("contextfiles:file_detail", context_file.pk) + "#ledger")


class VerificationView(WorkspaceTemplateView):
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        context_file = selectors.context_file_get(workspace=self.workspace, pk=kwargs["pk"])
        form = forms.VerificationForm(request.POST)
        if form.is_valid():
            try:
                services.command_verification_record(
                    context_file=context_file, actor=request.user, **form.cleaned_data
                )
            except InputError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(
                    request,
                    f"Recorded `{form.cleaned_data['command']}` as "
                    f"{'passed' if form.cleaned_data['passed'] else 'failed'}. Run the drift "
                    "checks again to update the findings.",
                )
        else:
            errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
            messages.error(request, f"Not recorded: {errors}")
        url = self.wreverse("contextfiles:file_detail", context_file.pk)
        return redirect(f"{url}#commands")


class ListingsView(WorkspaceTemplateView):
    template_name = "contextfiles/listings.html"

    def get_context_data(self, **kwargs):
        form = kwargs.pop("form", None) or forms.ListingForm(
            initial={"repository": self.request.GET.get("repository", "")}
        )
        return super().get_context_data(
            form=form, listings=selectors.listings_for(workspace=self.workspace)[:50], **kwargs
        )

    def post(self, request, *args, **kwargs):
        form = forms.ListingForm(request.POST, request.FILES)
        if form.is_valid():
            upload = form.cleaned_data["file"]
            if upload.size > services.MAX_LISTING_BYTES:
                form.add_error("file", "Larger than 100 MiB; upload `git ls-files` output instead.")
            else:
                try:
                    listing = services.listing_upload(
                        workspace=self.workspace,
                        repository=form.cleaned_data["repository"],
                        label=form.cleaned_data["label"],
                        data=upload.read(),
                        actor=request.user,
                    )
                except InputError as exc:
                    forms.apply_input_error(form, exc)
                else:
                    skipped = (
                        f", {listing.skipped_count} names skipped" if listing.skipped_count else ""
                    )
                    messages.success(
                        request, f"Listing of {listing.repository}: {listing.path_count:,} paths "
                        f"({listing.source_format}{skipped})."
                    )  # fmt: skip
                    return redirect(self.wreverse("contextfiles:listings"))
        return render(request, self.template_name, self.get_context_data(form=form), status=400)


# --- evaluations -----------------------------------------------------------------------


class EvaluationCreateView(WorkspaceTemplateView):
    template_name = "contextfiles/evaluation_form.html"
    read_role = Role.EDITOR

    def _file(self):
        pk = self.request.GET.get("file") or self.request.POST.get("file")
        if not pk:
            raise Http404("Choose the context file to evaluate.")
        return selectors.context_file_get(workspace=self.workspace, pk=pk)

    def get_context_data(self, **kwargs):
        context_file = kwargs.pop("file", None) or self._file()
        form = kwargs.pop("form", None) or forms.RegistrationForm(
            revisions=context_file.revisions.order_by("-number"),
            initial={"revision": selectors.latest_revision(context_file=context_file),
                     "name": f"{context_file.path} vs no file"},
        )  # fmt: skip
        return super().get_context_data(file=context_file, form=form, **kwargs)

    def post(self, request, *args, **kwargs):
        context_file = self._file()
        form = forms.RegistrationForm(request.POST, revisions=context_file.revisions.all())
        if form.is_valid():
            try:
                evaluation = services.evaluation_register(
                    context_file=context_file, data=form.registration(), actor=request.user
                )
            except InputError as exc:
                forms.apply_input_error(form, exc)
            else:
                messages.success(request, "Registered. It locks when the first trial is accepted.")
                return redirect(self.wreverse("contextfiles:evaluation_detail", evaluation.pk))
        context = self.get_context_data(file=context_file, form=form)
        return render(request, self.template_name, context, status=400)


class EvaluationChangeView(WorkspaceTemplateView):
    template_name = "contextfiles/evaluation_form.html"
    read_role = Role.EDITOR

    def _evaluation(self):
        evaluation = selectors.evaluation_get(workspace=self.workspace, pk=self.kwargs["pk"])
        if evaluation.status == Evaluation.Status.SUPERSEDED:
            successor = selectors.successor_of(evaluation)
            raise PermissionDenied(
                f"This registration was superseded by evaluation #{successor.pk}; change that one."
            )
        return evaluation

    def _initial(self, evaluation):
        return {
            "name": evaluation.name, "revision": evaluation.revision,
            "primary_metric": evaluation.primary_metric,
            "cost_measures": evaluation.cost_measures, "model_name": evaluation.model_name,
            "model_version": evaluation.model_version,
            "harness_version": evaluation.harness_version,
            "decoding": json.dumps(evaluation.decoding),
            "task_set_version": evaluation.task_set_version,
            "expected_tasks": evaluation.expected_tasks, "delta_pp": round(100 * evaluation.delta, 3),
            "margin_pp": round(100 * evaluation.margin, 3),
            "target_power": evaluation.target_power,
            "pilot_discordance": evaluation.pilot_discordance, "notes": evaluation.notes,
            "ablations": [c for a in evaluation.arms.all() if a.kind == "ablation" for c in a.categories],
        }  # fmt: skip

    def get_context_data(self, **kwargs):
        evaluation = kwargs.pop("evaluation", None) or self._evaluation()
        form = kwargs.pop("form", None) or forms.RegistrationForm(
            revisions=evaluation.context_file.revisions.order_by("-number"),
            initial=self._initial(evaluation), changing=True,
        )  # fmt: skip
        return super().get_context_data(
            file=evaluation.context_file, form=form, evaluation=evaluation, **kwargs
        )

    def post(self, request, *args, **kwargs):
        evaluation = self._evaluation()
        form = forms.RegistrationForm(
            request.POST, revisions=evaluation.context_file.revisions.all(), changing=True
        )
        if form.is_valid():
            try:
                result = services.evaluation_change(
                    evaluation=evaluation, data=form.registration(), actor=request.user,
                    reason=form.cleaned_data.get("reason", ""),
                )  # fmt: skip
            except InputError as exc:
                forms.apply_input_error(form, exc)
            else:
                if result.superseded is not None:
                    messages.warning(
                        request,
                        f"The registration was locked, so evaluation #{result.evaluation.pk} now "
                        f"supersedes #{evaluation.pk}; its trials stay with #{evaluation.pk}.",
                    )
                elif result.changed:
                    messages.success(request, "Registration updated: " + ", ".join(result.changed))
                else:
                    messages.info(request, "Nothing changed.")
                return redirect(
                    self.wreverse("contextfiles:evaluation_detail", result.evaluation.pk)
                )
        context = self.get_context_data(evaluation=evaluation, form=form)
        return render(request, self.template_name, context, status=400)


def _results_context(results):
    comparison = results.primary.comparison if results.has_results else None
    return {
        "results": results,
        "comparison": comparison,
        "forest": forest_plot(results) if comparison else None,
        "power": results.power,
    }


class EvaluationDetailView(WorkspaceTemplateView):
    template_name = "contextfiles/evaluation_detail.html"

    def get_context_data(self, **kwargs):
        evaluation = selectors.evaluation_get(workspace=self.workspace, pk=self.kwargs["pk"])
        results = selectors.evaluation_results(evaluation=evaluation)
        return super().get_context_data(
            evaluation=evaluation,
            arms=list(evaluation.arms.all()),
            successor=selectors.successor_of(evaluation),
            upload_form=kwargs.pop("upload_form", None) or forms.TrialUploadForm(),
            decision_form=kwargs.pop("decision_form", None) or forms.DecisionForm(),
            decisions=selectors.decisions_for(evaluation=evaluation),
            trial_count=evaluation.trials.count(),
            trials_csv_url=self.wreverse("contextfiles:trials_csv", evaluation.pk),
            **_results_context(results),
            **kwargs,
        )


class TrialUploadView(WorkspaceTemplateView):
    http_method_names = ["post"]

    template_name = "contextfiles/evaluation_detail.html"

    def post(self, request, *args, **kwargs):
        evaluation = selectors.evaluation_get(workspace=self.workspace, pk=kwargs["pk"])
        form = forms.TrialUploadForm(request.POST, request.FILES)
        errors = []
        if form.is_valid():
            upload = form.cleaned_data.get("file")
            body = upload.read() if upload else form.cleaned_data["text"]
            content_type = upload.content_type if upload else "text/csv"
            try:
                result = services.trials_record(
                    evaluation=evaluation, data=body, content_type=content_type, actor=request.user
                )
            except services.TrialUploadError as exc:
                errors = exc.errors
                form.add_error(None, str(exc))
            except InputError as exc:
                form.add_error(None, str(exc))
            except UnicodeDecodeError:
                form.add_error("file", "This file is not UTF-8 text.")
            else:
                note = " The registration is now locked." if result.locked_now else ""
                already = (
                    f" ({result.already_recorded} already recorded)"
                    if result.already_recorded
                    else ""
                )
                messages.success(request, f"Accepted {result.accepted} trials{already}.{note}")
                return redirect(self.wreverse("contextfiles:evaluation_detail", evaluation.pk))
        view = EvaluationDetailView()
        view.setup(request, *args, **kwargs)
        view.workspace, view.membership = self.workspace, self.membership
        context = view.get_context_data(upload_form=form, upload_errors=errors)
        return render(request, self.template_name, context, status=400)


class DecisionView(WorkspaceTemplateView):
    http_method_names = ["post"]

    template_name = "contextfiles/evaluation_detail.html"
    write_role = Role.REVIEWER

    def post(self, request, *args, **kwargs):
        evaluation = selectors.evaluation_get(workspace=self.workspace, pk=kwargs["pk"])
        form = forms.DecisionForm(request.POST)
        if form.is_valid():
            try:
                services.decision_record(
                    evaluation=evaluation, actor=request.user, **form.cleaned_data
                )
            except InputError as exc:
                forms.apply_input_error(form, exc)
            else:
                messages.success(request, "Decision recorded.")
                url = self.wreverse("contextfiles:evaluation_detail", evaluation.pk)
                return redirect(f"{url}#decisions")
        view = EvaluationDetailView()
        view.setup(request, *args, **kwargs)
        view.workspace, view.membership = self.workspace, self.membership
        return render(
            request, self.template_name, view.get_context_data(decision_form=form), status=400
        )


class TrialsCsvView(WorkspaceTemplateView):
    def get(self, request, *args, **kwargs):
        evaluation = selectors.evaluation_get(workspace=self.workspace, pk=kwargs["pk"])
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="evaluation-{evaluation.pk}-trials.csv"'
        )
        writer = csv.writer(response)
        columns = ["task_id", "arm", "repeat", "success", "adherence", "input_tokens",
                   "output_tokens", "model_calls", "tool_calls", "cost", "latency_ms", "failure_class"]  # fmt: skip
        writer.writerow(columns)
        for trial in selectors.trials_for(evaluation=evaluation):
            writer.writerow(
                [_csv_safe(trial.task_id), trial.arm.name, trial.repeat, str(trial.success).lower(),
                 "" if trial.adherence is None else trial.adherence, trial.input_tokens,
                 trial.output_tokens, trial.model_calls, trial.tool_calls, trial.cost,
                 trial.latency_ms, _csv_safe(trial.failure_class)]
            )  # fmt: skip
        return response


def _csv_safe(value: str) -> str:
    """Spreadsheets run cells that start with = + - @ as formulas; defuse them."""
    return "'" + value if value and value[0] in "=+-@\t\r" else value


class CalculatorView(WorkspaceTemplateView):
    template_name = "contextfiles/calculator.html"

    def get_context_data(self, **kwargs):
        form = forms.CalculatorForm(self.request.GET or None)
        summary = None
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            table = PairedTable(both=data["both"], with_only=data["with_only"],
                                without_only=data["without_only"], neither=data["neither"])  # fmt: skip
            summary = bare_table_summary(
                table, delta=data["delta_pp"] / 100, margin=data["margin_pp"] / 100
            )
        return super().get_context_data(form=form, summary=summary, **kwargs)
