"""Reads for instruction visibility (seed 000): the calls the analytics filters select,
their delivery point for one instruction and their visible thinking, matched in the
database (`instruction_visibility_matching`); the counting is
`traces.analysis.instruction_visibility`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from django.shortcuts import get_object_or_404

from governance.errors import InputError
from governance.models import Workspace
from qualification.contextfiles.models import Instruction
from qualification.contextfiles.selectors import instruction_get
from traces.analysis.instruction_visibility import (
    MAX_INSTRUCTION_CHARS,
    Matcher,
    visibility_from_arrays,
    without_list_marker,
)
from traces.analytics.instruction_visibility_matching import (
    FACT_COLUMNS,
    call_facts,
    delivered_orders,
    match_stale,
)
from traces.analytics.models import InstructionVisibilityRun
from traces.analytics.selectors import AnalyticsFilters, _runs_for_calls, selected_calls
from traces.models import Call, Run, Session

# Counted while a request waits up to this many calls reached; past it, in a job
# (`instruction_visibility_services.instruction_visibility_start`).
MAX_CALLS = 100_000
_COLUMN = {name: k for k, name in enumerate(FACT_COLUMNS)}


class Delivery:
    RECORDED = "recorded"
    SESSION_START = "session_start"
    REPOSITORY = "repository"

    CHOICES = {
        RECORDED: "where the recorded text first holds it",
        SESSION_START: "from each agent's first call",
        REPOSITORY: "from each agent's first call in sessions of the file's repository, "
        "elsewhere where the recorded text first holds it",
    }


@dataclass(frozen=True)
class Subject:
    """What is looked for: the text, where it comes from, and how its delivery is found."""

    text: str
    delivery: str
    ledger: Instruction | None = None

    @property
    def repository_name(self) -> str:
        if self.ledger is None:
            return ""
        return self.ledger.revision.context_file.repository.rstrip("/").rsplit("/", 1)[-1]


def ledger_instructions(*, workspace: Workspace):
    """The instructions of each context file's latest revision, for the form's choices."""
    latest = {}
    for instruction in (
        Instruction.objects.for_workspace(workspace)
        .select_related("revision__context_file")
        .order_by("revision__context_file_id", "-revision__number", "position")
    ):
        file_id = instruction.revision.context_file_id
        number = latest.setdefault(file_id, instruction.revision.number)
        if instruction.revision.number == number:
            yield instruction


def subject_for(
    *, workspace: Workspace, instruction: str = "", ledger_instruction=None, delivery: str = ""
) -> Subject:
    """Check the request's choice of instruction; errors name the field."""
    text = (instruction or "").strip()
    if bool(text) == bool(ledger_instruction):
        both = bool(text)
        raise _refused(
            "instruction",
            "Give either `instruction` (free text) or `ledger_instruction` (an instruction id "
            "from the context-file ledger), "
            + ("not both." if both else "one of them: neither was given."),
        )
    if delivery and delivery not in Delivery.CHOICES:
        raise _refused("delivery", f"`delivery` must be one of {', '.join(Delivery.CHOICES)}.")
    if ledger_instruction:
        try:
            pk = int(ledger_instruction)
        except (TypeError, ValueError):
            raise _refused(
                "ledger_instruction", "`ledger_instruction` must be an instruction id (a number)."
            ) from None
        row = instruction_get(workspace=workspace, pk=pk)
        quoted = without_list_marker(row.text)
        if not Matcher(quoted).usable:
            raise _refused("ledger_instruction", "This instruction has no letters or digits.")
        return Subject(quoted, delivery or Delivery.REPOSITORY, row)
    if "\x00" in text:
        raise _refused("instruction", "`instruction` must not contain NUL characters.")
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise _refused(
            "instruction", f"`instruction` is at most {MAX_INSTRUCTION_CHARS:,} characters."
        )
    if delivery == Delivery.REPOSITORY:
        raise _refused("delivery", "`delivery` = repository needs a `ledger_instruction`.")
    if not Matcher(text).usable:
        raise _refused("instruction", "`instruction` has no letters or digits to match.")
    return Subject(text, delivery or Delivery.RECORDED)


