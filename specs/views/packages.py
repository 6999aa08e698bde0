"""Restart-package pages: the list, the builder, one package, its exports and raw outputs."""

from __future__ import annotations

from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import View

from governance.errors import InputError
from governance.htmx import render_region
from governance.models import Role
from governance.views import (
    WorkspaceFormView,
    WorkspaceListView,
    WorkspaceMixin,
    WorkspaceObjectMixin,
    WorkspaceObjectView,
)
from specs import forms, selectors, services
from specs.filters import RestartPackageFilter
from specs.formats.restart import (
    INDICATORS,
    Instruction,
    Repository,
    package_json,
    package_markdown,
    stale_verifications,
    superseded_warning,
)
from specs.views._common import grouped_items, int_or_none

ROW_KINDS = {"verification", "discrepancy"}


class PackageListView(WorkspaceListView):
    template_name = "specs/package_list.html"
    filterset_class = RestartPackageFilter
    default_sort = "-created"

    def get_queryset(self):
        return selectors.packages_for(workspace=self.workspace)


class PackageCreateView(WorkspaceFormView):
    """The builder. Prefill: ?spec_version=<id>, ?session=<id>, ?indicators=a,b, ?from_package=<id>."""

    template_name = "specs/package_form.html"
    form_class = forms.PackageForm
    read_role = Role.EDITOR
    conflict_field = "spec_version"
    success_message = "Built restart package #{result.pk}."

    def versions(self):
        return selectors.authoritative_versions(workspace=self.workspace)

    def get_form_kwargs(self):
        return {"versions": self.versions()}

    def get(self, request, *args, **kwargs):
        if "suggest" in request.GET:  # the trace-session suggestions, as the user types
            options = selectors.trace_sessions_matching(
                workspace=self.workspace, text=request.GET.get("trace_session", "")
            )
            return render_region(
                request, self.template_name, "session_options", {"session_options": options}
            )
        prefill = selectors.restart_package_prefill(workspace=self.workspace, params=request.GET)
        if prefill.initial.get("trace_session"):  # a prefill names the session by its pk
            session = selectors.trace_session_for(
                workspace=self.workspace, pk=prefill.initial["trace_session"]
            )
            prefill.initial["trace_session"] = session.external_id if session else ""
        form = forms.PackageForm(initial=prefill.initial, versions=self.versions())
        if prefill.verification_rows is not None:
            form.verification_rows = prefill.verification_rows
            form.discrepancy_rows = prefill.discrepancy_rows
        return self.render_form(form, prefill_notes=prefill.notes)

    def get_context_data(self, *, form, prefill_notes=(), **extra):
        text = form["trace_session"].value() or ""
        return super().get_context_data(
            form=form,
            prefill_notes=prefill_notes,
            session=self._session_named(text) if "trace_session" not in form.errors else None,
            session_options=selectors.trace_sessions_matching(workspace=self.workspace, text=text),
            indicator_help={slug: text for slug, (_, text) in INDICATORS.items()},
            verification_rows=form.verification_rows or [blank_row("verification", 0)],
            discrepancy_rows=form.discrepancy_rows or [blank_row("discrepancy", 0)],
            **extra,
        )

    def _session_named(self, text: str):
        if not text:
            return None
        try:
            return selectors.trace_session_resolve(workspace=self.workspace, text=text)
        except InputError:
            return None

    def post(self, request, *args, **kwargs):
        add = request.POST.get("add_row")
        if add not in ROW_KINDS:
            return super().post(request, *args, **kwargs)
        # The no-JavaScript "add a row" button: the form again, one blank row longer, no errors.
        form = self.get_form(request.POST, request.FILES)
        rows = form.verification_rows if add == "verification" else form.discrepancy_rows
        rows.append(blank_row(add, max((r["index"] for r in rows), default=-1) + 1))
        form.is_valid()
        form.errors.clear()
        return self.render_form(form)

    def perform(self, form):
        data = form.cleaned_data
        session, version = self._resolve(data)
        return services.restart_package_create(
            workspace=self.workspace,
            actor=self.request.user,
            title=data["title"],
            spec_version=version,
            trace_session=session,
            repository=Repository(
                commit=data["commit"], remote=data["remote"], branch=data["branch"]
            ),
            completed_changes=data["completed_changes"],
            changed_files=data["changed_files"],
            current_failures=data["current_failures"],
            verifications=form.verifications(),
            discrepancies=form.discrepancies(),
            instruction=Instruction(
                next_action=data["next_action"],
                authoritative_sources=tuple(data["authoritative_sources"]),
            ),
            indicators=data["indicator_list"],
        )

    def _resolve(self, data):
        """The trace session named by text and the chosen version; both errors at once."""
        errors, session = {}, None
        if data.get("trace_session"):
            try:
                session = selectors.trace_session_resolve(
                    workspace=self.workspace, text=data["trace_session"]
                )
            except InputError as exc:
                errors["trace_session"] = [exc.message]
        version = self.versions().filter(pk=int_or_none(data["spec_version"])).first()
        if version is None:
            errors["spec_version"] = ["Choose an authoritative version."]
        if errors:
            raise InputError.for_fields(errors)
        return session, version

    def get_success_url(self, package):
        return self.wreverse("specs:package_detail", package.pk)


