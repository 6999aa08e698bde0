"""Reads: the price table's versions, and the dollar cost of sessions and sets of calls."""

from __future__ import annotations

from decimal import Decimal

from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.http import Http404

from governance.models import Workspace
from traces.models import AgentKind, Call, Session, StartKind, TelemetryEvent
from traces.pricing.analysis import cost as pure
from traces.pricing.models import ModelPrice, PriceTableVersion

# The Call field holding the harness's own cost (telemetry `cost_usd`, set by traces.services.call_costs).
# It overrides the price table for the calls that carry it.
TELEMETRY_COST_FIELD = "cost_usd"
API_REQUEST = "claude_code.api_request"


def price_table_versions(*, workspace: Workspace) -> QuerySet[PriceTableVersion]:
    return (
        PriceTableVersion.objects.filter(workspace=workspace)
        .select_related("created_by")
        .annotate(price_count=Count("prices"))
        .order_by("-number")
    )


def price_table_current(*, workspace: Workspace) -> PriceTableVersion | None:
    return PriceTableVersion.objects.filter(workspace=workspace).order_by("-number").first()


def price_table_version_get(*, workspace: Workspace, number: int) -> PriceTableVersion:
    version = PriceTableVersion.objects.filter(workspace=workspace, number=number).first()
    if version is None:
        raise Http404("No such price table version in this workspace.")
    return version


def model_prices(*, version: PriceTableVersion) -> QuerySet[ModelPrice]:
    return ModelPrice.objects.filter(version=version).order_by("model")


def model_price_get(*, workspace: Workspace, model: str) -> ModelPrice:
    """The current version's price of `model` (by its table name); 404 when there is none."""
    current = price_table_current(workspace=workspace)
    price = model_prices(version=current).filter(model=model).first() if current else None
    if price is None:
        raise Http404("No such model in the current price table.")
    return price


def pure_table(version: PriceTableVersion | None) -> pure.PriceTable | None:
    if version is None:
        return None
    return pure.PriceTable(
        version=version.number,
        saved=version.created_at.date().isoformat() if version.created_at else "",
        prices=tuple(
            pure.ModelPrice(
                model=p.model,
                aliases=tuple(p.aliases),
                rates=pure.Rates(
                    p.input_rate,
                    p.output_rate,
                    p.cache_read_rate,
                    p.cache_write_5m_rate,
                    p.cache_write_1h_rate,
                ),
            )
            for p in model_prices(version=version)
        ),
    )


def current_table(*, workspace: Workspace) -> pure.PriceTable | None:
    return pure_table(price_table_current(workspace=workspace))


def _telemetry_field() -> str | None:
    names = {f.name for f in Call._meta.get_fields()}
    return TELEMETRY_COST_FIELD if TELEMETRY_COST_FIELD in names else None


def usage_of(call: Call) -> pure.Usage:
    """A call's token classes: its cache writes split into 1-hour writes (as the transcript
    reported them) and the rest, at the 5-minute rate."""
    hour = min(call.cache_creation_1h_tokens, call.cache_creation_tokens)
    return pure.Usage(
        input=call.input_tokens,
        output=call.output_tokens,
        cache_read=call.cache_read_tokens,
        cache_write_5m=call.cache_creation_tokens - hour,
        cache_write_1h=hour,
    )


def _usage(row: dict) -> pure.Usage:
    """Usage from a row of token sums; `cache_write` holds all writes, `cache_write_1h`
    (absent in results cached before the split) the 1-hour part of them."""
    hour = min(row.get("cache_write_1h") or 0, row["cache_write"] or 0)
    return pure.Usage(
        input=row["input"] or 0,
        output=row["output"] or 0,
        cache_read=row["cache_read"] or 0,
        cache_write_5m=(row["cache_write"] or 0) - hour,
        cache_write_1h=hour,
    )


def call_cost(*, call: Call, table: pure.PriceTable | None) -> pure.Cost:
    field = _telemetry_field()
    telemetry = getattr(call, field) if field else None
    return pure.call_cost(
        model=call.model, usage=usage_of(call), table=table, telemetry_usd=telemetry
    )


