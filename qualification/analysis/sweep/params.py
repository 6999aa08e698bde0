"""The trial table's columns and every choice the analysis makes (METHODS.md §7)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from qualification.analysis.intervals import (
    BINOMIAL_METHODS,
)
from qualification.analysis.limits import CONSEQUENCE_DEFAULTS

OVERALL = "overall"
# METHODS.md §7: R < 3 repeats per stratum is refused; an override may raise min_repeats, never
# lower it below this.
MIN_REPEATS_FLOOR = 3
COLUMNS = [
    "family", "task", "stratum", "repeat", "task_correct", "retrieval_correct",
    "input_tokens", "output_tokens", "model_calls", "tool_calls", "cost", "latency_ms",
]  # fmt: skip


@dataclass(frozen=True)
class AnalysisParams:
    """Every choice the analysis makes. Defaults follow METHODS.md §7 and the consequence."""

    threshold: float
    consequence: str = "medium"
    alpha: float = 0.05  # one-sided, per stratum and for the fixed-sequence tests (.01 if high)
    interval_method: str = "wilson"
    min_repeats: int = MIN_REPEATS_FLOOR
    bootstrap_replicates: int = 2000
    bootstrap_seed: int = 20250101
    lower_ecl_confidence: float = 0.95  # the consequence's confidence, used by the limit rule
    knee_delta: float = 0.05
    knee_confidence: float = 0.95
    saturation_epsilon: float = 0.03
    saturation_confidence: float = 0.95
    kneedle_sensitivity: float = 1.0
    kneedle_min_strata: int = 5
    gee_confidence: float = 0.90
    margin_factor: float = 0.75
    reliability_k: int | None = None  # None: the fewest repeats any task has
    reliability_threshold: float | None = None  # None: θ
    limit_families: tuple[str, ...] | None = None  # None: every family must stay reliable

    @classmethod
    def for_qualification(
        cls, *, threshold: float, consequence: str, overrides: dict | None = None
    ) -> AnalysisParams:
        """Defaults for the consequence, then the recorded overrides, validated by name."""
        if consequence not in CONSEQUENCE_DEFAULTS:
            raise ValueError(f"consequence: must be one of {', '.join(CONSEQUENCE_DEFAULTS)}")
        preset = CONSEQUENCE_DEFAULTS[consequence]
        params = cls(
            threshold=threshold,
            consequence=consequence,
            alpha=preset["alpha"],
            interval_method=preset["interval_method"],
            lower_ecl_confidence=preset["confidence"],
            margin_factor=preset["margin_factor"],
        )
        overrides = dict(overrides or {})
        names = {f.name for f in fields(cls)} - {"threshold", "consequence"}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise ValueError(
                f"analysis_params: unknown parameter {unknown[0]!r}; known: {', '.join(sorted(names))}"
            )
        if overrides.get("limit_families") is not None:
            overrides["limit_families"] = tuple(overrides["limit_families"])
        params = replace(params, **overrides)
        params.validate()
        return params

    def validate(self) -> None:
        def bad(name, why):
            raise ValueError(f"{name}: {why}")

        if not 0 < self.threshold < 1:
            bad("threshold", "must be strictly between 0 and 1")
        if not 0 < self.alpha < 0.5:
            bad("alpha", "must be between 0 and 0.5 (one-sided)")
        if self.interval_method not in BINOMIAL_METHODS:
            bad("interval_method", f"must be one of {', '.join(BINOMIAL_METHODS)}")
        if (
            not isinstance(self.min_repeats, int)
            or isinstance(self.min_repeats, bool)
            or self.min_repeats < MIN_REPEATS_FLOOR
        ):
            bad(
                "min_repeats",
                f"must be a whole number of at least {MIN_REPEATS_FLOOR}: with fewer repeats "
                "reliability across repeats cannot be estimated, so the sweep must be refused "
                "(METHODS.md §7)",
            )
        if (
            not isinstance(self.bootstrap_replicates, int)
            or not 200 <= self.bootstrap_replicates <= 20000
        ):
            bad("bootstrap_replicates", "must be an integer from 200 to 20000")
        for name in (
            "lower_ecl_confidence",
            "knee_confidence",
            "saturation_confidence",
            "gee_confidence",
        ):
            if not 0.5 <= getattr(self, name) < 1:
                bad(name, "must be at least 0.5 and below 1")
        for name in ("knee_delta", "saturation_epsilon"):
            if not 0 < getattr(self, name) < 1:
                bad(name, "must be between 0 and 1")
        if not 0 < self.margin_factor <= 1:
            bad("margin_factor", "must be in (0, 1]: a margin never raises the limit")
        if self.reliability_k is not None and (
            not isinstance(self.reliability_k, int) or self.reliability_k < 1
        ):
            bad("reliability_k", "must be a positive integer")
        if self.reliability_threshold is not None and not 0 < self.reliability_threshold < 1:
            bad("reliability_threshold", "must be strictly between 0 and 1")

    def as_dict(self) -> dict:
        data = asdict(self)
        data["limit_families"] = list(self.limit_families) if self.limit_families else None
        return data
