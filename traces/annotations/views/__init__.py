"""Pages of the annotations area, a package by entity: the viewer (`viewer.py`), queues
(`queues.py`) and the aggregates (`aggregates.py`); shared helpers in `common.py`.
"""

from traces.annotations.views.aggregates import (
    DivergenceBandsCsv,
    DivergenceListView,
    DivergencePointsCsv,
)
from traces.annotations.views.common import agent_label, restart_url
from traces.annotations.views.queues import (
    QueueDetailView,
    QueueFinishView,
    QueueListView,
    QueueNextView,
    QueueStatusView,
)
from traces.annotations.views.viewer import (
    AdjudicateView,
    CallPartView,
    MarkView,
    SessionViewerRedirect,
    ViewerView,
    save_mark,
)

__all__ = [
    "AdjudicateView",
    "CallPartView",
    "DivergenceBandsCsv",
    "DivergenceListView",
    "DivergencePointsCsv",
    "MarkView",
    "QueueDetailView",
    "QueueFinishView",
    "QueueListView",
    "QueueNextView",
    "QueueStatusView",
    "SessionViewerRedirect",
    "ViewerView",
    "agent_label",
    "restart_url",
    "save_mark",
]
