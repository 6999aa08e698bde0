"""The lab reference: a model's latest qualification, as the trace pages compare with it."""

from __future__ import annotations

from dataclasses import dataclass

from qualification.models import (
    Qualification,
)
from qualification.selectors.analysis import analysis_current


@dataclass(frozen=True)
class LabStratum:
    tokens: int
    accuracy: float | None
    ci: tuple[float | None, float | None]
    tasks: int


@dataclass(frozen=True)
class LabFamily:
    family: str
    strata: list[LabStratum]
    ecl_tokens: int | None
    ecl_status: str
    ecl_text: str
    ecl_lower95_tokens: int | None
    knee_tokens: int | None

    def as_chart_dict(self) -> dict:
        """The shape `qualification.charts.add_decline_curve` draws."""
        return {
            "family": self.family,
            "strata": [
                {"tokens": s.tokens, "accuracy": s.accuracy, "ci": list(s.ci), "tasks": s.tasks}
                for s in self.strata
            ],
            "ecl_tokens": self.ecl_tokens,
            "ecl_status": self.ecl_status,
            "knee_tokens": self.knee_tokens,
        }


@dataclass(frozen=True)
class LabReference:
    qualification_id: int
    qualification_name: str
    model_name: str
    model_version: str
    configuration_fingerprint: str
    workload: str
    threshold: float
    consequence: str
    data_version: int
    families: list[LabFamily]
    weakest_family: str | None
    proposed_limit_tokens: int | None
    interval_note: str


def lab_reference_for_model(*, workspace, model_name: str) -> LabReference | None:
    """What the lab measured for a model: the latest analysed qualification of that model name.

    Per family: accuracy by stratum with its task-clustered interval, the ECL (fixed-sequence
    rule), the 95% lower ECL and the knee; plus θ and the proposed production limit. None when
    no qualification of this model has an analysis of its current trials. Draw a family's curve
    with `qualification.charts.add_decline_curve(fig, family.as_chart_dict(), theta=…)`.
    """
    candidates = (
        Qualification.objects.filter(workspace=workspace, configuration__model_name=model_name)
        .select_related("configuration", "workload")
        .order_by("-created_at", "-id")
    )
    for qualification in candidates[:20]:
        analysis = analysis_current(qualification=qualification)
        if analysis is None:
            continue
        result = analysis.result
        families = [
            LabFamily(
                family=f["family"],
                strata=[
                    LabStratum(s["tokens"], s["accuracy"], tuple(s["ci"]), s["tasks"])
                    for s in f["strata"]
                ],
                ecl_tokens=f["ecl_tokens"],
                ecl_status=f["ecl_status"],
                ecl_text=f["ecl_text"],
                ecl_lower95_tokens=f["ecl_lower95_tokens"],
                knee_tokens=f["knee_tokens"],
            )
            for f in result["families"]
        ]
        alpha = result["params"]["alpha"]
        return LabReference(
            qualification_id=qualification.pk,
            qualification_name=qualification.name,
            model_name=qualification.configuration.model_name,
            model_version=qualification.configuration.model_version,
            configuration_fingerprint=qualification.configuration.fingerprint,
            workload=str(qualification.workload),
            threshold=qualification.threshold,
            consequence=qualification.consequence,
            data_version=analysis.data_version,
            families=families,
            weakest_family=result["weakest_family"],
            proposed_limit_tokens=result["proposed_limit_tokens"],
            interval_note=(
                f"two-sided {1 - 2 * alpha:.0%} task-clustered intervals "
                f"(lower edge = one-sided {1 - alpha:.0%} bound)"
            ),
        )
    return None