def _refused(field: str, message: str) -> InputError:
    return InputError(message, payload={"field": field})


class TooManyCalls(InputError):
    """More calls than are counted while a request waits: count them in a job instead."""

    def __init__(self, calls: int, limit: int):
        self.calls = calls
        self.limit = limit
        super().__init__(
            f"The filters reach {calls:,} calls; at most {limit:,} are counted while you "
            "wait. Count them in the background (POST "
            "/api/v1/analytics/instruction-visibility/runs/, or the page's button), or narrow "
            "the dates, harness or project.",
            payload={"field": "filters"},
        )


def _subquery(queryset) -> tuple[str, list]:
    sql, params = queryset.query.sql_with_params()
    return sql, list(params)


def _task_type_mask(workspace: Workspace, facts: np.ndarray, task_type: str) -> np.ndarray:
    """Of the selected calls, those in runs of this task type."""
    selected = facts[:, _COLUMN["selected"]] > 0
    agent = facts[:, _COLUMN["agent"]]
    runs = pd.DataFrame(
        list(
            Run.objects.filter(
                workspace=workspace, agent_id__in=np.unique(agent[selected]).tolist()
            ).values_list("id", "agent_id", "first_call_index", "last_call_index", "task_type")
        ),
        columns=["id", "agent", "first", "last", "task_type"],
    )
    mask = np.zeros(len(facts), bool)
    if selected.any():
        _, task_types = _runs_for_calls(
            agent[selected], facts[selected, _COLUMN["session_index"]], runs
        )
        mask[selected] = task_types == task_type
    return mask


def _calls(
    workspace: Workspace,
    filters: AnalyticsFilters,
    matcher: Matcher,
    max_calls: int | None,
    *,
    deliveries: bool,
) -> np.ndarray:
    """Every call of the agents the filters reach (FACT_COLUMNS, sorted by session, agent
    and order), with `selected` marking the calls the filters select (the rest only carry
    delivery), and each call's matches on its stored extract."""
    chosen = selected_calls(workspace, filters)
    if max_calls is not None and not filters.task_type:
        reached = Call.objects.filter(
            workspace=workspace, agent_id__in=chosen.values("agent_id")
        ).count()
        if reached > max_calls:
            raise TooManyCalls(reached, max_calls)
    # Filters that narrow nothing: every call of the workspace, read without subqueries.
    every = str(chosen.query) == str(Call.objects.filter(workspace=workspace).order_by().query)
    facts = call_facts(
        workspace.pk,
        None if every else _subquery(chosen.values("id")),
        None if every else _subquery(chosen.values("agent_id")),
        matcher,
        deliveries=deliveries,
    )
    if filters.task_type and len(facts):
        keep = _task_type_mask(workspace, facts, filters.task_type)
        facts[:, _COLUMN["selected"]] = keep
        facts = facts[np.isin(facts[:, _COLUMN["agent"]], facts[keep, _COLUMN["agent"]])]
        if max_calls is not None and len(facts) > max_calls:
            raise TooManyCalls(len(facts), max_calls)
    order = np.lexsort(
        (facts[:, _COLUMN["order"]], facts[:, _COLUMN["agent"]], facts[:, _COLUMN["session"]])
    )
    return facts[order]


def _repository_sessions(workspace: Workspace, session_ids, name: str) -> set[int]:
    """Sessions whose project (working directory) ends in the repository's name."""
    if not name:
        return set()
    wanted = name.casefold()
    return {
        pk
        for pk, project in Session.objects.filter(workspace=workspace, id__in=session_ids)
        .values_list("id", "project")
        .iterator()
        if project.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1].casefold() == wanted
    }


