"""Reads for traces, always scoped to a workspace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC

from django.db.models import QuerySet
from django.http import Http404

from governance.models import Workspace
from traces.models import Agent, Call, Compaction, IngestedFile, JobFile, RawUpload, Run, Session

TIMELINE_MAX_POINTS = 5000


def sessions_for(*, workspace: Workspace) -> QuerySet[Session]:
    return Session.objects.filter(workspace=workspace)


def workspace_models(*, workspace: Workspace) -> list[str]:
    """The models the workspace's calls used, sorted: the union of the models kept per
    session (`Session.model_names`), read over their distinct lists, never the calls."""
    lists = (
        Session.objects.filter(workspace=workspace)
        .order_by()
        .values_list("model_names", flat=True)
        .distinct()
    )
    return sorted({str(name) for names in lists for name in (names or []) if name})


def sessions_of_job(*, job_id: int) -> QuerySet[Session]:
    """Sessions that the files of an ingest job (read, or found already read) held calls of."""
    files = JobFile.objects.filter(job_id=job_id).values("file_id")
    links = IngestedFile.sessions.through.objects.filter(ingestedfile_id__in=files)
    return Session.objects.filter(pk__in=links.values("session_id"))


def session_uploads(*, session: Session, limit: int = 5) -> list[dict]:
    """The latest ingest jobs that read this session's files: {job_id, member, read}."""
    links = (
        JobFile.objects.filter(file__sessions=session)
        .order_by("-job_id", "file__member")
        .values("job_id", "file__member", "read")[:limit]
    )
    return [{"job_id": r["job_id"], "member": r["file__member"], "read": r["read"]} for r in links]


def job_files(*, job_id: int) -> QuerySet[JobFile]:
    """An ingest job's files, each with the sessions it held calls of."""
    return (
        JobFile.objects.filter(job_id=job_id)
        .select_related("file")
        .prefetch_related("file__sessions")
        .order_by("-read", "file__member", "pk")
    )


def session_get(*, workspace: Workspace, pk: int) -> Session:
    session = sessions_for(workspace=workspace).filter(pk=pk).first()
    if session is None:
        raise Http404("No such session in this workspace.")
    return session


def session_calls(*, session: Session) -> QuerySet[Call]:
    return Call.objects.filter(session=session).select_related("agent").order_by("session_index")


def session_compactions(*, session: Session) -> QuerySet[Compaction]:
    return (
        Compaction.objects.filter(session=session)
        .select_related("agent")
        .order_by("timestamp", "id")
    )


def session_runs(*, session: Session) -> QuerySet[Run]:
    return (
        Run.objects.filter(session=session)
        .select_related("agent")
        .order_by("agent__started_at", "agent_id", "index")
    )


def session_agents(*, session: Session) -> QuerySet[Agent]:
    return (
        Agent.objects.filter(session=session).select_related("parent").order_by("started_at", "id")
    )


def session_timeline(*, session: Session) -> dict:
    """Context per call for each agent as columns (not model instances), for the chart."""
    rows = (
        Call.objects.filter(session=session)
        .order_by("session_index")
        .values_list("session_index", "agent_id", "context_tokens", "timestamp")
    )
    series: dict[int, dict[str, list]] = {}
    for index, agent, context, timestamp in rows:
        column = series.setdefault(agent, {"index": [], "context": [], "time": []})
        column["index"].append(index)
        column["context"].append(context)
        column["time"].append(timestamp.isoformat())
    return series


def recent_uploads(*, workspace: Workspace, limit: int = 20) -> QuerySet[RawUpload]:
    return (
        RawUpload.objects.filter(workspace=workspace)
        .select_related("job")
        .order_by("-created_at")[:limit]
    )


def workspace_trace_totals(*, workspace: Workspace) -> dict:
    from django.db.models import Count, Max, Sum

    return Session.objects.filter(workspace=workspace).aggregate(
        sessions=Count("id"),
        calls=Sum("call_count"),
        compactions=Sum("compaction_count"),
        input=Sum("input_tokens"),
        cache_creation=Sum("cache_creation_tokens"),
        cache_read=Sum("cache_read_tokens"),
        output=Sum("output_tokens"),
        max_context=Max("max_context"),
        last_started=Max("started_at"),
    )


