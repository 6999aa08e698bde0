"""Analytics filter sessions with the sessions FilterSet's own fields: same names and choices."""

from traces.analytics.forms import AnalyticsFilterForm
from traces.filters import SessionFilter

SHARED = ("started_after", "started_before", "harness", "model", "project")


def test_analytics_filters_are_the_sessions_filterset_fields():
    analytics = AnalyticsFilterForm().fields
    sessions = SessionFilter.base_filters
    for name in SHARED:
        assert type(analytics[name]) is type(sessions[name].field), name
    assert analytics["harness"].choices == sessions["harness"].field.choices
    assert ("", "Any harness") in analytics["harness"].choices


def test_analytics_and_sessions_refuse_the_same_values():
    data = {"harness": "no-such-harness", "model": "m" * 201, "started_after": "2026-01-02"}
    analytics = AnalyticsFilterForm(data)
    sessions = SessionFilter(data).form
    assert not analytics.is_valid() and not sessions.is_valid()
    assert set(analytics.errors) == set(sessions.errors) == {"harness", "model"}
    ok = AnalyticsFilterForm({"started_after": "2026-01-02", "project": " pay "})
    assert ok.is_valid()
    assert (ok.filters().started_after, ok.filters().project) == ("2026-01-02", "pay")
