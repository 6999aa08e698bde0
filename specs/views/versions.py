"""Version pages: one version, its review decisions, comparison, export, import, review queue.

Every decision form posts to its own URL so the role it needs is checked on the server before
anything else.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views import View

from governance.errors import Conflict, InputError
from governance.htmx import render_region
from governance.models import Role
from governance.views import (
    WorkspaceFormView,
    WorkspaceMixin,
    WorkspaceObjectMixin,
    WorkspaceObjectView,
    WorkspaceTemplateView,
)
from specs import forms, selectors, services
from specs.analysis.diff import CATEGORIES
from specs.models import SpecVersion, VersionStatus
from specs.views._common import CATEGORY_LABELS, grouped_items, safe_next


class VersionPageMixin(WorkspaceObjectMixin, WorkspaceMixin, View):
    """Renders a version's page, optionally with decision errors and a status code."""

    template_name = "specs/version_detail.html"
    selector = selectors.version_get

    def version_context(self, version: SpecVersion, **extra) -> dict:
        current = selectors.current_of(version=version)
        base = (
            selectors.version_get(workspace=self.workspace, pk=version.supersedes_id)
            if version.supersedes_id
            else None
        )
        items = list(version.items.all())
        is_author = version.author_id == self.request.user.pk
        return {
            "version": version,
            "spec": version.spec,
            "current": current,
            "base": base,
            "groups": grouped_items(items),
            "item_count": len(items),
            "sources": list(version.sources.all()),
            "stale": selectors.is_stale(version=version, current=current),
            "successor": selectors.successor_of(version=version),
            "diff_counts": selectors.version_diff(version=version, against=base).counts,
            "category_labels": CATEGORY_LABELS,
            "resolutions": selectors.pending_resolutions(version=version)
            if version.status in (VersionStatus.DRAFT, VersionStatus.IN_REVIEW)
            else [],
            "is_author": is_author,
            "may_decide": version.is_in_review
            and self.membership.has_role(Role.REVIEWER)
            and not is_author,
            "fingerprint_ok": selectors.fingerprint_verified(version=version),
            "other_versions": selectors.versions_of(spec=version.spec).exclude(pk=version.pk),
            "packages": selectors.packages_for(workspace=self.workspace).filter(
                spec_version=version
            ),
            "reject_form": forms.RejectForm(),
            "acknowledged": [],
            "decision_errors": [],
            **extra,
        }

    def render_version(self, *, status: int = 200, **extra):
        version = selectors.version_get(workspace=self.workspace, pk=self.object.pk)
        return render(
            self.request, self.template_name, self.version_context(version, **extra), status=status
        )


class VersionDetailView(VersionPageMixin):
    def get(self, request, *args, **kwargs):
        return self.render_version()


class VersionDecisionView(VersionPageMixin):
    """POST-only: one decision on a version. Errors re-render the version page."""

    success_message = ""

    def decide(self, request, version) -> SpecVersion:
        """The one service call; returns the version it decided."""
        raise NotImplementedError

    def get_success_message(self, version) -> str:
        return self.success_message.format(version=version)

    def get_success_url(self, version) -> str:
        return safe_next(self.request.POST.get("next", ""), self.workspace.slug) or self.wreverse(
            "specs:version_detail", version.pk
        )

    def post(self, request, *args, **kwargs):
        acknowledged = request.POST.getlist("acknowledged")
        try:
            version = self.decide(request, self.object)
        except InputError as exc:
            errors = exc.field_errors or {"": [exc.message]}
            reject_form = forms.RejectForm(request.POST if "comment" in errors else None)
            if "comment" in errors:
                reject_form.is_valid()
            return self.render_version(
                status=exc.status,
                decision_errors=[m for name, ms in errors.items() if name != "comment" for m in ms],
                reject_form=reject_form,
                acknowledged=acknowledged,
            )
        except Conflict as exc:
            return self.render_version(
                status=exc.status, decision_errors=[exc.message], acknowledged=acknowledged
            )
        messages.success(request, self.get_success_message(version))
        return redirect(self.get_success_url(version))


class VersionSubmitView(VersionDecisionView):
    def decide(self, request, version):
        return services.spec_version_submit(
            version=version,
            actor=request.user,
            acknowledged_resolutions=request.POST.getlist("acknowledged"),
        )

    def get_success_message(self, version):
        if version.is_authoritative:
            return f"v{version.number} is now authoritative (low consequence: no review)."
        return f"v{version.number} is in review. A reviewer other than you decides it."

    def get_success_url(self, version):
        return self.wreverse("specs:version_detail", version.pk)


class VersionApproveView(VersionDecisionView):
    write_role = Role.REVIEWER
    success_message = "Approved: {version.spec.title} v{version.number} is now authoritative."

    def decide(self, request, version):
        return services.spec_version_approve(
            version=version,
            reviewer=request.user,
            acknowledged_resolutions=request.POST.getlist("acknowledged"),
            comment=request.POST.get("approval_comment", ""),
        )


