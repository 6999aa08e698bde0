"""The analytics filters and the calls they select."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson
from django.db.models import QuerySet

from governance.models import Workspace
from traces.filters import text_contains
from traces.models import Call, Session, StartKind

JOB_KIND = "trace_analytics"
FILTER_FIELDS = ("started_after", "started_before", "harness", "model", "project", "task_type")
# upper_from: seed 001 §4.2 measures D "above 200k", where growth per step is stable.
PARAMETER_DEFAULTS = {"band": 25_000, "upper_from": 200_000, "fork_bound": 100_000, "window": 25}


@dataclass(frozen=True)
class AnalyticsFilters:
    started_after: str = ""  # YYYY-MM-DD, on the call's date
    started_before: str = ""
    harness: str = ""
    model: str = ""
    project: str = ""
    task_type: str = ""
    band: int = PARAMETER_DEFAULTS["band"]
    upper_from: int = PARAMETER_DEFAULTS["upper_from"]
    fork_bound: int = PARAMETER_DEFAULTS["fork_bound"]
    window: int = PARAMETER_DEFAULTS["window"]
    exclude_forks: bool = False  # drop agents that start as forks (Agent.start_kind == "fork")

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    @property
    def key(self) -> str:
        return hashlib.sha256(orjson.dumps(self.as_dict(), option=orjson.OPT_SORT_KEYS)).hexdigest()

    def describe(self) -> str:
        parts = [
            f"{name.replace('_', ' ')} = {value}"
            for name in FILTER_FIELDS
            if (value := getattr(self, name))
        ]
        if self.exclude_forks:
            parts.append("forked starts excluded")
        return "; ".join(parts) if parts else "all traces"


def _day(value: str) -> datetime:
    """The start of a YYYY-MM-DD date in UTC."""
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def selected_calls(workspace: Workspace, filters: AnalyticsFilters) -> QuerySet[Call]:
    """The calls the filters select; the model by its whole name, the project as on the sessions list
    (`traces.filters.text_contains`), dates are the call's UTC date; `exclude_forks` drops
    the calls of agents that started as forks of a loaded parent."""
    calls = Call.objects.filter(workspace=workspace)
    if filters.exclude_forks:
        # Every analysis reads its agents from these calls, so a fork is excluded from all.
        calls = calls.exclude(agent__start_kind=StartKind.FORK)
    if filters.started_after:
        calls = calls.filter(timestamp__gte=_day(filters.started_after))
    if filters.started_before:
        calls = calls.filter(timestamp__lt=_day(filters.started_before) + timedelta(days=1))
    if filters.model:
        calls = calls.filter(model=filters.model)
    if filters.harness or filters.project:
        sessions = Session.objects.filter(workspace=workspace)
        if filters.harness:
            sessions = sessions.filter(harness=filters.harness)
        if filters.project:
            sessions = sessions.filter(text_contains("project", filters.project))
        calls = calls.filter(session_id__in=sessions.values("id"))
    return calls.order_by()