def instruction_visibility_for(
    *,
    workspace: Workspace,
    filters: AnalyticsFilters,
    subject: Subject,
    max_calls: int | None = MAX_CALLS,
    store: bool = False,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> dict:
    """The counts for this instruction over the calls the filters select, with each
    counted session's label and the delivery rule used. Past `max_calls` calls reached
    (None: no limit) it raises TooManyCalls.

    Calls whose text has no extract yet (or a stale one) are extracted and matched in
    memory; only with `store` (the counting job) are those extracts written: a request
    writes nothing. `progress(stage, done, total)` is told of the calls read: those with a
    stored extract at once, the others as their texts are extracted."""
    matcher = Matcher(subject.text)
    facts = _calls(
        workspace,
        filters,
        matcher,
        max_calls,
        deliveries=subject.delivery != Delivery.SESSION_START,
    )
    column = {name: facts[:, k] for k, name in enumerate(FACT_COLUMNS)}
    _match_stale(facts, matcher, store=store, progress=progress)
    loaded = (
        _repository_sessions(
            workspace, np.unique(column["session"]).tolist(), subject.repository_name
        )
        if subject.delivery == Delivery.REPOSITORY
        else set()
    )
    from_start = (
        np.ones(len(facts), bool)
        if subject.delivery == Delivery.SESSION_START
        else np.isin(column["session"], list(loaded))
    )
    delivered = delivered_orders(
        column["agent"], column["order"], column["by_prompt"], column["by_results"], from_start
    )
    selected = column["selected"] > 0
    result = visibility_from_arrays(
        matcher,
        session=column["session"][selected],
        agent=column["agent"][selected],
        order=column["order"][selected],
        delivered_at=delivered[selected],
        blocks=column["blocks"][selected],
        exact=column["exact"][selected] > 0,
        normalised=column["normalised"][selected] > 0,
    )
    labels = {
        row[0]: row
        for row in Session.objects.filter(
            workspace=workspace, id__in=[r["session"] for r in result["by_session"]]
        ).values_list("id", "external_id", "title", "project", "harness")
    }
    for row in result["by_session"]:
        _, external_id, title, project, harness = labels[row["session"]]
        row.update(external_id=external_id, title=title, project=project, harness=harness)
    result["by_session"].sort(key=lambda r: (-r["n"], r["session"]))
    result.update(
        delivery=subject.delivery,
        delivery_rule=Delivery.CHOICES[subject.delivery],
        ledger_instruction=_ledger(subject.ledger),
        sessions_from_repository=len(loaded),
        calls_read=len(facts),
        calls_selected=int(selected.sum()),
        filters=filters.as_dict(),
        filters_text=filters.describe(),
    )
    return result


def _match_stale(facts: np.ndarray, matcher: Matcher, *, store: bool, progress) -> None:
    """Fill in, in `facts`, the matches of the calls whose extract is missing or stale,
    from their texts extracted now (written only with `store`)."""
    state = facts[:, _COLUMN["state"]]
    stale = facts[state == 1, 0].tolist()
    done = len(facts) - len(stale)  # read with their stored extracts

    def advance(k: int) -> None:
        nonlocal done
        done += k
        if progress:
            progress("extract", done, len(facts))

    if progress:
        progress("extract", done, len(facts))
    matched = match_stale(stale, matcher, store=store, advance=advance)
    columns = [_COLUMN[c] for c in ("blocks", "exact", "normalised", "by_prompt", "by_results")]
    facts[state == 2, columns[0] :] = 0
    if matched:
        at = np.flatnonzero(np.isin(facts[:, 0], list(matched)))
        values = np.array([matched[pk] for pk in facts[at, 0].tolist()], dtype=np.int64)
        facts[np.ix_(at, columns)] = values


def _ledger(row: Instruction | None) -> dict | None:
    if row is None:
        return None
    context_file = row.revision.context_file
    return {
        "id": row.pk,
        "context_file": str(context_file),
        "repository": context_file.repository,
        "path": context_file.path,
        "revision": row.revision.number,
        "section": row.section,
        "line_start": row.line_start,
    }


def instruction_visibility_run_get(*, workspace: Workspace, pk) -> InstructionVisibilityRun:
    """One run of this workspace (404 for another workspace's or a missing one)."""
    return get_object_or_404(
        InstructionVisibilityRun.objects.filter(workspace=workspace).select_related("job"),
        pk=pk,
    )