def _usage_groups(calls: QuerySet[Call], by: tuple[str, ...] = ()) -> dict:
    """Token sums per (…by, model, carries telemetry): {by values: [UsageGroup]}."""
    field = _telemetry_field()
    keys = [*by, "model"]
    sums = {
        "n": Count("pk"),
        "input": Sum("input_tokens"),
        "output": Sum("output_tokens"),
        "cache_read": Sum("cache_read_tokens"),
        "cache_write": Sum("cache_creation_tokens"),
        "cache_write_1h": Sum("cache_creation_1h_tokens"),
    }
    if field:
        calls = calls.annotate(
            has_telemetry=ExpressionWrapper(
                Q(**{f"{field}__isnull": False}), output_field=BooleanField()
            )
        )
        keys.append("has_telemetry")
        sums["telemetry"] = Sum(field)
    groups: dict[tuple, list[pure.UsageGroup]] = {}
    for row in calls.order_by().values(*keys).annotate(**sums):
        usage = _usage(row)
        telemetry = None
        if row.get("has_telemetry"):
            telemetry = Decimal(row["telemetry"] or 0)
        group = pure.UsageGroup(row["model"], row["n"], usage, telemetry)
        groups.setdefault(tuple(row[k] for k in by), []).append(group)
    return groups


def calls_cost(*, workspace: Workspace, calls: QuerySet[Call]) -> pure.CostSummary:
    """The cost of a set of the workspace's calls, by model, at the current price table."""
    table = current_table(workspace=workspace)
    groups = _usage_groups(calls.filter(workspace=workspace)).get((), [])
    return pure.summarise(groups, table)


def _telemetry_only_groups(session_ids: list[int]) -> dict[int, list[pure.UsageGroup]]:
    """Per session, the api_request events with a cost that match no stored call (the
    request is known from telemetry only), by model: {session id: [UsageGroup]}."""
    rows = (
        TelemetryEvent.objects.filter(
            session_id__in=session_ids, name=API_REQUEST, call__isnull=True,
            cost_usd__isnull=False,
        )
        .order_by()
        .values("session_id", "model")
        .annotate(
            n=Count("pk"), usd=Sum("cost_usd"), input=Sum("input_tokens"),
            output=Sum("output_tokens"), cache_read=Sum("cache_read_tokens"),
            cache_write=Sum("cache_creation_tokens"),
        )
    )  # fmt: skip
    groups: dict[int, list[pure.UsageGroup]] = {}
    for row in rows:
        group = pure.UsageGroup(row["model"], row["n"], _usage(row), Decimal(row["usd"]))
        groups.setdefault(row["session_id"], []).append(group)
    return groups


def session_cost(*, session: Session) -> pure.CostSummary:
    """The session's calls, and its requests known only from telemetry, priced."""
    table = current_table(workspace=session.workspace)
    groups = _usage_groups(Call.objects.filter(session=session)).get((), [])
    extra = _telemetry_only_groups([session.pk]).get(session.pk, [])
    return pure.summarise(groups + extra, table)


def sessions_costs(*, workspace: Workspace, sessions) -> dict[int, pure.CostSummary]:
    """Each listed session's cost, in one query: {session id: summary}."""
    ids = [s.pk for s in sessions]
    if not ids:
        return {}
    table = current_table(workspace=workspace)
    calls = Call.objects.filter(workspace=workspace, session_id__in=ids)
    groups = _usage_groups(calls, by=("session_id",))
    extra = _telemetry_only_groups(ids)
    return {pk: pure.summarise(groups.get((pk,), []) + extra.get(pk, []), table) for pk in ids}


def usage_rows(*, calls: QuerySet[Call]) -> list[dict]:
    """Token sums per model (and per carrying a telemetry cost) as plain JSON, for a cached
    analytics result: the price is applied when the result is shown, so a new price table
    version needs no recomputation."""
    rows = []
    for group in _usage_groups(calls).get((), []):
        rows.append(
            {
                "model": group.model,
                "calls": group.calls,
                "input": group.usage.input,
                "output": group.usage.output,
                "cache_read": group.usage.cache_read,
                "cache_write": group.usage.cache_write_5m + group.usage.cache_write_1h,
                "cache_write_1h": group.usage.cache_write_1h,
                "telemetry_usd": None if group.telemetry_usd is None else str(group.telemetry_usd),
            }
        )
    return rows


def usage_rows_cost(*, workspace: Workspace, rows: list[dict]) -> pure.CostSummary:
    """Price `usage_rows` output at the workspace's current price table."""
    groups = [
        pure.UsageGroup(
            row["model"],
            row["calls"],
            _usage(row),
            None if row.get("telemetry_usd") is None else Decimal(row["telemetry_usd"]),
        )
        for row in rows
    ]
    return pure.summarise(groups, current_table(workspace=workspace))


