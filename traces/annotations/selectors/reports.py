"""Reports shared by pages and the API: marks by context band, and the lab comparison."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from governance.models import Workspace
from traces.annotations.analysis import aggregates
from traces.annotations.models import (
    Divergence,
)
from traces.annotations.selectors.marks import lab_reference, resolved, weakest_family


@dataclass
class BandReport:
    table: aggregates.BandTable
    resolution: aggregates.Resolution
    points: list[aggregates.MarkPoint]
    basis: str
    window: int
    distribution: aggregates.Distribution


def band_report(
    *, marks: QuerySet[Divergence], width: int = aggregates.DEFAULT_BAND, basis: str = "resolved",
    window: int = 3,
) -> BandReport:  # fmt: skip
    points, resolution = resolved(marks=marks, window=window, basis=basis)
    table = aggregates.by_band(((p.context, p.failure_class) for p in points), width=width)
    dist = aggregates.distribution([p.context for p in points])
    return BandReport(table, resolution, points, basis, window, dist)


@dataclass
class LabReport:
    model: str
    reference: object | None  # qualification.selectors.LabReference
    family: object | None  # its weakest LabFamily
    comparison: aggregates.LabComparison | None
    contexts: list[int]


def models_marked(*, points: list[aggregates.MarkPoint]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for p in points:
        if p.model:
            counts[p.model] = counts.get(p.model, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def lab_report(
    *, workspace: Workspace, points: list[aggregates.MarkPoint], model: str
) -> LabReport:
    contexts = sorted(p.context for p in points if p.model == model)
    reference = lab_reference(workspace=workspace, model_name=model) if model else None
    family = weakest_family(reference)
    comparison = None
    if reference is not None and family is not None:
        comparison = aggregates.compare_with_lab(
            contexts,
            ecl_tokens=family.ecl_tokens,
            knee_tokens=family.knee_tokens,
            family=family.family,
        )
    return LabReport(model, reference, family, comparison, contexts)
