"""Pages: the artifacts list, an artifact's page (tail, search, range, read log), settings."""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from artifacts import forms, selectors, services
from artifacts.content.redaction import DEFAULT_RULES
from artifacts.content.rendering import rows
from artifacts.filters import ArtifactFilter
from governance.htmx import htmx_partial
from governance.models import Role
from governance.services import InputError
from governance.views import WorkspaceListView, WorkspaceTemplateView

READ_LOG_ROWS = 25


class ArtifactListView(WorkspaceListView):
    template_name = "artifacts/list.html"
    filterset_class = ArtifactFilter
    default_sort = "-created"

    def get_queryset(self):
        return selectors.artifacts_for(workspace=self.workspace)

    def get_context_data(self, **kwargs):
        api_url = self.request.build_absolute_uri(reverse("artifact-list"))
        return super().get_context_data(
            has_any=selectors.artifacts_for(workspace=self.workspace).exists(),
            runs=selectors.artifact_runs(workspace=self.workspace),
            failures=selectors.write_failures_for(workspace=self.workspace)[:5],
            api_url=api_url,
            tokens_url=reverse("tokens", args=[self.workspace.slug]),
            **kwargs,
        )


def _read_log_context(artifact) -> dict:
    coverage = selectors.artifact_coverage(artifact=artifact)
    reads = selectors.artifact_reads_for(artifact=artifact)
    return {
        "reads": reads[:READ_LOG_ROWS],
        "read_count": reads.count(),
        "coverage": coverage,
        "coverage_segments": coverage.segments(),
    }


class ArtifactDetailView(WorkspaceTemplateView):
    """Metadata first (the cost), then one bounded read chosen by `view`: tail, search or range."""

    template_name = "artifacts/detail.html"

    def get(self, request, *args, **kwargs):
        artifact = selectors.artifact_get(workspace=self.workspace, pk=kwargs["pk"])
        policy = selectors.artifact_policy_peek(workspace=self.workspace)
        context = {"artifact": artifact, "policy": policy}
        services.ensure_readable(artifact)
        view = request.GET.get("view", "tail")
        reader = services.Reader(actor=request.user, via="page")
        context |= {"view": view, "api_url": request.build_absolute_uri(
            reverse("artifact-detail", args=[artifact.pk])
        )}  # fmt: skip
        try:
            context |= self._read(artifact, view, reader)
        except InputError as exc:
            context["read_error"] = str(exc)
        context |= _read_log_context(artifact)
        status = 400 if context.get("read_error") and not htmx_partial(request) else 200
        template = f"{self.template_name}#viewer" if htmx_partial(request) else self.template_name
        return render(request, template, context, status=status)

    def domain_error_response(self, request, exc, *args, **kwargs):
        if not isinstance(exc, services.ArtifactGone):
            return super().domain_error_response(request, exc, *args, **kwargs)
        # The tombstone is the page: what the artifact was, why it went, who read it.
        artifact = exc.artifact
        context = {"artifact": artifact, "gone": exc} | _read_log_context(artifact)
        context["policy"] = selectors.artifact_policy_peek(workspace=self.workspace)
        return render(request, self.template_name, context, status=exc.status)

    def _read(self, artifact, view: str, reader) -> dict:
        params = self.request.GET
        if view == "search":
            form = forms.SearchForm(params if "q" in params else None)
            if not form.is_valid():
                return {"search_form": form}
            data = form.cleaned_data
            result = services.artifact_search(
                artifact=artifact,
                reader=reader,
                q=data["q"],
                is_regex=data["regex"],
                ignore_case=data["ignore_case"],
                context=data["context"] or 0,
            )
            return {"search_form": form, "search": result, "blocks": _search_blocks(result)}
        if view == "range":
            form = forms.RangeForm(params if "start_line" in params else None)
            if not form.is_valid():
                return {"range_form": form}
            excerpt = services.artifact_read_range(
                artifact=artifact,
                reader=reader,
                start_line=form.cleaned_data["start_line"],
                end_line=form.cleaned_data["end_line"],
            )
            return {"range_form": form, "excerpt": excerpt, "excerpt_rows": _rows(excerpt)}
        form = forms.TailForm(params if "lines" in params else {"lines": 50})
        if not form.is_valid():
            return {"tail_form": form}
        excerpt = services.artifact_read_tail(
            artifact=artifact, lines=form.cleaned_data["lines"], reader=reader
        )
        return {"tail_form": form, "excerpt": excerpt, "excerpt_rows": _rows(excerpt)}


