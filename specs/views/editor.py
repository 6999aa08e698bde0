"""The version editor: a new draft or a draft edited in place, with rows added by htmx."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views import View

from governance.errors import Conflict, InputError
from governance.models import Role
from governance.views import WorkspaceMixin
from specs import forms, selectors, services
from specs.analysis.content import suggest_key
from specs.models import ItemKind, ItemStatus, SpecVersion


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
            except InputError as exc:
                editor.add_errors(exc.field_errors or {"items": [exc.message]})
            except Conflict as exc:
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
            except InputError as exc:
                editor.add_errors(exc.field_errors or {"items": [exc.message]})
            except Conflict as exc:
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