def telemetry_policy_peek(*, workspace):
    """The workspace's telemetry policy, or the defaults (unsaved) if it has none yet."""
    from traces.models import TelemetryPolicy

    return TelemetryPolicy.objects.filter(workspace=workspace).first() or TelemetryPolicy(
        workspace=workspace
    )


# --- hook policy and the answers to hooks ------------------------------------------------------


def hook_policy_peek(*, workspace):
    """The workspace's hook policy, or the defaults (unsaved) if it has none yet."""
    from traces.models import HookPolicy

    return HookPolicy.objects.filter(workspace=workspace).select_related(
        "spec"
    ).first() or HookPolicy(workspace=workspace)


SUGGESTION_WINDOW_SECONDS = 3600  # a SessionStart(compact) repeats a PreCompact this recent


def hook_restart_spec(*, workspace, policy, session: Session | None = None):
    """(spec, version): the policy's spec and its authoritative version, else the spec
    governing the session's project, else the workspace's only authoritative version;
    (None, None) when there is none."""
    from specs.selectors import authoritative_version, authoritative_versions
    from specs.selectors.survival import spec_for_session

    if policy.spec_id:
        return policy.spec, authoritative_version(spec=policy.spec)
    governing = spec_for_session(session=session) if session is not None else None
    if governing is not None:
        return governing, authoritative_version(spec=governing)
    versions = list(authoritative_versions(workspace=workspace)[:2])
    if len(versions) == 1:
        return versions[0].spec, versions[0]
    return None, None


def spec_key(spec, version) -> str:
    """How the hooks name the authoritative specification: its key, version and fingerprint."""
    return f"{spec.slug} v{version.number} (sha256:{version.fingerprint[:12]})"


