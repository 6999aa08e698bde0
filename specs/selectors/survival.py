"""Reads for the survival audit: which spec governs a session, what each compaction kept, the
shares by trigger. Scoped by workspace; a foreign or missing object is a 404."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Prefetch
from django.http import Http404
from statsmodels.stats.proportion import proportion_confint

from governance.models import Membership
from specs.models import Spec, SpecVersion, SurvivalAudit, SurvivalVerdict, VersionStatus
from traces.models import Compaction, CompactionTrigger, Session

LEVEL = 0.95
SHARE_METHOD = (
    "share of settled items kept, items pooled over the compactions of each trigger; "
    "95% Wilson score interval on the items (items of one compaction are not independent, "
    "so the interval is narrower than a per-compaction one would be); a person's correction "
    "replaces the computed verdict"
)


def _path(value: str) -> str:
    return value.strip().rstrip("/") or value.strip()


def spec_for_session(*, session: Session) -> Spec | None:
    """The spec governing the session's project: a spec with an authoritative version whose
    `project` is the session's directory or one above it; the longest such path wins, then the
    oldest spec."""
    project = _path(session.project or "")
    if not project:
        return None
    specs = Spec.objects.filter(
        workspace_id=session.workspace_id,
        versions__status=VersionStatus.AUTHORITATIVE,
    ).exclude(project="")
    best = None
    for spec in specs.order_by("id"):
        root = _path(spec.project)
        inside = project == root or project.startswith(root.rstrip("/") + "/")
        if inside and (best is None or len(root) > len(_path(best.project))):
            best = spec
    return best


def verdict_get(*, workspace, pk: int) -> SurvivalVerdict:
    verdict = (
        SurvivalVerdict.objects.filter(workspace=workspace, pk=pk)
        .select_related("audit__compaction__session", "audit__spec_version__spec", "corrected_by")
        .first()
    )
    if verdict is None:
        raise Http404("No such survival verdict in this workspace.")
    return verdict


def verdicts_for(*, workspace):
    return SurvivalVerdict.objects.filter(workspace=workspace).select_related(
        "audit__compaction", "audit__spec_version__spec", "corrected_by"
    )


def names_key(text: str, key: str) -> bool:
    """True when `text` names the item key as a whole word, ignoring case."""
    key = key.casefold().strip()
    if not key or not text:
        return False
    return re.search(rf"(?<![a-z0-9_]){re.escape(key)}(?![a-z0-9_])", text.casefold()) is not None


@dataclass
class DivergenceLink:
    pk: int
    session_id: int
    run_id: int
    call_index: int
    label: str


@dataclass
class CompactionSurvival:
    compaction: Compaction
    audit: SurvivalAudit
    verdicts: list[SurvivalVerdict]
    kept: int = 0
    lost: int = 0
    corrected: int = 0
    lost_verdicts: list[SurvivalVerdict] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.kept + self.lost


def _latest_audits(compactions) -> dict[int, SurvivalAudit]:
    audits = (
        SurvivalAudit.objects.filter(compaction__in=compactions)
        .select_related("spec_version__spec")
        .prefetch_related(
            Prefetch(
                "verdicts",
                queryset=SurvivalVerdict.objects.select_related("corrected_by").order_by(
                    "position"
                ),
            )
        )
        .order_by("compaction_id", "-ran_at", "-id")
    )
    latest: dict[int, SurvivalAudit] = {}
    for audit in audits:
        latest.setdefault(audit.compaction_id, audit)
    return latest


def _visible_divergences(*, session: Session, membership: Membership | None):
    from traces.annotations.models import Divergence
    from traces.annotations.selectors import marks_visible_to

    marks = list(
        Divergence.objects.filter(session=session, replaced_at__isnull=True).order_by(
            "call_index", "id"
        )
    )
    if membership is None:
        return marks
    by_run: dict[int, list] = defaultdict(list)
    for mark in marks:
        by_run[mark.run_id].append(mark)
    shown = []
    for run_marks in by_run.values():
        shown += marks_visible_to(membership=membership, marks=run_marks).marks
    return sorted(shown, key=lambda m: (m.call_index, m.pk))


def session_survival(
    *, session: Session, membership: Membership | None = None
) -> list[CompactionSurvival]:
    """Each audited compaction of the session (its latest audit), with kept and lost counts
    after corrections; a lost verdict carries `divergence`: the first later divergence mark
    (visible to `membership`) whose note or class text names the item's key."""
    compactions = list(session.compactions.select_related("agent").order_by("timestamp", "id"))
    latest = _latest_audits(compactions)
    if not latest:
        return []
    divergences = _visible_divergences(session=session, membership=membership)
    rows = []
    for compaction in compactions:
        audit = latest.get(compaction.pk)
        if audit is None:
            continue
        verdicts = list(audit.verdicts.all())
        row = CompactionSurvival(compaction=compaction, audit=audit, verdicts=verdicts)
        after = compaction.after_call_index
        if after is None and compaction.before_call_index is not None:
            after = compaction.before_call_index + 1
        for verdict in verdicts:
            row.corrected += verdict.is_corrected
            verdict.divergence = None
            if verdict.final_kept:
                row.kept += 1
                continue
            row.lost += 1
            row.lost_verdicts.append(verdict)
            for mark in divergences:
                if after is not None and mark.call_index < after:
                    continue
                if names_key(f"{mark.note}\n{mark.other_text}", verdict.key):
                    verdict.divergence = DivergenceLink(
                        mark.pk, mark.session_id, mark.run_id, mark.call_index, mark.class_label
                    )
                    break
        rows.append(row)
    return rows


