"""A whole context-size sweep: per family and overall, the four outcomes per stratum, the ECL
with its uncertainty, knee, saturation, refusals and the proposed production limit.

Input is a plain table of trials (a pandas DataFrame); output is a `SweepResult` dataclass.
Every default of METHODS.md §7 is a field of `AnalysisParams` and is recorded with the result.
One module per step; everything a caller uses is re-exported here.
"""

from qualification.analysis.refusals import RULE_MIN_REPEATS, RULE_MIN_TASKS, RULE_UNPAIRED
from qualification.analysis.sweep.family import analyse_family
from qualification.analysis.sweep.params import COLUMNS, MIN_REPEATS_FLOOR, OVERALL, AnalysisParams
from qualification.analysis.sweep.results import FamilyResult, StratumResult, SweepResult, ecl_text
from qualification.analysis.sweep.run import (
    METHOD_NOTES,
    analyse_sweep,
    requalification_shifts,
    trials_frame,
)

__all__ = [
    "COLUMNS", "METHOD_NOTES", "MIN_REPEATS_FLOOR", "OVERALL", "RULE_MIN_REPEATS",
    "RULE_MIN_TASKS", "RULE_UNPAIRED", "AnalysisParams", "FamilyResult",
    "StratumResult", "SweepResult", "analyse_family", "analyse_sweep", "ecl_text",
    "requalification_shifts", "trials_frame",
]  # fmt: skip