class VersionRejectView(VersionDecisionView):
    write_role = Role.REVIEWER
    success_message = "Rejected v{version.number}; the author sees your comment."

    def decide(self, request, version):
        return services.spec_version_reject(
            version=version, reviewer=request.user, comment=request.POST.get("comment", "")
        )


class VersionDiscardView(VersionDecisionView):
    success_message = "Discarded draft v{version.number}."

    def decide(self, request, version):
        services.spec_version_discard(version=version, actor=request.user)
        return version

    def get_success_url(self, version):
        return self.wreverse("specs:spec_detail", version.spec.slug)


class VersionDiffView(WorkspaceObjectView):
    template_name = "specs/version_diff.html"
    selector = selectors.version_get
    context_object_name = "version"

    def get(self, request, *args, **kwargs):
        version = self.object
        try:
            against = selectors.comparison_base(
                version=version, against_id=request.GET.get("against")
            )
        except InputError:
            raise Http404("Choose a version to compare with.") from None
        diff = selectors.version_diff(version=version, against=against)
        shown, entries = _shown_entries(diff, request.GET.get("show", ""))
        context = {
            "version": version,
            "spec": version.spec,
            "against": against,
            "diff": diff,
            "entries": entries,
            "shown": shown,
            "change_count": sum(1 for e in diff.entries if e.category != "retained"),
            "counts": diff.counts,
            "categories": [(c, *CATEGORY_LABELS[c]) for c in CATEGORIES],
            "other_versions": selectors.versions_of(spec=version.spec).exclude(pk=version.pk),
        }
        return render_region(request, self.template_name, "comparison", context)


def _shown_entries(diff, shown: str) -> tuple[str, list]:
    """The entries `?show=` asks for: all, one category, or by default the changes (if any)."""
    if shown == "all":
        return shown, list(diff.entries)
    if shown in CATEGORIES:
        return shown, diff.of(shown)
    changes = [e for e in diff.entries if e.category != "retained"]
    return "", changes or list(diff.entries)


class VersionExportView(WorkspaceObjectMixin, WorkspaceMixin, View):
    selector = selectors.version_get

    def get(self, request, *args, **kwargs):
        version = self.object
        name = f"{version.spec.slug}-v{version.number}"
        if kwargs["format"] == "md":
            response = HttpResponse(
                selectors.version_markdown(version=version),
                content_type="text/markdown; charset=utf-8",
            )
            response["Content-Disposition"] = f'attachment; filename="{name}.md"'
            return response
        if kwargs["format"] == "json":
            response = JsonResponse(
                selectors.version_json(version=version),
                json_dumps_params={"indent": 2, "ensure_ascii": False},
            )
            response["Content-Disposition"] = f'attachment; filename="{name}.json"'
            return response
        raise Http404("Export as md or json.")


class VersionImportView(WorkspaceObjectMixin, WorkspaceFormView):
    template_name = "specs/version_import.html"
    form_class = forms.ImportForm
    read_role = Role.EDITOR
    selector = selectors.spec_get
    lookup = {"slug": "slug"}

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            spec=self.object, current=selectors.authoritative_version(spec=self.object), **kwargs
        )

    def perform(self, form):
        version, result = services.spec_version_import(
            spec=self.object,
            author=self.request.user,
            markdown=form.cleaned_data["markdown"],
            supersedes=selectors.authoritative_version(spec=self.object),
            note=form.cleaned_data["note"],
        )
        for notice in result.notices:
            messages.info(self.request, notice)
        if result.declared_fingerprint and result.matches_declared:
            messages.info(
                self.request, "The document is unchanged since its export (same fingerprint)."
            )
        elif result.declared_fingerprint:
            messages.info(
                self.request, "The document was edited since its export: compare it below."
            )
        return version, result

    def get_success_message(self, result):
        version, imported = result
        return f"Imported {len(imported.document.items)} items as draft v{version.number}."

    def get_success_url(self, result):
        return self.wreverse("specs:version_detail", result[0].pk)


class ReviewQueueView(WorkspaceTemplateView):
    """Versions waiting for a reviewer, with what each changes and resolves."""

    template_name = "specs/review_queue.html"
    read_role = Role.REVIEWER

    def get_context_data(self, **kwargs):
        rows = [
            self._row(selectors.version_get(workspace=self.workspace, pk=version.pk))
            for version in selectors.review_queue(workspace=self.workspace)
        ]
        return super().get_context_data(rows=rows, category_labels=CATEGORY_LABELS, **kwargs)

    def _row(self, version: SpecVersion) -> dict:
        current = selectors.current_of(version=version)
        base = (
            selectors.version_get(workspace=self.workspace, pk=version.supersedes_id)
            if version.supersedes_id
            else None
        )
        return {
            "version": version,
            "counts": selectors.version_diff(version=version, against=base).counts,
            "resolutions": selectors.pending_resolutions(version=version),
            "stale": selectors.is_stale(version=version, current=current),
            "current": current,
            "is_author": version.author_id == self.request.user.pk,
            "form_id": f"approve-{version.pk}",
            "item_count": len(version.items.all()),
        }