def step_cost(summary: pure.CostSummary | None, model: dict) -> dict:
    """The what-if model's tokens per productive step at the workspace's blended rate."""
    return {
        "what_if_cost": summary,
        "step_usd": pure.dollars_for_tokens(model["optimum_cost_per_step"], summary),
    }


def session_and_agents_costs(
    *, session: Session
) -> tuple[pure.CostSummary, dict[int, pure.CostSummary]]:
    """The session's cost and each agent's ({agent id: summary}), from one query."""
    table = current_table(workspace=session.workspace)
    groups = _usage_groups(Call.objects.filter(session=session), by=("agent_id",))
    agents = {key[0]: pure.summarise(rows, table) for key, rows in groups.items()}
    extra = _telemetry_only_groups([session.pk]).get(session.pk, [])
    total = pure.summarise([g for rows in groups.values() for g in rows] + extra, table)
    return total, agents


def agents_costs(*, session: Session) -> dict[int, pure.CostSummary]:
    return session_and_agents_costs(session=session)[1]


AGENT_KEYS = ("agent__kind", "agent__agent_type", "agent__start_kind")


def usage_rows_by_agent_type(*, calls: QuerySet[Call]) -> dict:
    """Token sums per agent kind, agent type (the subagent's name) and start kind (fresh or
    fork), and per model, as plain JSON for a cached analytics result; with the number of
    agents of each kind, type and start."""
    rows = []
    for key, groups in _usage_groups(calls, by=AGENT_KEYS).items():
        kind, agent_type, start_kind = key
        for group in groups:
            rows.append(
                {
                    "kind": kind, "agent_type": agent_type, "start_kind": start_kind,
                    "model": group.model, "calls": group.calls, "input": group.usage.input,
                    "output": group.usage.output, "cache_read": group.usage.cache_read,
                    "cache_write": group.usage.cache_write_5m + group.usage.cache_write_1h,
                    "cache_write_1h": group.usage.cache_write_1h,
                    "telemetry_usd": None if group.telemetry_usd is None else str(group.telemetry_usd),
                }
            )  # fmt: skip
    agents = [
        {"kind": r["agent__kind"], "agent_type": r["agent__agent_type"],
         "start_kind": r["agent__start_kind"], "agents": r["n"]}
        for r in calls.order_by().values(*AGENT_KEYS).annotate(n=Count("agent_id", distinct=True))
    ]  # fmt: skip
    return {"rows": rows, "agents": agents}


def agent_type_costs(*, workspace: Workspace, usage: dict) -> list[dict]:
    """`usage_rows_by_agent_type` priced at the current table: one row per kind, type and
    start kind, costliest first (unpriced last), each with its agents, calls and summary."""
    keyed: dict[tuple, list[dict]] = {}
    for row in usage["rows"]:
        keyed.setdefault((row["kind"], row["agent_type"], row["start_kind"]), []).append(row)
    agents = {(a["kind"], a["agent_type"], a["start_kind"]): a["agents"] for a in usage["agents"]}
    result = []
    for (kind, agent_type, start_kind), rows in keyed.items():
        summary = usage_rows_cost(workspace=workspace, rows=rows)
        label = "main" if kind == "main" else (agent_type or f"{kind} (no type)")
        count = agents.get((kind, agent_type, start_kind), 0)
        per_agent = summary.usd / count if summary.complete and count else None
        result.append(
            {
                "label": label, "kind": kind, "agent_type": agent_type,
                "start_kind": start_kind, "agents": count, "cost": summary,
                "per_agent_usd": per_agent,
            }
        )  # fmt: skip
    return sorted(result, key=lambda r: (not r["cost"].priced_calls, -r["cost"].usd, r["label"]))


# --- subagent cost by query source and agent name --------------------------------------------

SUBAGENT_KEYS = (
    "query_source",
    "agent_name",
    "agent__kind",
    "agent__agent_type",
    "agent__start_kind",
)


def _event_value(column: str) -> Subquery:
    """The column of the call's own api_request event (the first, by id), or NULL."""
    events = TelemetryEvent.objects.filter(call_id=OuterRef("pk"), name=API_REQUEST)
    return Subquery(events.order_by("id").values(column)[:1])


