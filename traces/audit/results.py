"""The audit's results as plain JSON-ready data (shared by the results page, its CSV and the API)."""

from __future__ import annotations

from dataclasses import asdict

from traces.audit.analysis import fractions
from traces.models import TaskType


def _median(m: fractions.Median) -> dict:
    return {"value": m.value, "ci": list(m.ci) if m.ci else None}


def _share(s: fractions.Share) -> dict:
    return {"k": s.k, "n": s.n, "share": s.share, "ci": list(s.ci) if s.ci else None}


def _kappa(k) -> dict:
    data = asdict(k)
    data["categories"] = list(k.categories)
    data["interpretation"] = k.interpretation
    data["value"] = data.pop("kappa")
    if data["value"] is None:
        data["value_text"] = "undefined"
    return data


def results_dict(results: fractions.AuditResults) -> dict:
    labels = dict(TaskType.choices)
    return {
        "n_judgments": results.n_judgments,
        "n_steps": results.n_steps,
        "basis": results.basis,
        "excluded_low_confidence": results.excluded_low_confidence,
        "median_method": results.median_method,
        "share_method": results.share_method,
        "active_by_band": [
            {
                "band": row.band,
                "n": row.n,
                "window_tokens": _median(row.window),
                "active_tokens": _median(row.active_tokens),
                "active_share": _median(row.active_share),
                "helpful_tokens": _median(row.helpful_tokens),
                "helpful_share": _median(row.helpful_share),
            }
            for row in results.bands
        ],
        "verbatim_by_task_type": [
            {"task_type": task, "label": labels.get(task, task), **_share(share)}
            for task, share in results.verbatim_by_task.items()
        ],
        "verbatim_overall": _share(results.verbatim_overall),
        "counterfactual": [
            {"class": slug, "label": fractions.COUNTERFACTUALS[slug], **_share(share)}
            for slug, share in results.counterfactual.items()
        ],
        "counterfactual_question": fractions.COUNTERFACTUAL_QUESTION,
        "agreement": {
            "steps": results.agreement.steps,
            "counterfactual_kappa": _kappa(results.agreement.counterfactual),
            "verbatim_kappa": _kappa(results.agreement.verbatim),
            "active_jaccard": results.agreement.active_jaccard,
            "active_jaccard_ci": list(results.agreement.active_jaccard_ci)
            if results.agreement.active_jaccard_ci
            else None,
            "jaccard_method": results.agreement.jaccard_method,
        },
    }