def _session_model(*, workspace, event: dict, session: Session | None) -> str:
    """The model of the hook's session: what the client read in the transcript, the hook's own
    `model` key, an earlier SessionStart's, or the ingested session's last model."""
    from traces.models import HookEvent

    for value in (event.get("model"), event["payload"].get("model")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    external_id = str(event["payload"].get("session_id") or "")
    if external_id:
        earlier = (
            HookEvent.objects.filter(
                workspace=workspace, session_external_id=external_id, payload__has_key="model"
            )
            .order_by("-occurred_at", "-id")
            .values_list("payload", flat=True)
            .first()
        )
        if earlier and isinstance(earlier.get("model"), str) and earlier["model"].strip():
            return earlier["model"].strip()
    if session is not None and session.model_names:
        return str(session.model_names[-1])
    return ""


def _limit_values(active) -> tuple[int | None, dict]:
    """(the qualified ECL in tokens or None, the limit's figures for the texts)."""
    limit = active.limit
    family = active.weakest_family or {}
    return family.get("ecl_tokens"), {
        "limit": limit.max_context_tokens,
        "reserve": limit.reserve_tokens,
        "name": limit.name,
        "family": family.get("family") or "",
        "ecl_text": family.get("ecl_text") or "",
    }


def _restart_url(*, workspace, version, session, absolute) -> str:
    from urllib.parse import urlencode

    from django.urls import reverse

    params = {}
    if version is not None:
        params["spec_version"] = version.pk
    if session is not None:
        params["session"] = session.pk
    path = reverse("specs:package_create", args=[workspace.slug])
    return absolute(path + (f"?{urlencode(params)}" if params else ""))


@dataclass(frozen=True)
class _HookFacts:
    """What an answer says: the session's model, its limit and ECL, and where to restart."""

    model: str
    ecl: int | None
    figures: dict
    spec: object
    version: object
    restart: str

    def over_text(self, context: int) -> str:
        import numfmt

        where = (
            f"the authoritative specification {spec_key(self.spec, self.version)}"
            if self.version is not None
            else "a restart package (no authoritative specification is set for the hooks)"
        )
        return (
            f"Context Governance: the context holds {numfmt.tokens(context)} tokens, above the "
            f"qualified ECL of {numfmt.tokens(self.ecl)} for {self.model} (approved limit "
            f"{numfmt.tokens(self.figures['limit'])}). A summary made now is made by a model past "
            f"its qualified length: restart from {where} instead. Prefilled restart package: "
            f"{self.restart}"
        )


def hook_answer(*, workspace, event: dict, absolute=lambda path: path) -> dict:
    """What the harness should be told for one hook event, by the workspace's hook policy.

    `action` is `none` (say nothing), `suggest` (a message for the user), `block` (a
    PreCompact is refused, with the message as the reason) or `context` (SessionStart:
    `additional_context` for the agent, and a `message` for the user after a compaction the
    policy warned about). `reason` says why, also when the action is `none`. Harness formats
    are the client's business; `absolute` makes the restart link absolute."""
    name, payload = event["event"], event["payload"]
    answer = {
        "event_id": event["event_id"],
        "event": name,
        "action": "none",
        "message": "",
        "additional_context": "",
        "restart_url": "",
        "reason": "",
    }
    if name not in ("PreCompact", "SessionStart"):
        answer["reason"] = f"The policy has no answer for {name}."
        return answer
    policy = hook_policy_peek(workspace=workspace)
    source = str(payload.get("source") or "")
    refusal = _policy_refusal(name=name, policy=policy, source=source)
    if refusal:
        answer["reason"] = refusal
        return answer
    external_id = str(payload.get("session_id") or "")[:200]
    session = (
        Session.objects.filter(
            workspace=workspace,
            harness=event.get("harness") or "claude-code",
            external_id=external_id,
        )
        .only("pk", "workspace_id", "project", "model_names")
        .first()
        if external_id
        else None
    )
    facts = _hook_facts(
        workspace=workspace, event=event, session=session, policy=policy, absolute=absolute
    )
    if isinstance(facts, str):
        answer["reason"] = facts
        return answer
    if name == "PreCompact":
        trigger = str(payload.get("trigger") or "")
        answer.update(_pre_compact_answer(facts, event.get("context_tokens"), policy, trigger))
        return answer
    _session_start_answer(answer, facts, policy)
    if source == "compact" and policy.pre_compact_action != "off" and external_id and facts.ecl:
        _repeat_the_suggestion(answer, facts, workspace=workspace, external_id=external_id)
    if answer["action"] == "none":
        answer["reason"] = "The workspace's policy adds no context at SessionStart."
    return answer


def _policy_refusal(*, name: str, policy, source: str) -> str:
    """Why the policy says nothing for this event ('' when it may answer)."""
    if name == "PreCompact" and policy.pre_compact_action == "off":
        return "The workspace's policy for PreCompact is off."
    if (
        name == "SessionStart"
        and not policy.session_start_context
        and (source != "compact" or policy.pre_compact_action == "off")
    ):
        return "The workspace's policy adds no context at SessionStart."
    return ""


def _hook_facts(*, workspace, event: dict, session, policy, absolute) -> _HookFacts | str:
    """The facts an answer needs, or the reason there is no answer."""
    from qualification.selectors import active_limit_for_model_id

    model = _session_model(workspace=workspace, event=event, session=session)
    if not model:
        return "The session's model is not known yet."
    active = active_limit_for_model_id(workspace=workspace, model_id=model[:200])
    if active.limit is None:
        return f"No approved operating limit for {model}."
    ecl, figures = _limit_values(active)
    spec, version = hook_restart_spec(workspace=workspace, policy=policy, session=session)
    restart = _restart_url(workspace=workspace, version=version, session=session, absolute=absolute)
    return _HookFacts(model, ecl, figures, spec, version, restart)


def _pre_compact_answer(facts: _HookFacts, context: int | None, policy, trigger: str) -> dict:
    import numfmt

    if facts.ecl is None:
        return {
            "reason": f"The qualified ECL for {facts.model} is "
            f"{facts.figures['ecl_text'] or 'not finite'}: no compaction is above it."
        }
    if context is None:
        return {"reason": "The context size at this hook is not known."}
    if context <= facts.ecl:
        return {
            "reason": f"The context ({numfmt.tokens(context)}) is within the qualified ECL "
            f"({numfmt.tokens(facts.ecl)})."
        }
    blocking = policy.pre_compact_action == "block" and trigger != "manual"
    if blocking:
        reason = "The policy blocks automatic compactions above the qualified ECL."
    else:
        reason = "The policy suggests a restart above the qualified ECL" + (
            " (a manual /compact is never blocked)." if trigger == "manual" else "."
        )
    return {
        "action": "block" if blocking else "suggest",
        "message": facts.over_text(context),
        "restart_url": facts.restart,
        "reason": reason,
    }


def _session_start_answer(answer: dict, facts: _HookFacts, policy) -> None:
    """The operating limit (and the authoritative spec) as context, when the policy says so."""
    import numfmt

    if not policy.session_start_context:
        return
    figures = facts.figures
    reserve = (
        f", of which the last {numfmt.tokens(figures['reserve'])} are a reserve"
        if figures["reserve"]
        else ""
    )
    ecl_text = (
        numfmt.tokens(facts.ecl) if facts.ecl is not None else figures["ecl_text"] or "unbounded"
    )
    lines = [
        f"Context Governance: the approved operating limit for {facts.model} is "
        f"{numfmt.tokens(figures['limit'])} tokens of context{reserve} (limit "
        f"“{figures['name']}”; qualified effective context length {ecl_text}).",
    ]
    if facts.version is not None:
        lines.append(
            f"The authoritative specification is {spec_key(facts.spec, facts.version)}: "
            f"“{facts.spec.title}”. "
            "When the context nears the limit, prefer a restart from it to a compaction."
        )
    answer.update(action="context", additional_context="\n".join(lines))
    answer["reason"] = "The policy adds the operating limit at SessionStart."


def _repeat_the_suggestion(answer: dict, facts: _HookFacts, *, workspace, external_id) -> None:
    """After a compaction the policy warned about (Claude Code drops a PreCompact's message),
    say it again at the SessionStart that follows."""
    from datetime import timedelta

    from django.utils import timezone

    from traces.models import HookEvent

    previous = (
        HookEvent.objects.filter(
            workspace=workspace,
            session_external_id=external_id,
            event="PreCompact",
            received_at__gte=timezone.now() - timedelta(seconds=SUGGESTION_WINDOW_SECONDS),
        )
        .order_by("-occurred_at", "-id")
        .first()
    )
    if previous is None or (previous.context_tokens or 0) <= facts.ecl:
        return
    warning = facts.over_text(previous.context_tokens)
    answer.update(
        action="context",
        message=warning,
        additional_context="\n".join(filter(None, [answer["additional_context"], warning])),
        restart_url=facts.restart,
        reason=(answer["reason"] + " " if answer["reason"] else "")
        + "The compaction just made was above the qualified ECL.",
    )


# --- reconciliation: one call, many sources -----------------------------------------------

RECONCILED_EVENTS = ("claude_code.api_request", "codex.sse_event")
_COUNT_COLUMNS = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "output_tokens")


