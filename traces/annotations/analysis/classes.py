"""The failure classes of a first consequential divergence, and what they suggest for a restart.

Seed 000 names six classes (retrieval failure, incorrect symbol relationships, forgotten
constraints, repetition, stale or conflicting evidence, harness truncation); seed 004 adds
three retrieval diagnostics (hallucinated reference, over-broad change, under-changed fix).
The slugs are part of the API and never change.
"""

from __future__ import annotations

FAILURE_CLASSES: dict[str, tuple[str, str]] = {
    "retrieval_failure": (
        "Retrieval failure",
        "The evidence the step needed was never found or never loaded.",
    ),
    "incorrect_symbol_relationship": (
        "Incorrect symbol relationship",
        "The model confused similarly named symbols or misread how code relates (caller, "
        "override, import).",
    ),
    "forgotten_constraint": (
        "Forgotten constraint",
        "An instruction or constraint given earlier stopped influencing the work.",
    ),
    "repetition": (
        "Repetition",
        "The run repeats earlier actions or text instead of making progress.",
    ),
    "stale_or_conflicting_evidence": (
        "Stale or conflicting evidence",
        "The step followed an outdated fact or could not reconcile versions that disagree.",
    ),
    "harness_truncation": (
        "Harness truncation",
        "The harness clipped a message, a tool result or the history at its own cap: an "
        "apparatus failure, not a model limit.",
    ),
    "hallucinated_reference": (
        "Hallucinated reference",
        "The model referenced a function, file or API that does not exist (missing context "
        "filled with invention).",
    ),
    "over_broad_change": (
        "Over-broad change",
        "The change touched far more than the task needed (retrieval gave too much).",
    ),
    "under_changed_fix": (
        "Under-changed fix",
        "The fix treated the symptom and missed a caller or sibling with the same bug "
        "(retrieval missed the call graph).",
    ),
    "other": ("Other", "Something else; describe it."),
}
CLASS_SLUGS: tuple[str, ...] = tuple(FAILURE_CLASSES)
OTHER = "other"
NO_DIVERGENCE = "none"  # a queue annotator's "this run did not go wrong" (not a class)

CONFIDENCES: dict[str, str] = {"low": "Low", "medium": "Medium", "high": "High"}

# Restart indicators of the restart-package builder (specs) a class suggests. Only where the
# class plausibly shows up as that indicator; the builder lets the reviewer change them.
RESTART_INDICATORS: dict[str, tuple[str, ...]] = {
    "stale_or_conflicting_evidence": ("superseded-assumption", "conflicting-summaries"),
    "forgotten_constraint": ("reproposed-rejected-interface",),
}


def class_label(slug: str) -> str:
    if slug == NO_DIVERGENCE:
        return "No divergence"
    return FAILURE_CLASSES.get(slug, (slug, ""))[0]


def restart_indicators(slug: str) -> tuple[str, ...]:
    return RESTART_INDICATORS.get(slug, ())
