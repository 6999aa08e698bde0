"""Pages under /w/<workspace>/specs/: specifications, versions, review, restart packages.

Views parse the request, call one service or selector, and render. Every decision form posts
to its own URL so the role it needs is checked on the server before anything else.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views import View

from governance.errors import InputError
from governance.htmx import render_region
from governance.models import Role
from governance.selectors import workspace_members
from governance.views import WorkspaceListView, WorkspaceMixin, WorkspaceTemplateView
from specs import forms, selectors, services
from specs.analysis.content import KIND_HEADINGS, KINDS, suggest_key
from specs.analysis.diff import CATEGORIES
from specs.filters import RestartPackageFilter, SpecFilter
from specs.formats.restart import (
    INDICATORS,
    Instruction,
    Repository,
    package_json,
    package_markdown,
    stale_verifications,
    superseded_warning,
)
from specs.models import ItemKind, ItemStatus, SpecVersion, VersionStatus

CATEGORY_LABELS = {
    "resolved": ("Resolved", "An open question was settled or removed."),
    "marked_unresolved": ("Marked unresolved", "A settled item was reopened."),
    "changed": ("Changed", "Same key, different content."),
    "added": ("Added", "New in this version."),
    "omitted": ("Omitted", "Dropped from this version."),
    "retained": ("Retained", "Unchanged."),
}


def grouped_items(items) -> list[dict]:
    """Items (rows or plain data) grouped under their kind's heading, in section order."""
    groups = []
    for kind in KINDS:
        members = [item for item in items if item.kind == kind]
        if members:
            groups.append({"kind": kind, "heading": KIND_HEADINGS[kind], "items": members})
    return groups


def _error_messages(exc: ValidationError) -> list[str]:
    if hasattr(exc, "error_dict"):
        return [message for messages_ in exc.message_dict.values() for message in messages_]
    return exc.messages


def _form_errors(form, exc: ValidationError) -> None:
    for name, messages_ in exc.message_dict.items():
        for message in messages_:
            form.add_error(name if name in form.fields else None, message)


# --- specifications ----------------------------------------------------------


class SpecListView(WorkspaceListView):
    template_name = "specs/spec_list.html"
    filterset_class = SpecFilter
    default_sort = "title"

    def get_queryset(self):
        return selectors.specs_for(workspace=self.workspace)

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            review_count=selectors.review_queue(workspace=self.workspace).count(), **kwargs
        )