def session_reconciliation(*, session: Session, limit: int = 500):
    """Each call of the session with the counts of every source that saw it (the
    transcript's on the Call, a span's CallSource, a linked api_request event), and the
    events that name no stored call; compared by `traces.analysis.reconciliation`."""
    from traces.analysis.reconciliation import Reconciliation, reconcile
    from traces.models import CallSource, TelemetryEvent

    events = TelemetryEvent.objects.filter(session=session, name__in=RECONCILED_EVENTS).exclude(
        input_tokens=None, output_tokens=None
    )
    if not events.exists() and not CallSource.objects.filter(session=session).exists():
        # One source at most: nothing to compare, and no need to read every call.
        transcript = Call.objects.filter(session=session, source_line__isnull=False).count()
        return Reconciliation(
            calls=transcript, by_source={"transcript": transcript} if transcript else {}
        )
    calls = _transcript_sources(session)
    _add_span_sources(calls, session)
    orphans = _add_event_sources(calls, events)
    return reconcile([*calls.values(), *orphans], limit=limit)


def _transcript_sources(session: Session) -> dict:
    """{call id: CallSources} for every call of the session, with the transcript's counts."""
    from traces.analysis.reconciliation import CallSources, SourceCounts

    calls = {}
    columns = ("id", "key", "session_index", "timestamp", "model", "source_line", *_COUNT_COLUMNS)
    for row in Call.objects.filter(session=session).order_by("session_index").values(*columns):
        entry = calls[row["id"]] = CallSources(
            row["id"], row["key"], row["session_index"], row["timestamp"]
        )
        if row["source_line"] is not None:
            entry.sources["transcript"] = SourceCounts(
                "transcript", row["key"], row["timestamp"],
                {c: row[c] for c in _COUNT_COLUMNS}, row["model"],
            )  # fmt: skip
    return calls


