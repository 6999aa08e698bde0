"""Strata of the audit on ingested runs: each step in the band of its own window, forked starts
left out by default. Checked against a reference that reads every run's calls one by one."""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict

import pytest

from tests.annotations.conftest import ingest_synthetic
from tests.audit.test_analysis import LABELS, ref_band_index, ref_bounds
from traces.audit import selectors, services
from traces.audit.models import Audit, AuditPacket, AuditStep
from traces.models import Agent, AgentKind, Call, Run, StartKind
from traces.synthetic import CorpusParams

pytestmark = pytest.mark.django_db


def reference_strata(workspace, *, exclude_forks: bool):
    """(steps, steps drawable at ≤ 3 a run, runs) per stratum, reading each run's calls."""
    steps, drawable, runs = Counter(), Counter(), defaultdict(set)
    for run in Run.objects.filter(workspace=workspace).select_related("agent"):
        if run.agent.kind == AgentKind.COMPACTION:
            continue
        if exclude_forks and run.agent.start_kind == StartKind.FORK:
            continue
        contexts = Call.objects.filter(
            agent_id=run.agent_id,
            session_index__gte=run.first_call_index,
            session_index__lte=run.last_call_index,
        ).values_list("context_tokens", flat=True)
        for index, n in Counter(ref_band_index(c) for c in contexts).items():
            key = f"{run.task_type}|{LABELS[index]}"
            steps[key] += n
            drawable[key] += min(3, n)
            runs[key].add(run.pk)
    return steps, drawable, runs


@pytest.fixture
def forked(workspace):
    """Sessions whose subagents (sidechains) are often forked from a loaded parent; main
    threads that compact, so runs start after a summary and climb across bands."""
    params = CorpusParams(
        sessions=3, steps_per_session=(50, 80), subagents_per_session=(3, 4),
        subagent_steps=(4, 30), fork_share=0.6, threshold=140_000, seed=33,
    )  # fmt: skip
    ingest_synthetic(workspace, params, name="forks")
    forks = set(
        Run.objects.filter(workspace=workspace, agent__start_kind=StartKind.FORK).values_list(
            "pk", flat=True
        )
    )
    assert forks, "the corpus must hold forked agents"
    assert Agent.objects.filter(workspace=workspace, start_kind=StartKind.FRESH).exists()
    return forks


def sampled_runs(audit: Audit) -> set[int]:
    return set(AuditPacket.objects.filter(audit=audit).values_list("run_id", flat=True))


def create(workspace, actor, run_on_commit, sizes, **kwargs) -> Audit:
    with run_on_commit():
        audit = services.audit_create(
            workspace=workspace, actor=actor, name="strata", strata_sizes=sizes, seed=5, **kwargs
        )
    audit.refresh_from_db()
    return audit


@pytest.mark.parametrize("exclude", [True, False])
def test_strata_table_matches_the_reference(workspace, forked, exclude, api_for):
    steps, drawable, runs = reference_strata(workspace, exclude_forks=exclude)
    table = selectors.strata_table(workspace=workspace, exclude_forks=exclude)
    assert table["counts"] == dict(drawable)
    assert table["steps"] == dict(steps)
    assert table["runs"] == {k: len(v) for k, v in runs.items()}
    # A climbing run offers steps to more than one band.
    by_run = defaultdict(set)
    for key, members in runs.items():
        for run_id in members:
            by_run[run_id].add(key)
    assert any(len(keys) > 1 for keys in by_run.values())
    body = (
        api_for("viewer").get(f"/api/v1/audits/strata/?exclude_forks={str(exclude).lower()}").json()
    )
    assert body["counts"] == dict(drawable) and body["exclude_forks"] is exclude


def test_forks_are_never_sampled_by_default_and_sampled_when_included(
    workspace, members, forked, run_on_commit
):
    _, drawable, runs = reference_strata(workspace, exclude_forks=True)
    everything = {k: min(v, services.MAX_PER_STRATUM) for k, v in drawable.items()}
    audit = create(workspace, members["reviewer"], run_on_commit, everything)
    assert audit.exclude_forks is True
    assert not sampled_runs(audit) & forked
    # Asking every stratum for all it can give draws every run with a step in it.
    assert sampled_runs(audit) == set().union(*runs.values())

    _, drawable_all, runs_all = reference_strata(workspace, exclude_forks=False)
    everything = {k: min(v, services.MAX_PER_STRATUM) for k, v in drawable_all.items()}
    included = create(
        workspace, members["reviewer"], run_on_commit, everything, exclude_forks=False
    )
    assert included.exclude_forks is False
    assert sampled_runs(included) & forked
    assert sampled_runs(included) == set().union(*runs_all.values())


