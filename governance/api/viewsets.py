"""Base API views: every queryset is scoped to the request's workspace."""

from rest_framework import mixins, viewsets


class WorkspaceScopedMixin:
    """Scope `queryset` to `request.workspace`; objects elsewhere are simply not found."""

    def get_queryset(self):
        return super().get_queryset().filter(workspace=self.request.workspace)

    @property
    def workspace(self):
        return self.request.workspace


class WorkspaceReadOnlyViewSet(WorkspaceScopedMixin, viewsets.ReadOnlyModelViewSet):
    """List and retrieve, nothing else (jobs, audit events, write failures)."""


class WorkspaceViewSet(
    WorkspaceScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """List and retrieve; subclasses add create/update actions that call services."""