def _add_span_sources(calls: dict, session: Session) -> None:
    from traces.analysis.reconciliation import SourceCounts
    from traces.models import CallSource

    for row in CallSource.objects.filter(session=session).values(
        "call_id", "key", "timestamp", "model", "cost_usd", *_COUNT_COLUMNS
    ):
        entry = calls.get(row["call_id"])
        if entry is not None and "span" not in entry.sources:
            entry.sources["span"] = SourceCounts(
                "span", row["key"], row["timestamp"], {c: row[c] for c in _COUNT_COLUMNS},
                row["model"], row["cost_usd"],
            )  # fmt: skip


def _add_event_sources(calls: dict, events) -> list:
    """Add each linked event's counts to its call; return the events that name no stored call."""
    from traces.analysis.reconciliation import CallSources, SourceCounts

    orphans = []
    events = events.order_by("timestamp", "id").values(
        "call_id", "key", "request_id", "timestamp", "model", "cost_usd", *_COUNT_COLUMNS
    )
    for row in events:
        counts = SourceCounts(
            "event", row["request_id"] or row["key"], row["timestamp"],
            {c: row[c] for c in _COUNT_COLUMNS}, row["model"], row["cost_usd"],
        )  # fmt: skip
        entry = calls.get(row["call_id"]) if row["call_id"] else None
        if entry is None:
            orphan = CallSources(None, counts.key, None, row["timestamp"])
            orphan.sources["event"] = counts
            orphans.append(orphan)
        elif "event" not in entry.sources:
            entry.sources["event"] = counts
    return orphans


def workspace_reconciliation_days(*, workspace: Workspace, days: int = 90) -> list[dict]:
    """Totals by day (UTC) and source over the last `days` days: calls, token counts, cost
    where the source gives it, and how many of the day's calls another source disagrees
    with (a span's or an event's count that differs from the call's)."""
    from datetime import timedelta

    from django.db.models import Count, F, Q, Sum
    from django.db.models.functions import TruncDate
    from django.utils import timezone

    from traces.models import CallSource, TelemetryEvent

    since = timezone.now() - timedelta(days=days)
    sums = {c: Sum(c) for c in _COUNT_COLUMNS}
    found: dict[tuple, dict] = {}

    def collect(source, queryset, time_field, with_cost):
        extra = {"cost_usd": Sum("cost_usd")} if with_cost else {}
        rows = (
            queryset.filter(**{f"{time_field}__gte": since})
            .annotate(day=TruncDate(time_field, tzinfo=UTC))
            .values("day")
            .annotate(calls=Count("id"), **sums, **extra)
        )
        for row in rows:
            found[(row["day"], source)] = {
                "day": row["day"], "source": source, "calls": row["calls"],
                **{c: row[c] or 0 for c in _COUNT_COLUMNS},
                "cost_usd": row.get("cost_usd"), "disagreeing_calls": 0,
            }  # fmt: skip

    collect("transcript", Call.objects.filter(workspace=workspace, source_line__isnull=False),
            "timestamp", False)  # fmt: skip
    collect("span", CallSource.objects.filter(workspace=workspace), "timestamp", True)
    events = TelemetryEvent.objects.filter(workspace=workspace, name__in=RECONCILED_EVENTS).exclude(
        input_tokens=None, output_tokens=None
    )
    collect("event", events, "timestamp", True)

    def differs():
        condition = Q()
        for c in _COUNT_COLUMNS:
            condition |= Q(**{f"{c}__isnull": False}) & ~Q(**{c: F(f"call__{c}")})
        return condition

    for source, queryset in (
        ("span", CallSource.objects.filter(workspace=workspace, call__source_line__isnull=False)),
        ("event", events.filter(call__isnull=False)),
    ):
        rows = (
            queryset.filter(differs(), call__timestamp__gte=since)
            .annotate(day=TruncDate("call__timestamp", tzinfo=UTC))
            .values("day")
            .annotate(n=Count("call_id", distinct=True))
        )
        for row in rows:
            if (row["day"], source) in found:
                found[(row["day"], source)]["disagreeing_calls"] = row["n"]
    order = {"transcript": 0, "span": 1, "event": 2}
    return sorted(found.values(), key=lambda r: (r["day"], order[r["source"]]), reverse=False)
