"""The annotation queue pages: the list and build form, one queue, taking and finishing a run."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.shortcuts import redirect, render

from governance.errors import InputError
from governance.htmx import htmx_partial
from governance.models import Role
from governance.views import WorkspaceTemplateView
from traces.annotations import selectors, services
from traces.annotations.filters import RunFilter, criteria_of
from traces.annotations.forms import QueueForm
from traces.annotations.models import (
    AnnotationQueue,
    QueueAnnotator,
    QueueStatus,
)
from traces.annotations.views.common import PostOnlyView, _int, _window_param
from traces.models import Run


class QueueListView(WorkspaceTemplateView):
    """Queues with their progress; reviewers and admins build new ones from a run filter."""

    template_name = "annotations/queue_list.html"
    write_role = services.QUEUE_BUILD_ROLE

    def _builder(self, data=None, *, bind_form=False):
        run_filter = RunFilter(
            data, queryset=Run.objects.filter(workspace=self.workspace), request=self.request
        )
        members = selectors.annotators_for(workspace=self.workspace)
        users = (
            get_user_model().objects.filter(pk__in=members.values("user_id")).order_by("username")
        )
        initial = {"annotators": [m.user_id for m in members]}
        if data is not None and not bind_form:  # a count preview keeps what was typed
            initial.update({k: data[k] for k in QueueForm.base_fields if data.get(k)})
            if data.getlist("annotators"):
                initial["annotators"] = data.getlist("annotators")
        form = QueueForm(data if bind_form else None, users=users, initial=initial)
        matched = run_filter.qs.count() if data is not None and run_filter.is_valid() else None
        return {"run_filter": run_filter, "form": form, "matched": matched}

    def _page(self, request, builder, status=200):
        page = Paginator(selectors.queues_for(workspace=self.workspace), 25).get_page(
            request.GET.get("page")
        )
        can_build = self.membership.has_role(services.QUEUE_BUILD_ROLE)
        context = self.get_context_data(
            page_obj=page,
            queues=page.object_list,
            can_build=can_build,
            can_annotate=selectors.can_annotate(membership=self.membership),
            total_runs=Run.objects.filter(workspace=self.workspace).count(),
            recent_sessions=selectors.recent_sessions(workspace=self.workspace),
            open_assignments={
                slot.item.queue_id: slot
                for slot in selectors.open_assignments(workspace=self.workspace, user=request.user)
            },
            my_queues=set(
                QueueAnnotator.objects.filter(
                    queue__workspace=self.workspace, user=request.user
                ).values_list("queue_id", flat=True)
            ),
            **(builder if can_build else {}),
        )
        return render(request, self.template_name, context, status=status)

    def get(self, request, *args, **kwargs):
        preview = "preview" in request.GET
        builder = self._builder(request.GET if preview else None)
        if preview and htmx_partial(request):
            return render(request, f"{self.template_name}#preview", builder)
        return self._page(request, builder)

    def post(self, request, *args, **kwargs):
        builder = self._builder(request.POST, bind_form=True)
        run_filter, form = builder["run_filter"], builder["form"]
        if run_filter.is_valid() and form.is_valid():
            data = form.cleaned_data
            try:
                queue = services.queue_build(
                    workspace=self.workspace,
                    actor=request.user,
                    name=data["name"],
                    runs=run_filter.qs,
                    criteria=criteria_of(run_filter),
                    sample_size=data["sample_size"],
                    annotators=list(data["annotators"]),
                    annotators_per_run=data["annotators_per_run"],
                    agreement_window=data["agreement_window"],
                    seed=data.get("seed"),
                )
            except InputError as exc:
                for field, errors in exc.field_errors.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.success(
                    request,
                    f"Queue built: {queue.sample_size} of {queue.matched_runs} matching runs "
                    f"(seed {queue.seed}).",
                )
                return redirect(self.wreverse("annotations:queue_detail", queue.pk))
        return self._page(request, builder, status=400)


class QueueDetailView(WorkspaceTemplateView):
    template_name = "annotations/queue_detail.html"

    def get_context_data(self, **kwargs):
        queue = selectors.queue_get(workspace=self.workspace, pk=self.kwargs["pk"])
        window = _window_param(self.request, queue.agreement_window)
        agreement = selectors.queue_agreement(queue=queue, window=window)
        is_member = queue.members.filter(user=self.request.user).exists()
        is_admin = self.membership.has_role(Role.ADMIN)
        for row in agreement.rows:
            # An annotator sees others' ratings only once the run cannot come to them any more.
            row["visible"] = selectors.marks_visible_to(
                membership=self.membership,
                marks=row["ratings"],
                can_still_mark=is_member and len(row["ratings"]) < queue.annotators_per_run,
            ).revealed
        return super().get_context_data(
            queue=queue,
            progress=selectors.queue_progress(queue=queue),
            agreement=agreement,
            kappa=agreement.kappa,
            steps=agreement.steps,
            window=window,
            is_member=is_member,
            mine=selectors.open_assignment(queue=queue, user=self.request.user),
            can_manage=self.membership.has_role(services.QUEUE_BUILD_ROLE),
            is_admin=is_admin,
            **kwargs,
        )


class QueueNextView(PostOnlyView):
    """POST: take your next run (or your open one) and open it in the viewer."""

    write_role = services.ANNOTATE_ROLE
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        queue = selectors.queue_get(workspace=self.workspace, pk=kwargs["pk"])
        return _go_next(self, request, queue)


def _go_next(view, request, queue: AnnotationQueue):
    try:
        slot = services.queue_next(queue=queue, user=request.user)
    except InputError as exc:
        messages.error(request, exc.message)
        return redirect(view.wreverse("annotations:queue_detail", queue.pk))
    if slot is None:
        messages.info(request, "Nothing left for you in this queue. Thank you!")
        return redirect(view.wreverse("annotations:queue_detail", queue.pk))
    run = slot.item.run
    url = view.wreverse("annotations:run_viewer", run.session_id, run.pk)
    return redirect(f"{url}?queue={queue.pk}")


class QueueFinishView(PostOnlyView):
    """POST: finish your open run with "no divergence", or skip it; then take the next."""

    write_role = services.ANNOTATE_ROLE
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        queue = selectors.queue_get(workspace=self.workspace, pk=kwargs["pk"])
        outcome = request.POST.get("outcome")
        run_id = _int(request.POST.get("run"))
        try:
            if outcome == "skip":
                services.queue_skip(
                    queue=queue,
                    user=request.user,
                    run_id=run_id,
                    reason=request.POST.get("reason", ""),
                )
                messages.info(request, "Skipped; someone else will take that run.")
            elif outcome == "no_divergence":
                services.queue_no_divergence(queue=queue, user=request.user, run_id=run_id)
                messages.success(request, "Recorded: no divergence in that run.")
            else:
                messages.error(request, "Choose no divergence or skip.")
                return redirect(self.wreverse("annotations:queue_detail", queue.pk))
        except InputError as exc:
            messages.error(request, exc.message)
            return redirect(self.wreverse("annotations:queue_detail", queue.pk))
        return _go_next(self, request, queue)


class QueueStatusView(PostOnlyView):
    write_role = services.QUEUE_BUILD_ROLE
    http_method_names = ["post"]

    def post(self, request, *args, **kwargs):
        queue = selectors.queue_get(workspace=self.workspace, pk=kwargs["pk"])
        status = request.POST.get("status", "")
        try:
            services.queue_set_status(queue=queue, actor=request.user, status=status)
        except InputError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request, "Queue closed." if status == QueueStatus.CLOSED else "Queue reopened."
            )
        return redirect(self.wreverse("annotations:queue_detail", queue.pk))
