"""Reads for analytics: columns as numpy arrays (never model instances), and cached results;
a package: the filters (`filters.py`), loading columns (`loading.py`), cached results and their
jobs (`jobs.py`) and the what-if calculator (`what_if.py`).
"""

from traces.analytics.selectors.filters import (
    FILTER_FIELDS,
    JOB_KIND,
    PARAMETER_DEFAULTS,
    AnalyticsFilters,
    selected_calls,
)
from traces.analytics.selectors.jobs import failed_on, failure_reason, latest_job, result_for
from traces.analytics.selectors.loading import (
    CALL_COLUMNS,
    COPY_BLOCK_BYTES,
    AnalyticsData,
    _call_level,
    _runs_for_calls,
    load,
)
from traces.analytics.selectors.what_if import (
    SEED_FIRST5_RATIO,
    WhatIf,
    cycle_disruption,
    what_if,
    what_if_scenarios,
)

__all__ = [
    "CALL_COLUMNS",
    "COPY_BLOCK_BYTES",
    "FILTER_FIELDS",
    "JOB_KIND",
    "PARAMETER_DEFAULTS",
    "SEED_FIRST5_RATIO",
    "AnalyticsData",
    "AnalyticsFilters",
    "WhatIf",
    "_call_level",
    "_runs_for_calls",
    "cycle_disruption",
    "failed_on",
    "failure_reason",
    "latest_job",
    "load",
    "result_for",
    "selected_calls",
    "what_if",
    "what_if_scenarios",
]
