"""Specification pages: the list, one specification, creating one and its settings."""

from __future__ import annotations

from django.utils.functional import cached_property

from governance.models import Role
from governance.selectors import workspace_members
from governance.views import (
    WorkspaceFormView,
    WorkspaceListView,
    WorkspaceObjectMixin,
    WorkspaceObjectView,
)
from specs import forms, selectors, services
from specs.filters import SpecFilter
from specs.models import VersionStatus
from specs.views._common import grouped_items, member_user


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


class SpecCreateView(WorkspaceFormView):
    template_name = "specs/spec_form.html"
    form_class = forms.SpecForm
    read_role = Role.EDITOR
    success_message = "Created “{result.title}”. Write its first version next."

    def get_form_kwargs(self):
        return {"members": workspace_members(workspace=self.workspace)}

    def perform(self, form):
        data = form.cleaned_data
        return services.spec_create(
            workspace=self.workspace,
            actor=self.request.user,
            title=data["title"],
            slug=data["slug"],
            consequence=data["consequence"],
            summary=data["summary"],
            owner=member_user(self.workspace, data["owner"]) if data["owner"] else None,
            project=data["project"],
        )

    def get_success_url(self, spec):
        return self.wreverse("specs:spec_detail", spec.slug)


class SpecEditView(WorkspaceObjectMixin, WorkspaceFormView):
    """Title, summary, owner and consequence. Reviewers only: consequence decides who reviews."""

    template_name = "specs/spec_form.html"
    form_class = forms.SpecForm
    read_role = Role.REVIEWER
    write_role = Role.REVIEWER
    selector = selectors.spec_get
    lookup = {"slug": "slug"}
    success_message = "Saved."

    def get_initial(self):
        spec = self.object
        return {
            "title": spec.title,
            "consequence": spec.consequence,
            "summary": spec.summary,
            "owner": spec.owner.username if spec.owner else "",
            "project": spec.project,
        }

    def get_form_kwargs(self):
        return {"members": workspace_members(workspace=self.workspace), "editing": True}

    def get_context_data(self, **kwargs):
        return super().get_context_data(spec=self.object, **kwargs)

    def perform(self, form):
        data = form.cleaned_data
        spec = self.object
        return services.spec_update(
            spec=spec,
            actor=self.request.user,
            title=data["title"],
            consequence=data["consequence"],
            summary=data["summary"],
            owner=member_user(self.workspace, data["owner"]) if data["owner"] else spec.owner,
            project=data["project"],
        )

    def get_success_url(self, spec):
        return self.wreverse("specs:spec_detail", spec.slug)


class SpecDetailView(WorkspaceObjectView):
    template_name = "specs/spec_detail.html"
    selector = selectors.spec_get
    lookup = {"slug": "slug"}
    context_object_name = "spec"

    @cached_property
    def current(self):
        return selectors.authoritative_version(spec=self.object)

    def get_context_data(self, **kwargs):
        spec, current = self.object, self.current
        versions = list(selectors.versions_of(spec=spec))
        for version in versions:
            version.stale = selectors.is_stale(version=version, current=current)
        items = list(current.items.all()) if current else []
        return super().get_context_data(
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