def _agent_label(agent_name: str, kind: str, agent_type: str) -> str:
    """Telemetry's agent name, else the transcript's subagent type ("main" for the main)."""
    if agent_name:
        return agent_name
    return "main" if kind == AgentKind.MAIN else agent_type or f"{kind} (no type)"


def _cost_row(query_source, name, kind, start_kind, agents, summary) -> dict:
    complete = agents and summary.complete
    return {
        "query_source": query_source, "agent_name": name, "kind": kind,
        "start_kind": start_kind, "agents": agents, "cost": summary,
        "label": f"{query_source or '–'} · {name}",
        "per_agent_usd": summary.usd / agents if complete else None,
    }  # fmt: skip


def _calls_by_agent(workspace: Workspace) -> tuple[dict, dict]:
    """Usage groups and agent ids of the workspace's calls, both keyed by (query source,
    agent label, kind, start kind)."""
    calls = Call.objects.filter(workspace=workspace).annotate(
        query_source=Coalesce(_event_value("query_source"), Value("")),
        agent_name=Coalesce(_event_value("agent_name"), Value("")),
    )
    keyed: dict[tuple, list[pure.UsageGroup]] = {}
    for key, groups in _usage_groups(calls, by=SUBAGENT_KEYS).items():
        query_source, agent_name, kind, agent_type, start_kind = key
        label = _agent_label(agent_name, kind, agent_type)
        keyed.setdefault((query_source, label, kind, start_kind), []).extend(groups)
    agents: dict[tuple, set] = {}
    for row in calls.order_by().values(*SUBAGENT_KEYS, "agent_id").distinct():
        label = _agent_label(row["agent_name"], row["agent__kind"], row["agent__agent_type"])
        key = (row["query_source"], label, row["agent__kind"], row["agent__start_kind"])
        agents.setdefault(key, set()).add(row["agent_id"])
    return keyed, agents


def _telemetry_only_by_agent(workspace: Workspace) -> dict[tuple, list[pure.UsageGroup]]:
    """The api_request events with a cost and no call, by (query source, agent name)."""
    alone = (
        TelemetryEvent.objects.filter(
            workspace=workspace, name=API_REQUEST, call__isnull=True, cost_usd__isnull=False
        )
        .order_by()
        .values("query_source", "agent_name", "model")
        .annotate(
            n=Count("pk"), usd=Sum("cost_usd"), input=Sum("input_tokens"),
            output=Sum("output_tokens"), cache_read=Sum("cache_read_tokens"),
            cache_write=Sum("cache_creation_tokens"),
        )
    )  # fmt: skip
    groups: dict[tuple, list[pure.UsageGroup]] = {}
    for row in alone:
        group = pure.UsageGroup(row["model"], row["n"], _usage(row), Decimal(row["usd"]))
        groups.setdefault((row["query_source"], row["agent_name"]), []).append(group)
    return groups


def subagent_costs(*, workspace: Workspace) -> dict:
    """The workspace's cost by telemetry `query_source` and agent name, split by how each
    agent started (fresh or fork), costliest first. A call takes the query source and agent
    name of its api_request event; without one, its query source is empty and its agent
    name is the transcript's subagent type ("main" for the main thread). Telemetry
    requests that match no stored call (a session known only from telemetry) are rows of
    their own, at their `cost_usd`. Returns {"rows", "total" (a CostSummary),
    "telemetry_only" (requests)}."""
    table = current_table(workspace=workspace)
    keyed, agents = _calls_by_agent(workspace)
    telemetry_only = _telemetry_only_by_agent(workspace)
    rows = [
        _cost_row(query_source, name, kind, start_kind,
                  len(agents.get((query_source, name, kind, start_kind), ())),
                  pure.summarise(groups, table))
        for (query_source, name, kind, start_kind), groups in keyed.items()
    ]  # fmt: skip
    rows += [
        _cost_row(query_source, agent_name or "(no agent name)", "telemetry only",
                  StartKind.UNKNOWN, None, pure.summarise(groups, table))
        for (query_source, agent_name), groups in telemetry_only.items()
    ]  # fmt: skip
    rows.sort(key=lambda r: (not r["cost"].priced_calls, -r["cost"].usd, r["label"]))
    every = [g for groups in keyed.values() for g in groups]
    alone = [g for groups in telemetry_only.values() for g in groups]
    return {
        "rows": rows,
        "total": pure.summarise(every + alone, table),
        "telemetry_only": sum(g.calls for g in alone),
    }