@pytest.mark.parametrize("exclude", [True, False])
def test_every_sampled_step_lies_in_its_strata_band(
    workspace, members, forked, run_on_commit, exclude
):
    _, drawable, _ = reference_strata(workspace, exclude_forks=exclude)
    sizes = {key: [1, 2, 4, 7][i % 4] for i, key in enumerate(sorted(drawable))}
    audit = create(workspace, members["reviewer"], run_on_commit, sizes, exclude_forks=exclude)
    drawn, per_run_band = Counter(), Counter()
    steps = AuditStep.objects.filter(packet__audit=audit).select_related("packet__run")
    for step in steps:
        run = step.packet.run
        call = Call.objects.get(agent_id=run.agent_id, session_index=step.call_index)
        assert run.first_call_index <= step.call_index <= run.last_call_index
        low, high = ref_bounds(step.band)
        assert low <= call.context_tokens < high
        assert step.window_tokens == call.context_tokens
        drawn[f"{run.task_type}|{step.band}"] += 1
        per_run_band[(run.pk, step.band)] += 1
        if exclude:
            assert run.pk not in forked
    assert dict(drawn) == {k: min(size, drawable[k]) for k, size in sizes.items()}
    assert max(per_run_band.values()) <= 3
    assert audit.step_count == sum(drawn.values())


def test_api_create_takes_the_fork_filter(workspace, forked, api_for, run_on_commit):
    _, drawable, _ = reference_strata(workspace, exclude_forks=False)
    sizes = {k: min(v, services.MAX_PER_STRATUM) for k, v in drawable.items()}
    with run_on_commit():
        response = api_for("reviewer").post(
            "/api/v1/audits/",
            {"name": "forks in", "strata_sizes": sizes, "seed": 2, "exclude_forks": False},
            format="json",
        )
    assert response.status_code == 201 and response.json()["exclude_forks"] is False
    assert sampled_runs(Audit.objects.get(pk=response.json()["id"])) & forked
    with run_on_commit():
        default = api_for("reviewer").post(
            "/api/v1/audits/", {"name": "default", "strata_sizes": sizes, "seed": 2},
            format="json",
        )  # fmt: skip
    assert default.status_code == 201 and default.json()["exclude_forks"] is True
    assert not sampled_runs(Audit.objects.get(pk=default.json()["id"])) & forked
    bad = api_for("viewer").get("/api/v1/audits/strata/?exclude_forks=maybe")
    assert bad.status_code == 400 and "exclude_forks" in bad.json()["detail"]


def test_create_page_shows_the_fork_filter(workspace, forked, client_for, run_on_commit):
    client = client_for("reviewer")
    url = f"/w/{workspace.slug}/audits/new/"
    first = html.unescape(client.get(url).content.decode())
    assert "Exclude forked starts" in first
    (box,) = re.findall(r'<input type="checkbox" name="exclude_forks"[^>]*>', first)
    assert " checked" in box
    (hidden,) = re.findall(r'<input type="hidden" name="exclude_forks"[^>]*>', first)
    assert 'value="True"' in hidden
    assert "and so are forked starts" in first
    unticked = html.unescape(client.get(url + "?filtered=1").content.decode())
    assert "forked starts are included" in unticked
    (box,) = re.findall(r'<input type="checkbox" name="exclude_forks"[^>]*>', unticked)
    assert " checked" not in box
    (hidden,) = re.findall(r'<input type="hidden" name="exclude_forks"[^>]*>', unticked)
    assert 'value="False"' in hidden
    _, with_forks, _ = reference_strata(workspace, exclude_forks=False)
    key = max(with_forks, key=lambda k: with_forks[k])
    assert f'max="{with_forks[key]}" name="size:{key}"' in unticked
    with run_on_commit():
        posted = client.post(
            url, {"name": "page forks", f"size:{key}": "500", "exclude_forks": "False"}
        )
    assert posted.status_code == 302
    audit = Audit.objects.get(name="page forks")
    assert audit.exclude_forks is False
    assert audit.step_count == min(500, with_forks[key])
