"""The production-limit rule (METHODS.md §7) and the budget check of an assembly against an
operating limit. Plain data in, dataclasses out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numfmt

CONSEQUENCES = ("low", "medium", "high")

# consequence → margin factor, the limit rule's confidence (the lower ECL it starts from),
# per-stratum one-sided α and binomial interval method. The margin and confidence are our rule,
# not the literature's: cheap retries and deterministic checks may run close to the knee; costly
# failure with weak verification keeps one doubling of distance at 99% with exact intervals.
# α is METHODS.md §7's per-stratum default: .05, or .01 for high consequence. The low
# consequence's 90% is the limit rule's confidence only; it never loosens the stratum tests.
CONSEQUENCE_DEFAULTS = {
    "low": {"margin_factor": 1.0, "confidence": 0.90, "alpha": 0.05, "interval_method": "wilson"},
    "medium": {
        "margin_factor": 0.75, "confidence": 0.95, "alpha": 0.05, "interval_method": "wilson",
    },
    "high": {"margin_factor": 0.5, "confidence": 0.99, "alpha": 0.01, "interval_method": "beta"},
}  # fmt: skip

MARGIN_REASONS = {
    "low": "low consequence (cheap retries, deterministic verification): no margin below "
    "the basis, at 90% confidence",
    "medium": "medium consequence: ×0.75 of the basis at 95% confidence",
    "high": "high consequence (costly failure, weak verification): ×0.5 — one doubling "
    "down — at 99% confidence with Clopper–Pearson intervals",
}

RESERVE_ACTIONS = {
    "compact": "Compact the context",
    "restart_from_spec": "Restart from the consolidated specification",
    "split_task": "Split the task",
    "escalate": "Escalate to a human",
    "split_change": "Split the change across pull requests",
}

SOURCE_SUGGESTIONS = {
    "system": "System prompt",
    "tool_schemas": "Tool schemas",
    "retrieved_files": "Retrieved files",
    "history": "Conversation history",
    "memory": "Memory",
    "compaction_summary": "Compaction summary",
}

# Seed 004's per-stage window budget, offered as a template.
SEED_004_STAGES = [
    {"key": "ticket_parsing", "label": "Ticket parsing", "max_tokens": 4000,
     "target_tokens": None, "action": "split_task"},
    {"key": "plan_generation", "label": "Plan generation", "max_tokens": 12000,
     "target_tokens": None, "action": "split_task"},
    {"key": "file_selection", "label": "File selection", "max_tokens": 20000,
     "target_tokens": None, "action": "split_task"},
    {"key": "code_generation", "label": "Code generation", "max_tokens": 40000,
     "target_tokens": 25000, "action": "split_change"},
    {"key": "reviewer_summary", "label": "Reviewer summary", "max_tokens": 30000,
     "target_tokens": None, "action": "escalate"},
]  # fmt: skip


@dataclass(frozen=True)
class FamilyBasis:
    family: str
    ecl_tokens: int | None
    ecl_status: str
    lower_ecl_tokens: int | None
    knee_tokens: int | None
    refused: bool
    # The one-sided accuracy lower bound at each tested stratum: breaks ties between families.
    lower_bounds: dict[int, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class LimitProposal:
    tokens: int | None
    weakest_family: str | None
    basis_tokens: int | None
    basis_kind: str  # "knee", "lower_ecl", "ecl" or ""
    margin_factor: float
    confidence: float
    consequence: str
    target_tokens: float | None
    reason: str
    margin_reason: str
    candidates: list[dict] = field(default_factory=list)
    basis_text: str = ""
    weakest_reason: str = ""


def _basis_text(kind: str, confidence: float) -> str:
    return {
        "knee": "knee",
        "lower_ecl": f"{confidence:.0%} lower ECL",
        "ecl": "largest passing stratum",
    }.get(kind, "")


def propose_limit(
    families: list[FamilyBasis],
    strata: list[int],
    *,
    consequence: str,
    margin_factor: float,
    confidence: float,
) -> LimitProposal:
    """Weakest family's min(knee, lower ECL) × margin, rounded down to a tested stratum.

    Never above any family's largest passing stratum, never extrapolated.
    """
    strata = sorted(int(s) for s in strata)
    margin_reason = MARGIN_REASONS.get(consequence, f"margin ×{margin_factor:g}")

    def refuse(reason, weakest=None, candidates=()):
        return LimitProposal(
            None, weakest, None, "", margin_factor, confidence, consequence, None, reason,
            margin_reason, list(candidates),
        )  # fmt: skip

    if not families:
        return refuse("No task families to base a limit on.")
    refused = [f.family for f in families if f.refused]
    if refused:
        return refuse(
            f"No limit: the ECL of {', '.join(refused)} was refused, so the weakest family "
            "is unknown. Fix the data the refusal names."
        )
    candidates = []
    for family in families:
        if family.lower_ecl_tokens is None or family.ecl_tokens is None:
            return refuse(
                f"No limit: {family.family} does not meet θ even at the smallest tested stratum "
                f"({numfmt.tokens(strata[0])}) at {confidence:.0%} confidence. Test smaller "
                "strata, or requalify with a better configuration.",
                weakest=family.family,
            )
        basis, kind = family.lower_ecl_tokens, "lower_ecl"
        if family.knee_tokens is not None and family.knee_tokens < basis:
            basis, kind = family.knee_tokens, "knee"
        if basis > family.ecl_tokens:
            basis, kind = family.ecl_tokens, "ecl"
        candidates.append(
            {
                "family": family.family,
                "basis_tokens": basis,
                "basis_kind": kind,
                "lower_bound": family.lower_bounds.get(basis),
                "ecl_tokens": family.ecl_tokens,
            }
        )
    weakest, weakest_reason = _weakest(candidates)
    target = weakest["basis_tokens"] * margin_factor
    allowed = [s for s in strata if s <= target + 1e-9]
    kind_text = _basis_text(weakest["basis_kind"], confidence)
    if not allowed:
        return LimitProposal(
            None, weakest["family"], weakest["basis_tokens"], weakest["basis_kind"],
            margin_factor, confidence, consequence, target,
            f"No limit: {weakest['family']}'s {kind_text} ({numfmt.tokens(weakest['basis_tokens'])}) "
            f"× {margin_factor:g} = {numfmt.tokens(round(target))} is below the smallest tested "
            "stratum. Test smaller strata.",
            margin_reason, candidates, kind_text, weakest_reason,
        )  # fmt: skip
    tokens = allowed[-1]
    return LimitProposal(
        tokens, weakest["family"], weakest["basis_tokens"], weakest["basis_kind"],
        margin_factor, confidence, consequence, target,
        f"{weakest['family']} is the weakest family: its {kind_text} is "
        f"{numfmt.tokens(weakest['basis_tokens'])}; × {margin_factor:g} = "
        f"{numfmt.tokens(round(target))}, rounded down to the tested stratum "
        f"{numfmt.tokens(tokens)}.",
        margin_reason, candidates, kind_text, weakest_reason,
    )  # fmt: skip


def _weakest(candidates: list[dict]) -> tuple[dict, str]:
    """The family with the smallest basis; ties go to the lower accuracy bound at the basis,
    then the smaller point ECL, then the name. Returns it with the reason, naming the rule."""

    def bound(c):
        return c["lower_bound"] if c["lower_bound"] is not None else math.inf

    ordered = sorted(
        candidates, key=lambda c: (c["basis_tokens"], bound(c), c["ecl_tokens"], c["family"])
    )
    weakest = ordered[0]
    tied = [c for c in ordered[1:] if c["basis_tokens"] == weakest["basis_tokens"]]
    basis = numfmt.tokens(weakest["basis_tokens"])
    if not tied:
        return weakest, f"{weakest['family']} has the smallest basis ({basis})."
    others = ", ".join(c["family"] for c in tied)
    rival = tied[0]
    if bound(weakest) < bound(rival):
        why = (
            f"its one-sided accuracy lower bound at {basis} is lower "
            f"({weakest['lower_bound']:.3f} against {rival['lower_bound']:.3f})"
            if rival["lower_bound"] is not None
            else f"its accuracy lower bound at {basis} is the only one known"
        )
    elif weakest["ecl_tokens"] < rival["ecl_tokens"]:
        why = (
            f"the lower bounds tie, and its point ECL is smaller "
            f"({numfmt.tokens(weakest['ecl_tokens'])} against "
            f"{numfmt.tokens(rival['ecl_tokens'])})"
        )
    else:
        why = "the lower bounds and point ECLs tie too, so it is named alphabetically"
    return weakest, (
        f"{weakest['family']} ties with {others} on the basis ({basis}); it is named the "
        f"weakest because {why}. Ties go to the lower accuracy bound at the basis, then the "
        "smaller point ECL."
    )


# --- budget checks ---------------------------------------------------------------


@dataclass(frozen=True)
class StageBudget:
    key: str
    label: str
    max_tokens: int
    target_tokens: int | None = None
    action: str = ""


@dataclass(frozen=True)
class LimitSpec:
    max_context_tokens: int
    max_initial_assembly_tokens: int
    reserve_tokens: int
    reserve_action: str
    source_limits: dict[str, int] = field(default_factory=dict)
    stages: list[StageBudget] = field(default_factory=list)


@dataclass(frozen=True)
class BudgetVerdict:
    verdict: str  # "within" | "over"
    total: int
    limit: int
    reserve_left: int
    over_sources: list[dict]
    action: str
    stage: str
    unbudgeted_sources: list[str]
    above_target: bool
    reasons: list[str]


def check_budget(spec: LimitSpec, allocation: dict[str, int], stage: str = "") -> BudgetVerdict:
    """Compare one assembly's tokens by source with the limit (or one stage's budget).

    `reserve_left` is the room between this assembly and the qualified maximum context: what
    is left for tool output and correction before the reserve action must fire.
    """
    stage_budget = None
    if stage:
        stage_budget = next((s for s in spec.stages if s.key == stage), None)
        if stage_budget is None:
            known = ", ".join(s.key for s in spec.stages) or "none"
            raise ValueError(f"stage: unknown stage {stage!r}; this limit defines: {known}")
    limit = stage_budget.max_tokens if stage_budget else spec.max_initial_assembly_tokens
    total = int(sum(allocation.values()))
    over_sources = [
        {"source": source, "tokens": int(tokens), "limit": int(spec.source_limits[source])}
        for source, tokens in allocation.items()
        if source in spec.source_limits and tokens > spec.source_limits[source]
    ]
    unbudgeted = (
        sorted(s for s in allocation if s not in spec.source_limits) if spec.source_limits else []
    )
    reasons = []
    where = f"the {stage_budget.label} budget" if stage_budget else "the maximum initial assembly"
    if total > limit:
        reasons.append(f"total {total:,} exceeds {where} of {limit:,}")
    for item in over_sources:
        reasons.append(
            f"{item['source']} {item['tokens']:,} exceeds its limit of {item['limit']:,}"
        )
    over = bool(reasons)
    action = "proceed"
    if over:
        action = (stage_budget.action if stage_budget and stage_budget.action else "") or (
            spec.reserve_action
        )
    target = stage_budget.target_tokens if stage_budget else None
    return BudgetVerdict(
        verdict="over" if over else "within",
        total=total,
        limit=limit,
        reserve_left=spec.max_context_tokens - total,
        over_sources=over_sources,
        action=action,
        stage=stage,
        unbudgeted_sources=unbudgeted,
        above_target=bool(target and total > target),
        reasons=reasons,
    )


# --- review: what a new limit removes or loosens ---------------------------------------

# Kinds of change a reviewer must confirm: a removed value is no limit at all.
FLAGGED_KINDS = ("removed", "loosened")

# Token ceilings: more is looser.
_CEILINGS = (
    ("max_context_tokens", "maximum context"),
    ("max_initial_assembly_tokens", "maximum initial assembly"),
)


@dataclass(frozen=True)
class ValueChange:
    """One value of a limit compared with the limit it replaces."""

    field: str  # a path: "source_limits.memory", "stage_budgets.plan.max_tokens"
    label: str  # what a reviewer reads: "stage `plan` budget"
    kind: str  # "removed", "loosened", "tightened", "added" or "changed"
    before: int | str | None
    after: int | str | None

    @property
    def flagged(self) -> bool:
        return self.kind in FLAGGED_KINDS

    @property
    def before_text(self) -> str:
        return _show(self.before)

    @property
    def after_text(self) -> str:
        return _show(self.after)

    @property
    def text(self) -> str:
        """What a reviewer reads, e.g. removed: stage `plan` budget 40K; loosened: x 8K → 16K."""
        if self.kind == "removed":
            return f"removed: {self.label} {self.before_text}"
        if self.kind == "added":
            return f"added: {self.label} {self.after_text}"
        return f"{self.kind}: {self.label} {self.before_text} → {self.after_text}"

    def as_dict(self) -> dict:
        return {
            "field": self.field,
            "label": self.label,
            "kind": self.kind,
            "before": self.before,
            "after": self.after,
            "flagged": self.flagged,
            "text": self.text,
        }


def _show(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return numfmt.tokens(value)
    return RESERVE_ACTIONS.get(value, str(value)) if value else "–"


def _ceiling(field_path: str, label: str, before, after) -> ValueChange | None:
    """A token ceiling: gone is removed, higher is loosened, lower is tightened."""
    if before == after or (before is None and after is None):
        return None
    if after is None:
        return ValueChange(field_path, label, "removed", before, None)
    if before is None:
        return ValueChange(field_path, label, "added", None, after)
    kind = "loosened" if after > before else "tightened"
    return ValueChange(field_path, label, kind, before, after)


def _reserve(before: dict, after: dict) -> ValueChange | None:
    """The reserve is judged by its share of the maximum context: a smaller share holds back
    less room for tool output (loosened); the same share at a new size follows the maximum."""
    old, new = before.get("reserve_tokens"), after.get("reserve_tokens")
    if old == new or old is None or new is None:
        return None
    old_max, new_max = before.get("max_context_tokens"), after.get("max_context_tokens")
    if not old_max or not new_max:
        kind = "loosened" if new < old else "tightened"
    else:
        # Cross-multiplied shares: exact for whole numbers of tokens.
        old_share, new_share = old * new_max, new * old_max
        kind = "changed"
        if new_share != old_share:
            kind = "loosened" if new_share < old_share else "tightened"
    return ValueChange("reserve_tokens", "reserve", kind, old, new)


def compare_limit_values(before: dict, after: dict) -> list[ValueChange]:
    """Every value `after` changes relative to `before`, in reading order: totals, reserve,
    per-source limits, then per-stage budgets (their max, target and action).

    Both are a limit's values as plain data: `max_context_tokens`,
    `max_initial_assembly_tokens`, `reserve_tokens`, `reserve_action`, `source_limits`
    ({source: tokens}) and `stage_budgets` ([{key, max_tokens, target_tokens, action}]).
    """
    changes: list[ValueChange] = []
    for name, label in _CEILINGS:
        change = _ceiling(name, label, before.get(name), after.get(name))
        if change:
            changes.append(change)
    reserve = _reserve(before, after)
    if reserve:
        changes.append(reserve)
    if before.get("reserve_action") != after.get("reserve_action"):
        changes.append(
            ValueChange(
                "reserve_action",
                "action when the reserve is exhausted",
                "changed",
                before.get("reserve_action"),
                after.get("reserve_action"),
            )
        )
    old_sources = before.get("source_limits") or {}
    new_sources = after.get("source_limits") or {}
    for source in [*old_sources, *(s for s in new_sources if s not in old_sources)]:
        change = _ceiling(
            f"source_limits.{source}",
            f"source `{source}` limit",
            old_sources.get(source),
            new_sources.get(source),
        )
        if change:
            changes.append(change)
    old_stages = {s["key"]: s for s in before.get("stage_budgets") or []}
    new_stages = {s["key"]: s for s in after.get("stage_budgets") or []}
    for key in [*old_stages, *(k for k in new_stages if k not in old_stages)]:
        old, new = old_stages.get(key), new_stages.get(key)
        path = f"stage_budgets.{key}"
        if old is None or new is None:
            change = _ceiling(
                path,
                f"stage `{key}` budget",
                old and old["max_tokens"],
                new and new["max_tokens"],
            )
            changes.append(change)
            continue
        for part, label in (("max_tokens", "budget"), ("target_tokens", "target")):
            change = _ceiling(
                f"{path}.{part}", f"stage `{key}` {label}", old.get(part), new.get(part)
            )
            if change:
                changes.append(change)
        if (old.get("action") or "") != (new.get("action") or ""):
            changes.append(
                ValueChange(
                    f"{path}.action",
                    f"stage `{key}` action when over",
                    "changed",
                    old.get("action") or "reserve action",
                    new.get("action") or "reserve action",
                )
            )
    return changes


# --- harness model ids ---------------------------------------------------------------

_PROVIDER_PREFIX = re.compile(r"^(?:[a-z0-9-]+\.)*anthropic\.")  # Bedrock: us.anthropic.…
_SNAPSHOT_SUFFIXES = (
    re.compile(r"\[[^\]]*\]$"),  # Claude Code's window marker: claude-sonnet-4-5[1m]
    re.compile(r"-v\d+(?::\d+)?$"),  # Bedrock revision: …-v1:0
    re.compile(r"@\d{8}$"),  # Vertex snapshot: …@20250514
    re.compile(r"-\d{8}$"),  # API snapshot: …-20250514
)


def model_family_id(model_id: str) -> str:
    """A model id without its provider prefix and snapshot date: what a harness reports
    (`claude-sonnet-4-20250514`, `us.anthropic.claude-sonnet-4-20250514-v1:0`,
    `claude-sonnet-4@20250514`, `claude-sonnet-4[1m]`) and what a configuration names
    (`claude-sonnet-4`) compare equal after it. Dates are dropped only as a whole suffix,
    so `claude-sonnet-4-5` stays distinct from `claude-sonnet-4`."""
    name = _PROVIDER_PREFIX.sub("", model_id.strip().lower())
    for suffix in _SNAPSHOT_SUFFIXES:
        name = suffix.sub("", name)
    return name
