"""Pages: the artifacts list, an artifact's page (tail, search, range, read log), settings."""

from governance.views import WorkspaceListView, WorkspaceTemplateView


class ArtifactListView(WorkspaceListView):
    pass


class ArtifactSettingsView(WorkspaceTemplateView):
    pass


class ArtifactDetailView(WorkspaceTemplateView):
    pass


class ArtifactContentView(WorkspaceTemplateView):
    pass


class ArtifactDeleteView(WorkspaceTemplateView):
    pass