def blank_row(kind: str, index: int) -> dict:
    """An empty verification or discrepancy row of the builder."""
    if kind == "verification":
        fields = ("command", "exit_status", "commit", "output")
    else:
        fields = ("claim", "source", "repository_state")
    return {"index": index, **dict.fromkeys(fields, ""), "errors": {}}


class PackageRowView(WorkspaceMixin, View):
    """htmx: a blank verification (`?row=verification&index=N`) or discrepancy row."""

    template_name = "specs/package_form.html"
    read_role = Role.EDITOR

    def get(self, request, *args, **kwargs):
        kind = request.GET.get("row")
        index = int_or_none(request.GET.get("index"))
        if kind not in ROW_KINDS or index is None:
            return HttpResponse("row is verification or discrepancy; index a number", status=400)
        return render(
            request,
            f"{self.template_name}#new_{kind}",
            {"row": blank_row(kind, index), "next_index": index + 1},
        )


class PackageDetailView(WorkspaceObjectView):
    template_name = "specs/package_detail.html"
    selector = selectors.package_get
    context_object_name = "package"

    def get_context_data(self, **kwargs):
        package = self.object
        export = selectors.package_export(package=package, absolute=self.request.build_absolute_uri)
        version = selectors.version_get(workspace=self.workspace, pk=package.spec_version_id)
        stale = set(stale_verifications(export.handoff))
        return super().get_context_data(
            export=export,
            version=version,
            groups=grouped_items(list(version.items.all())),
            warning=superseded_warning(export.spec),
            current=selectors.current_of(version=version),
            verification_rows=[
                {"model": model, "pointer": exported.output, "stale": position in stale}
                for position, (model, exported) in enumerate(
                    zip(package.verifications.all(), export.handoff.verifications, strict=True),
                    start=1,
                )
            ],
            **kwargs,
        )


class PackageExportView(WorkspaceObjectMixin, WorkspaceMixin, View):
    selector = selectors.package_get

    def get(self, request, *args, **kwargs):
        package = self.object
        inline = request.GET.get("inline_output") in {"1", "true"}
        export = selectors.package_export(
            package=package, absolute=request.build_absolute_uri, include_output=inline
        )
        name = f"restart-package-{package.pk}"
        if kwargs["format"] == "md":
            response = HttpResponse(
                package_markdown(export), content_type="text/markdown; charset=utf-8"
            )
            response["Content-Disposition"] = f'attachment; filename="{name}.md"'
            return response
        if kwargs["format"] == "json":
            response = JsonResponse(
                package_json(export), json_dumps_params={"indent": 2, "ensure_ascii": False}
            )
            response["Content-Disposition"] = f'attachment; filename="{name}.json"'
            return response
        raise Http404("Export as md or json.")


class PackageOutputView(WorkspaceObjectMixin, WorkspaceMixin, View):
    """A verification's raw output, verbatim, as plain text."""

    selector = selectors.package_get

    def get(self, request, *args, **kwargs):
        blob = selectors.verification_get(package=self.object, position=kwargs["position"]).output
        response = HttpResponse(blob.content, content_type="text/plain; charset=utf-8")
        response["X-Content-SHA256"] = blob.sha256
        response["X-Content-Type-Options"] = "nosniff"
        return response