class SpecCreateView(WorkspaceTemplateView):
    template_name = "specs/spec_form.html"
    read_role = Role.EDITOR

    def get_form(self, data=None):
        return forms.SpecForm(data, members=workspace_members(workspace=self.workspace))

    def get(self, request, *args, **kwargs):
        return render(request, self.template_name, {"form": self.get_form()})

    def post(self, request, *args, **kwargs):
        form = self.get_form(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            owner = _member(self.workspace, data["owner"]) if data["owner"] else request.user
            try:
                spec = services.spec_create(
                    workspace=self.workspace,
                    actor=request.user,
                    title=data["title"],
                    slug=data["slug"],
                    consequence=data["consequence"],
                    summary=data["summary"],
                    owner=owner,
                )
            except ValidationError as exc:
                _form_errors(form, exc)
            else:
                messages.success(request, f"Created “{spec.title}”. Write its first version next.")
                return redirect("specs:spec_detail", self.workspace.slug, spec.slug)
        return render(request, self.template_name, {"form": form}, status=400)


class SpecEditView(WorkspaceTemplateView):
    """Title, summary, owner and consequence. Reviewers only: consequence decides who reviews."""

    template_name = "specs/spec_form.html"
    read_role = Role.REVIEWER
    write_role = Role.REVIEWER

    def dispatch(self, request, *args, **kwargs):
        self.slug = kwargs.pop("slug")
        return super().dispatch(request, *args, **kwargs)

    def get_form(self, spec, data=None):
        initial = {
            "title": spec.title,
            "consequence": spec.consequence,
            "summary": spec.summary,
            "owner": spec.owner.username if spec.owner else "",
        }
        return forms.SpecForm(
            data,
            initial=initial,
            members=workspace_members(workspace=self.workspace),
            editing=True,
        )

    def get(self, request, *args, **kwargs):
        spec = selectors.spec_get(workspace=self.workspace, slug=self.slug)
        return render(request, self.template_name, {"form": self.get_form(spec), "spec": spec})

    def post(self, request, *args, **kwargs):
        spec = selectors.spec_get(workspace=self.workspace, slug=self.slug)
        form = self.get_form(spec, request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                services.spec_update(
                    spec=spec,
                    actor=request.user,
                    title=data["title"],
                    consequence=data["consequence"],
                    summary=data["summary"],
                    owner=_member(self.workspace, data["owner"]) if data["owner"] else spec.owner,
                )
            except ValidationError as exc:
                _form_errors(form, exc)
            else:
                messages.success(request, "Saved.")
                return redirect("specs:spec_detail", self.workspace.slug, spec.slug)
        return render(request, self.template_name, {"form": form, "spec": spec}, status=400)


class SpecDetailView(WorkspaceTemplateView):
    template_name = "specs/spec_detail.html"

    def get_context_data(self, **kwargs):
        spec = selectors.spec_get(workspace=self.workspace, slug=kwargs["slug"])
        current = selectors.authoritative_version(spec=spec)
        versions = list(selectors.versions_of(spec=spec))
        for version in versions:
            version.stale = selectors.is_stale(version=version, current=current)
        items = list(current.items.all()) if current else []
        return super().get_context_data(
            spec=spec,
            current=current,
            groups=grouped_items(items),
            open_questions=[item for item in items if item.is_unresolved],
            chain=[v for v in versions if v.status in VersionStatus.accepted()],
            proposals=[
                v for v in versions if v.status in (VersionStatus.DRAFT, VersionStatus.IN_REVIEW)
            ],
            rejected=[v for v in versions if v.status == VersionStatus.REJECTED],
            versions=versions,
            packages=selectors.packages_for(workspace=self.workspace).filter(
                spec_version__spec=spec
            )[:10],
            **kwargs,
        )


# --- versions ------------------------------------------------------------------


class VersionPageMixin(WorkspaceMixin):
    """Renders a version's page, optionally with decision errors and a status code."""

    template_name = "specs/version_detail.html"

    def version_context(self, version: SpecVersion, **extra) -> dict:
        current = selectors.current_of(version=version)
        base = (
            selectors.version_get(workspace=self.workspace, pk=version.supersedes_id)
            if version.supersedes_id
            else None
        )
        diff = selectors.version_diff(version=version, against=base)
        items = list(version.items.all())
        is_author = version.author_id == self.request.user.pk
        context = {
            "version": version,
            "spec": version.spec,
            "current": current,
            "base": base,
            "groups": grouped_items(items),
            "item_count": len(items),
            "sources": list(version.sources.all()),
            "stale": selectors.is_stale(version=version, current=current),
            "successor": selectors.successor_of(version=version),
            "diff_counts": diff.counts,
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
        }
        context.update(extra)
        return context

    def render_version(self, version: SpecVersion, *, status: int = 200, **extra):
        version = selectors.version_get(workspace=self.workspace, pk=version.pk)
        return render(
            self.request, self.template_name, self.version_context(version, **extra), status=status
        )


class VersionDetailView(VersionPageMixin, View):
    def get(self, request, *args, **kwargs):
        version = selectors.version_get(workspace=self.workspace, pk=kwargs["pk"])
        return self.render_version(version)


class VersionDecisionView(VersionPageMixin, View):
    """POST-only: one decision on a version. Errors re-render the version page."""

    def decide(self, request, version):
        raise NotImplementedError

    def post(self, request, *args, **kwargs):
        version = selectors.version_get(workspace=self.workspace, pk=kwargs["pk"])
        acknowledged = request.POST.getlist("acknowledged")
        try:
            return self.decide(request, version)
        except ValidationError as exc:
            errors = exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}
            reject_form = forms.RejectForm(request.POST if "comment" in errors else None)
            if "comment" in errors:
                reject_form.is_valid()
            return self.render_version(
                version,
                status=400,
                decision_errors=[m for name, ms in errors.items() if name != "comment" for m in ms],
                reject_form=reject_form,
                acknowledged=acknowledged,
            )
        except services.SpecConflict as exc:
            return self.render_version(
                version, status=409, decision_errors=[exc.message], acknowledged=acknowledged
            )


class VersionSubmitView(VersionDecisionView):
    def decide(self, request, version):
        version = services.spec_version_submit(
            version=version,
            actor=request.user,
            acknowledged_resolutions=request.POST.getlist("acknowledged"),
        )
        if version.is_authoritative:
            messages.success(
                request, f"v{version.number} is now authoritative (low consequence: no review)."
            )
        else:
            messages.success(
                request, f"v{version.number} is in review. A reviewer other than you decides it."
            )
        return redirect("specs:version_detail", self.workspace.slug, version.pk)


class VersionApproveView(VersionDecisionView):
    write_role = Role.REVIEWER

    def decide(self, request, version):
        version = services.spec_version_approve(
            version=version,
            reviewer=request.user,
            acknowledged_resolutions=request.POST.getlist("acknowledged"),
            comment=request.POST.get("approval_comment", ""),
        )
        messages.success(
            request,
            f"Approved: {version.spec.title} v{version.number} is now authoritative.",
        )
        return redirect(
            _safe_next(request.POST.get("next", ""), self.workspace.slug)
            or self.wreverse("specs:version_detail", version.pk)
        )


class VersionRejectView(VersionDecisionView):
    write_role = Role.REVIEWER

    def decide(self, request, version):
        version = services.spec_version_reject(
            version=version, reviewer=request.user, comment=request.POST.get("comment", "")
        )
        messages.success(request, f"Rejected v{version.number}; the author sees your comment.")
        return redirect(
            _safe_next(request.POST.get("next", ""), self.workspace.slug)
            or self.wreverse("specs:version_detail", version.pk)
        )


class VersionDiscardView(VersionDecisionView):
    def decide(self, request, version):
        services.spec_version_discard(version=version, actor=request.user)
        messages.success(request, f"Discarded draft v{version.number}.")
        return redirect("specs:spec_detail", self.workspace.slug, version.spec.slug)


def _safe_next(value: str, workspace_slug: str) -> str:
    """Only a path inside this workspace: never an open redirect."""
    return value if value.startswith(f"/w/{workspace_slug}/") and "//" not in value else ""


class VersionEditorMixin(WorkspaceMixin):
    template_name = "specs/version_edit.html"
    read_role = Role.EDITOR

    def editor_context(self, editor, **extra) -> dict:
        return {
            "editor": editor,
            "kinds": ItemKind.choices,
            "statuses": ItemStatus.choices,
            **extra,
        }

    def render_editor(self, editor, *, status=200, **extra):
        return render(
            self.request, self.template_name, self.editor_context(editor, **extra), status=status
        )


class VersionCreateView(VersionEditorMixin, View):
    """A new draft, prefilled from the authoritative version or from `?from=<version id>`."""

    def setup_spec(self, slug):
        self.spec = selectors.spec_get(workspace=self.workspace, slug=slug)
        self.current = selectors.authoritative_version(spec=self.spec)

    def get(self, request, *args, **kwargs):
        self.setup_spec(kwargs["slug"])
        origin = self.current
        if request.GET.get("from"):
            try:
                origin = selectors.version_get(
                    workspace=self.workspace, pk=int(request.GET["from"])
                )
            except ValueError:
                raise Http404("No such version.") from None
            if origin.spec_id != self.spec.pk:
                raise Http404("That version belongs to another specification.")
        items = selectors.version_items(version=origin)
        sources = selectors.version_sources(origin) if origin else []
        editor = forms.VersionEditor.from_items(items, sources=sources)
        return self.render_editor(editor, spec=self.spec, base=self.current, origin=origin)

    def post(self, request, *args, **kwargs):
        self.setup_spec(kwargs["slug"])
        editor = forms.VersionEditor.from_post(request.POST)
        if editor.apply_row_actions(request.POST):
            return self.render_editor(editor, spec=self.spec, base=self.current)
        base_id = request.POST.get("supersedes") or None
        if editor.is_valid():
            try:
                sources = selectors.sources_from_tokens(
                    workspace=self.workspace, sources=editor.sources
                )
                version = services.spec_version_create(
                    spec=self.spec,
                    author=request.user,
                    supersedes=self.current
                    if base_id is None
                    else _version_or_none(self.spec, base_id),
                    items=editor.cleaned_items(),
                    note=editor.note,
                    sources=sources,
                )
            except ValidationError as exc:
                editor.add_errors(exc.message_dict)
            except services.StaleBase as exc:
                editor.errors.setdefault("items", []).append(
                    f"{exc.message} Your text is kept below; review the current version and save again."
                )
                return self.render_editor(editor, status=409, spec=self.spec, base=self.current)
            else:
                for notice in editor.notices:
                    messages.info(request, notice)
                messages.success(
                    request, f"Saved draft v{version.number}. Submit it when it is ready."
                )
                return redirect("specs:version_detail", self.workspace.slug, version.pk)
        return self.render_editor(editor, status=400, spec=self.spec, base=self.current)


def _version_or_none(spec, pk) -> SpecVersion | None:
    try:
        return spec.versions.filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        return None


class VersionEditView(VersionEditorMixin, View):
    """Edit a draft in place. Submitted versions are immutable."""

    def load(self, pk):
        version = selectors.version_get(workspace=self.workspace, pk=pk)
        if not version.is_draft:
            return version, redirect("specs:version_detail", self.workspace.slug, version.pk)
        return version, None

    def get(self, request, *args, **kwargs):
        version, elsewhere = self.load(kwargs["pk"])
        if elsewhere:
            messages.info(
                request,
                f"v{version.number} is {version.get_status_display()}: it can no longer change.",
            )
            return elsewhere
        editor = forms.VersionEditor.from_items(
            selectors.version_items(version=version),
            note=version.note,
            sources=selectors.version_sources(version),
        )
        return self.render_editor(
            editor, spec=version.spec, version=version, base=version.supersedes
        )

    def post(self, request, *args, **kwargs):
        version, elsewhere = self.load(kwargs["pk"])
        editor = forms.VersionEditor.from_post(request.POST)
        context = {"spec": version.spec, "version": version, "base": version.supersedes}
        if elsewhere:
            editor.errors.setdefault("items", []).append(
                f"v{version.number} was submitted meanwhile and can no longer change. Copy your "
                "text into a new version."
            )
            return self.render_editor(editor, status=409, **context)
        if editor.apply_row_actions(request.POST):
            return self.render_editor(editor, **context)
        if editor.is_valid():
            try:
                sources = selectors.sources_from_tokens(
                    workspace=self.workspace, sources=editor.sources
                )
                services.spec_version_update(
                    version=version,
                    actor=request.user,
                    items=editor.cleaned_items(),
                    note=editor.note,
                    sources=sources,
                )
            except ValidationError as exc:
                editor.add_errors(exc.message_dict)
            except services.SpecConflict as exc:
                editor.errors.setdefault("items", []).append(exc.message)
                return self.render_editor(editor, status=409, **context)
            else:
                for notice in editor.notices:
                    messages.info(request, notice)
                messages.success(request, f"Saved draft v{version.number}.")
                return redirect("specs:version_detail", self.workspace.slug, version.pk)
        return self.render_editor(editor, status=400, **context)


class EditorRowView(VersionEditorMixin, View):
    """htmx: one blank item row (`?item=N`) or alternative row (`?item=N&alternative=M`)."""

    def get(self, request, *args, **kwargs):
        try:
            index = int(request.GET.get("item", "0"))
            alternative = request.GET.get("alternative")
            alternative = int(alternative) if alternative is not None else None
        except ValueError:
            return HttpResponse("item and alternative are row numbers", status=400)
        if alternative is None:
            row = forms.EditorItem(index=index)
            return render(
                request,
                f"{self.template_name}#new_item",
                self.editor_context(None, item=row, next_index=index + 1),
            )
        return render(
            request,
            f"{self.template_name}#new_alternative",
            self.editor_context(
                None,
                item=forms.EditorItem(index=index),
                alternative=forms.EditorAlternative(index=alternative),
                next_alternative=alternative + 1,
            ),
        )


class SuggestKeyView(WorkspaceMixin, View):
    """JSON key suggestion for the editor: `?text=…&taken=a,b`."""

    def get(self, request, *args, **kwargs):
        taken = [key for key in request.GET.get("taken", "").split(",") if key]
        return JsonResponse({"key": suggest_key(request.GET.get("text", "")[:2000], taken)})


class VersionImportView(WorkspaceTemplateView):
    template_name = "specs/version_import.html"
    read_role = Role.EDITOR

    def get(self, request, *args, **kwargs):
        spec = selectors.spec_get(workspace=self.workspace, slug=kwargs["slug"])
        return render(request, self.template_name, self._context(spec, forms.ImportForm()))

    def _context(self, spec, form):
        return {"spec": spec, "form": form, "current": selectors.authoritative_version(spec=spec)}

    def post(self, request, *args, **kwargs):
        spec = selectors.spec_get(workspace=self.workspace, slug=kwargs["slug"])
        form = forms.ImportForm(request.POST, request.FILES)
        status = 400
        if form.is_valid():
            current = selectors.authoritative_version(spec=spec)
            try:
                version, result = services.spec_version_import(
                    spec=spec,
                    author=request.user,
                    markdown=form.cleaned_data["markdown"],
                    supersedes=current,
                    note=form.cleaned_data["note"],
                )
            except ValidationError as exc:
                _form_errors(form, exc)
            except services.StaleBase as exc:
                form.add_error(None, exc.message)
                status = 409
            else:
                for notice in result.notices:
                    messages.info(request, notice)
                if result.declared_fingerprint and result.matches_declared:
                    messages.info(
                        request, "The document is unchanged since its export (same fingerprint)."
                    )
                elif result.declared_fingerprint:
                    messages.info(
                        request, "The document was edited since its export: compare it below."
                    )
                messages.success(
                    request,
                    f"Imported {len(result.document.items)} items as draft v{version.number}.",
                )
                return redirect("specs:version_detail", self.workspace.slug, version.pk)
        return render(request, self.template_name, self._context(spec, form), status=status)


class VersionDiffView(WorkspaceTemplateView):
    template_name = "specs/version_diff.html"

    def get(self, request, *args, **kwargs):
        version = selectors.version_get(workspace=self.workspace, pk=kwargs["pk"])
        try:
            against = selectors.comparison_base(
                version=version, against_id=request.GET.get("against")
            )
        except ValidationError:
            raise Http404("Choose a version to compare with.") from None
        diff = selectors.version_diff(version=version, against=against)
        shown = request.GET.get("show", "")
        if shown == "all":
            entries = list(diff.entries)
        elif shown in CATEGORIES:
            entries = diff.of(shown)
        else:
            shown = ""
            changes = [e for e in diff.entries if e.category != "retained"]
            entries = changes or list(diff.entries)
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


class VersionExportView(WorkspaceMixin, View):
    def get(self, request, *args, **kwargs):
        version = selectors.version_get(workspace=self.workspace, pk=kwargs["pk"])
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


class ReviewQueueView(WorkspaceTemplateView):
    """Versions waiting for a reviewer, with what each changes and resolves."""

    template_name = "specs/review_queue.html"
    read_role = Role.REVIEWER

    def get_context_data(self, **kwargs):
        rows = []
        for version in selectors.review_queue(workspace=self.workspace):
            version = selectors.version_get(workspace=self.workspace, pk=version.pk)
            current = selectors.current_of(version=version)
            base = (
                selectors.version_get(workspace=self.workspace, pk=version.supersedes_id)
                if version.supersedes_id
                else None
            )
            rows.append(
                {
                    "version": version,
                    "counts": selectors.version_diff(version=version, against=base).counts,
                    "resolutions": selectors.pending_resolutions(version=version),
                    "stale": selectors.is_stale(version=version, current=current),
                    "current": current,
                    "is_author": version.author_id == self.request.user.pk,
                    "form_id": f"approve-{version.pk}",
                    "item_count": len(version.items.all()),
                }
            )
        return super().get_context_data(rows=rows, category_labels=CATEGORY_LABELS, **kwargs)


# --- restart packages ----------------------------------------------------------


class PackageListView(WorkspaceListView):
    template_name = "specs/package_list.html"
    filterset_class = RestartPackageFilter
    default_sort = "-created"

    def get_queryset(self):
        return selectors.packages_for(workspace=self.workspace)


class PackageCreateView(WorkspaceTemplateView):
    """The builder. Prefill: ?spec_version=<id>, ?session=<id>, ?indicators=a,b, ?from_package=<id>."""

    template_name = "specs/package_form.html"
    read_role = Role.EDITOR

    def versions(self):
        return selectors.authoritative_versions(workspace=self.workspace)

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
        return render(request, self.template_name, self.context(form, prefill.notes))

    def context(self, form, prefill_notes=(), **extra):
        session = None
        text = form["trace_session"].value() or ""
        if text and "trace_session" not in form.errors:
            try:
                session = selectors.trace_session_resolve(workspace=self.workspace, text=text)
            except InputError:
                pass
        return {
            "form": form,
            "prefill_notes": prefill_notes,
            "session": session,
            "session_options": selectors.trace_sessions_matching(
                workspace=self.workspace, text=text
            ),
            "indicator_help": {slug: text for slug, (_, text) in INDICATORS.items()},
            "verification_rows": form.verification_rows or [_blank_verification(0)],
            "discrepancy_rows": form.discrepancy_rows or [_blank_discrepancy(0)],
            **extra,
        }

    def post(self, request, *args, **kwargs):
        form = forms.PackageForm(request.POST, versions=self.versions())
        rows_ok = form.read_rows(request.POST, request.FILES)
        add = request.POST.get("add_row")
        if add in {"verification", "discrepancy"}:
            rows = form.verification_rows if add == "verification" else form.discrepancy_rows
            index = max((r["index"] for r in rows), default=-1) + 1
            rows.append(
                _blank_verification(index) if add == "verification" else _blank_discrepancy(index)
            )
            form.is_valid()
            form.errors.clear()
            return render(request, self.template_name, self.context(form))
        status = 400
        if form.is_valid() and rows_ok:
            data = form.cleaned_data
            session = None
            if data.get("trace_session"):
                try:
                    session = selectors.trace_session_resolve(
                        workspace=self.workspace, text=data["trace_session"]
                    )
                except InputError as exc:
                    form.add_error("trace_session", exc.message)
            version = self.versions().filter(pk=_int_or_none(data["spec_version"])).first()
            if version is None:
                form.add_error("spec_version", "Choose an authoritative version.")
            if not form.errors:
                try:
                    package = services.restart_package_create(
                        workspace=self.workspace,
                        actor=request.user,
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
                except ValidationError as exc:
                    _form_errors(form, exc)
                except services.StaleBase as exc:
                    form.add_error("spec_version", exc.message)
                    status = 409
                else:
                    messages.success(request, f"Built restart package #{package.pk}.")
                    return redirect("specs:package_detail", self.workspace.slug, package.pk)
        return render(request, self.template_name, self.context(form), status=status)


def _blank_verification(index: int) -> dict:
    return {
        "index": index,
        "command": "",
        "exit_status": "",
        "commit": "",
        "output": "",
        "errors": {},
    }


def _blank_discrepancy(index: int) -> dict:
    return {"index": index, "claim": "", "source": "", "repository_state": "", "errors": {}}


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class PackageRowView(WorkspaceMixin, View):
    """htmx: a blank verification (`?row=verification&index=N`) or discrepancy row."""

    template_name = "specs/package_form.html"
    read_role = Role.EDITOR

    def get(self, request, *args, **kwargs):
        kind = request.GET.get("row")
        index = _int_or_none(request.GET.get("index"))
        if kind not in {"verification", "discrepancy"} or index is None:
            return HttpResponse("row is verification or discrepancy; index a number", status=400)
        row = _blank_verification(index) if kind == "verification" else _blank_discrepancy(index)
        return render(
            request, f"{self.template_name}#new_{kind}", {"row": row, "next_index": index + 1}
        )


class PackageDetailView(WorkspaceTemplateView):
    template_name = "specs/package_detail.html"

    def get_context_data(self, **kwargs):
        package = selectors.package_get(workspace=self.workspace, pk=kwargs["pk"])
        export = selectors.package_export(package=package, absolute=self.request.build_absolute_uri)
        version = selectors.version_get(workspace=self.workspace, pk=package.spec_version_id)
        stale = set(stale_verifications(export.handoff))
        return super().get_context_data(
            package=package,
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


class PackageExportView(WorkspaceMixin, View):
    def get(self, request, *args, **kwargs):
        package = selectors.package_get(workspace=self.workspace, pk=kwargs["pk"])
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


class PackageOutputView(WorkspaceMixin, View):
    """A verification's raw output, verbatim, as plain text."""

    def get(self, request, *args, **kwargs):
        package = selectors.package_get(workspace=self.workspace, pk=kwargs["pk"])
        blob = selectors.verification_get(package=package, position=kwargs["position"]).output
        response = HttpResponse(blob.content, content_type="text/plain; charset=utf-8")
        response["X-Content-SHA256"] = blob.sha256
        response["X-Content-Type-Options"] = "nosniff"
        return response


def _member(workspace, username):
    membership = workspace_members(workspace=workspace).filter(user__username=username).first()
    if membership is None:
        raise PermissionDenied("Not a member of this workspace.")
    return membership.user
