"""Pages under /w/<workspace>/specs/: specifications, versions, review, restart packages.

One module per entity; `specs.urls` uses the names re-exported here. Most screens configure
the generic views of `governance.views`.
"""

from specs.views.editor import EditorRowView, SuggestKeyView, VersionCreateView, VersionEditView
from specs.views.packages import (
    PackageCreateView,
    PackageDetailView,
    PackageExportView,
    PackageListView,
    PackageOutputView,
    PackageRowView,
)
from specs.views.specs import SpecCreateView, SpecDetailView, SpecEditView, SpecListView
from specs.views.versions import (
    ReviewQueueView,
    VersionApproveView,
    VersionDetailView,
    VersionDiffView,
    VersionDiscardView,
    VersionExportView,
    VersionImportView,
    VersionRejectView,
    VersionSubmitView,
)

__all__ = [
    "EditorRowView",
    "PackageCreateView",
    "PackageDetailView",
    "PackageExportView",
    "PackageListView",
    "PackageOutputView",
    "PackageRowView",
    "ReviewQueueView",
    "SpecCreateView",
    "SpecDetailView",
    "SpecEditView",
    "SpecListView",
    "SuggestKeyView",
    "VersionApproveView",
    "VersionCreateView",
    "VersionDetailView",
    "VersionDiffView",
    "VersionDiscardView",
    "VersionEditView",
    "VersionExportView",
    "VersionImportView",
    "VersionRejectView",
    "VersionSubmitView",
]