def compaction_survival_map(*, session: Session, membership=None) -> dict[int, CompactionSurvival]:
    """`session_survival` keyed by compaction id, for the trace viewer's markers."""
    return {
        row.compaction.pk: row for row in session_survival(session=session, membership=membership)
    }


def wilson(kept: int, n: int) -> dict:
    if n == 0:
        return {"count": 0, "n": 0, "rate": None, "ci": None}
    low, high = proportion_confint(kept, n, alpha=1 - LEVEL, method="wilson")
    return {"count": kept, "n": n, "rate": kept / n, "ci": [float(low), float(high)]}


@dataclass
class TriggerShare:
    trigger: str
    compactions: int
    share: dict


@dataclass
class LostItem:
    spec: Spec
    key: str
    lost: int
    audited: int
    reasons: list[tuple[str, int]]


@dataclass
class SurvivalSummary:
    by_trigger: list[TriggerShare]
    overall: TriggerShare
    lost_most: list[LostItem]
    compactions: int
    corrected: int
    method: str = SHARE_METHOD


def _latest_audit_triggers(workspace) -> dict[int, str]:
    """The latest audit of each compaction in the workspace: audit id → compaction trigger."""
    audits = (
        SurvivalAudit.objects.filter(workspace=workspace)
        .order_by("compaction_id", "-ran_at", "-id")
        .values_list("id", "compaction_id", "compaction__trigger")
    )
    latest: dict[int, tuple[int, str]] = {}
    for audit_id, compaction_id, trigger in audits:
        latest.setdefault(compaction_id, (audit_id, trigger))
    return {audit_id: trigger for audit_id, trigger in latest.values()}


@dataclass
class _Tally:
    kept: Counter = field(default_factory=Counter)  # by trigger
    items: Counter = field(default_factory=Counter)  # by trigger
    lost: Counter = field(default_factory=Counter)  # by (spec, folded key)
    audited: Counter = field(default_factory=Counter)  # by (spec, folded key)
    reasons: dict = field(default_factory=lambda: defaultdict(Counter))
    keys: dict = field(default_factory=dict)  # folded key → key as written
    corrected: int = 0


def _tally(trigger_of: dict[int, str]) -> _Tally:
    tally = _Tally()
    rows = SurvivalVerdict.objects.filter(audit_id__in=list(trigger_of)).values_list(
        "audit_id", "audit__spec_version__spec_id", "key", "kept", "corrected_kept", "reason"
    )
    for audit_id, spec_id, key, kept, corrected_kept, reason in rows:
        final = kept if corrected_kept is None else corrected_kept
        tally.corrected += corrected_kept is not None
        tally.kept[trigger_of[audit_id]] += final
        tally.items[trigger_of[audit_id]] += 1
        item = (spec_id, key.casefold())
        tally.keys.setdefault(key.casefold(), key)
        tally.audited[item] += 1
        if not final:
            tally.lost[item] += 1
            tally.reasons[item][reason if corrected_kept is None else "corrected by a person"] += 1
    return tally


def survival_by_trigger(*, workspace, limit: int = 20) -> SurvivalSummary:
    """The share of settled items kept per trigger (latest audit of each compaction) and the
    items lost most often."""
    trigger_of = _latest_audit_triggers(workspace)
    compactions = Counter(trigger_of.values())
    tally = _tally(trigger_of)
    order = [t.value for t in CompactionTrigger]
    by_trigger = [
        TriggerShare(
            trigger, compactions[trigger], wilson(tally.kept[trigger], tally.items[trigger])
        )
        for trigger in sorted(
            compactions, key=lambda t: order.index(t) if t in order else len(order)
        )
    ]
    overall = TriggerShare(
        "all", len(trigger_of), wilson(sum(tally.kept.values()), sum(tally.items.values()))
    )
    specs = Spec.objects.in_bulk({spec_id for spec_id, _ in tally.lost})
    ranked = sorted(tally.lost.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1]))[:limit]
    lost_most = [
        LostItem(
            specs[spec_id],
            tally.keys.get(key, key),
            n,
            tally.audited[(spec_id, key)],
            tally.reasons[(spec_id, key)].most_common(3),
        )
        for (spec_id, key), n in ranked
    ]
    return SurvivalSummary(by_trigger, overall, lost_most, len(trigger_of), tally.corrected)


def authoritative_version_of(*, spec: Spec) -> SpecVersion | None:
    return SpecVersion.objects.filter(spec=spec, status=VersionStatus.AUTHORITATIVE).first()


def session_survival_context(*, session: Session, membership: Membership) -> dict:
    """What the session page's survival section needs."""
    from governance.models import Role

    spec = spec_for_session(session=session)
    rows = session_survival(session=session, membership=membership)
    return {
        "survival_spec": spec,
        "survival_rows": rows,
        "survival_summaries": session.compactions.exclude(compact_summary="").count(),
        "survival_can_correct": membership.has_role(Role.EDITOR),
        "survival_threshold": rows[0].audit.threshold if rows else None,
    }


def attach_survival(compactions, *, session: Session, membership: Membership) -> None:
    """Set `.survival` (a `CompactionSurvival` or None) on each compaction, for the viewer."""
    compactions = list(compactions)
    if not compactions:
        return
    found = compaction_survival_map(session=session, membership=membership)
    for compaction in compactions:
        compaction.survival = found.get(compaction.pk)