def _rows(excerpt, spans=()):
    return rows(
        excerpt.data, first_line=excerpt.start_line, start_byte=excerpt.start_byte, spans=spans
    )


def _search_blocks(result) -> list[dict]:
    """One block per distinct excerpt, every match inside it highlighted."""
    blocks: list[dict] = []
    for match in result.matches:
        if blocks and blocks[-1]["excerpt"] is match.excerpt:
            blocks[-1]["matches"].append(match)
            continue
        blocks.append({"excerpt": match.excerpt, "matches": [match]})
    for block in blocks:
        spans = [(m.start_byte, m.end_byte) for m in block["matches"]]
        block["rows"] = _rows(block["excerpt"], spans)
        block["match_lines"] = sorted({m.line for m in block["matches"]})
    return blocks


class ArtifactContentView(WorkspaceTemplateView):
    """The full load, streamed; refused above the workspace's max_content_bytes."""

    template_name = "artifacts/read_refused.html"

    def get(self, request, *args, **kwargs):
        artifact = selectors.artifact_get(workspace=self.workspace, pk=kwargs["pk"])
        reader = services.Reader(actor=request.user, via="page")
        handle = services.artifact_open_content(artifact=artifact, reader=reader)
        response = FileResponse(handle, content_type="text/plain; charset=utf-8")
        response["Content-Length"] = str(artifact.size_bytes)
        response["X-Artifact-Sha256"] = artifact.sha256
        disposition = "attachment" if request.GET.get("download") else "inline"
        response["Content-Disposition"] = f'{disposition}; filename="artifact-{artifact.pk}.log"'
        return response

    def domain_error_response(self, request, exc, *args, **kwargs):
        # Gone (410) or over the content limit (400): the refusal names the artifact.
        artifact = selectors.artifact_get(workspace=self.workspace, pk=kwargs["pk"])
        context = {"artifact": artifact, "message": exc.message}
        return render(request, self.template_name, context, status=exc.status)


class ArtifactDeleteView(WorkspaceTemplateView):
    """Editors delete early: content removed, tombstone kept."""

    template_name = "artifacts/detail.html"
    write_role = Role.EDITOR

    def get(self, request, *args, **kwargs):
        return redirect("artifacts:detail", self.workspace.slug, kwargs["pk"])

    def post(self, request, *args, **kwargs):
        artifact = selectors.artifact_get(workspace=self.workspace, pk=kwargs["pk"])
        form = forms.DeleteForm(request.POST)
        reason = form.cleaned_data["reason"] if form.is_valid() else ""
        # Already gone: the base view flashes why and this GET redirects to the tombstone.
        services.artifact_delete(artifact=artifact, actor=request.user, reason=reason)
        messages.success(request, "Deleted. The content is gone; the tombstone stays.")
        return redirect("artifacts:detail", self.workspace.slug, artifact.pk)


class ArtifactSettingsView(WorkspaceTemplateView):
    """Limits, retention and redaction. Everyone sees them; admins change them."""

    template_name = "artifacts/settings.html"
    write_role = Role.ADMIN

    def get_context_data(self, **kwargs):
        policy = selectors.artifact_policy_peek(workspace=self.workspace)
        return super().get_context_data(
            policy=policy,
            form=kwargs.pop("form", None) or forms.PolicyForm(instance=policy),
            rules=DEFAULT_RULES,
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        policy = services.artifact_policy_for(workspace=self.workspace)
        form = forms.PolicyForm(request.POST, instance=policy)
        if form.is_valid():
            try:
                services.artifact_policy_update(
                    workspace=self.workspace, actor=request.user, **form.changes()
                )
            except InputError as exc:
                for field, errors in exc.field_errors.items():
                    target = "custom_rules_text" if field == "custom_rules" else field
                    target = target if target in form.fields else None
                    for error in errors:
                        form.add_error(target, error)
            else:
                messages.success(request, "Artifact settings saved.")
                return redirect("artifacts:settings", self.workspace.slug)
        return render(request, self.template_name, self.get_context_data(form=form), status=400)
