"""Pages: the viewer (windows, escaping, expand, subagent links, compactions), marking without
JavaScript, adjudication, queues, the divergences page, isolation and roles."""

import re

import pytest

from governance.models import AuditEvent
from tests.annotations.conftest import HOSTILE, call_in, ingest_synthetic, main_run
from traces.annotations import services
from traces.annotations.models import Divergence
from traces.models import Agent, AgentKind, Call, Run
from traces.synthetic import CorpusParams

pytestmark = pytest.mark.django_db


def viewer_url(workspace, session, run=None, agent=None):
    if run is not None:
        return f"/w/{workspace.slug}/annotations/sessions/{session.pk}/runs/{run.pk}/"
    return f"/w/{workspace.slug}/annotations/sessions/{session.pk}/agents/{agent.pk}/"


def step_ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'<li class="step[^"]*" id="step-(\d+)"', html)]


def test_long_run_is_paged_in_windows_of_fifty(workspace, client_for):
    params = CorpusParams(
        sessions=1, steps_per_session=(5200, 5200), threshold=10**9, growth_at_100k=40,
        subagents_per_session=(1, 1), subagent_steps=(5, 5), seed=5,
    )  # fmt: skip
    session = ingest_synthetic(workspace, params, name="long")[0]
    run = Run.objects.get(session=session, agent__kind=AgentKind.MAIN)
    assert run.call_count >= 5000
    client = client_for("viewer")
    url = viewer_url(workspace, session, run=run)
    page = client.get(url)
    html = page.content.decode()
    first = step_ids(html)
    calls = list(
        Call.objects.filter(agent=run.agent)
        .order_by("agent_index")
        .values_list("session_index", flat=True)
    )
    assert first == calls[:50]
    assert f"Steps 1–50 of {run.call_count:,}" in html
    # The strip carries every call (n stated), the list only one window.
    assert f"n = {run.call_count:,} calls" in html
    third = client.get(url + "?page=3", HTTP_HX_REQUEST="true")
    fragment = third.content.decode()
    assert "<html" not in fragment and step_ids(fragment) == calls[100:150]
    assert "Steps 101–150" in fragment
    target = calls[4321]
    jump = client.get(url + f"?at={target}").content.decode()
    assert target in step_ids(jump) and step_ids(jump) == calls[4300:4350]
    last = client.get(url + f"?page={-(-run.call_count // 50)}").content.decode()
    assert step_ids(last) == calls[(len(calls) - 1) // 50 * 50 :]
    beyond = client.get(url + "?page=100000").content.decode()
    assert step_ids(beyond) == step_ids(last)  # clamped to the last window
    missing = client.get(url + "?at=99999999").content.decode()
    assert "Call 99999999 is not among the steps shown here." in missing


def test_transcript_text_is_escaped_everywhere(workspace, client_for, hostile_session):
    client = client_for("viewer")
    agent = Agent.objects.get(session=hostile_session, kind=AgentKind.MAIN)
    html = client.get(viewer_url(workspace, hostile_session, agent=agent)).content.decode()
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html
    assert '<pre class="code" data-lang="bash"><code>echo &lt;script&gt;' in html
    assert "and &lt;b&gt;check&lt;/b&gt;." in html  # text stays text
    first = Call.objects.get(session=hostile_session, session_index=0)
    part = client.get(
        f"/w/{workspace.slug}/annotations/sessions/{hostile_session.pk}/calls/{first.session_index}/part/",
        {"key": "result:toolu_a"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert HOSTILE not in part and part.count("&lt;script&gt;") == 400
    run = main_run(hostile_session)
    services.divergence_mark(
        session=hostile_session, annotator=pytest.importorskip("django.contrib.auth").get_user_model().objects.get(username="reviewer-a"),
        call_index=first.session_index, failure_class="other", other_text=HOSTILE, note=HOSTILE,
        confidence="low",
    )  # fmt: skip
    for url in (
        viewer_url(workspace, hostile_session, run=run),
        f"/w/{workspace.slug}/annotations/divergences/",
    ):
        page = client.get(url).content.decode()
        assert HOSTILE not in page, url


def test_truncated_results_expand_with_htmx_or_a_plain_link(workspace, client_for, hostile_session):
    client = client_for("viewer")
    agent = Agent.objects.get(session=hostile_session, kind=AgentKind.MAIN)
    html = client.get(viewer_url(workspace, hostile_session, agent=agent)).content.decode()
    expand = re.search(r'<a href="([^"]+key=result%3Atoolu_a[^"]*)" hx-get="([^"]+)"', html)
    assert expand and "390 more lines" in html
    full_page = client.get(expand.group(1).replace("&amp;", "&"))
    text = full_page.content.decode()
    assert full_page.status_code == 200 and "<html" in text and "399 line" in text
    back = re.search(r'<a href="([^"]+)">← Back to the step</a>', text)
    viewer = viewer_url(workspace, hostile_session, agent=agent)
    assert back and back.group(1) == f"{viewer}?at=0#step-0"
    returned = client.get(back.group(1).split("#")[0])
    assert returned.status_code == 200 and 'id="step-0"' in returned.content.decode()
    # From a run page with its own parameters (and from an htmx window), back to that page.
    run_page = viewer_url(workspace, hostile_session, run=main_run(hostile_session))
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = client.get(run_page, {"window": 5}, **headers).content.decode()
        link = re.search(r'<a href="([^"]+key=result%3Atoolu_a[^"]*)" hx-get', html).group(1)
        text = client.get(link.replace("&amp;", "&")).content.decode()
        back = re.search(r'<a href="([^"]+)">← Back to the step</a>', text).group(1)
        assert back == f"{run_page}?window=5&amp;at=0#step-0"
        assert client.get(back.replace("&amp;", "&").split("#")[0]).status_code == 200
    fragment = client.get(expand.group(2).replace("&amp;", "&"), HTTP_HX_REQUEST="true")
    assert "<html" not in fragment.content.decode() and "399 line" in fragment.content.decode()
    missing = client.get(
        f"/w/{workspace.slug}/annotations/sessions/{hostile_session.pk}/calls/0/part/?key=result:nope"
    )
    assert missing.status_code == 404
    assert "Result (error)" in html  # the Read call failed


def test_compactions_and_subagent_spawns_are_drawn(workspace, client_for, small_session):
    client = client_for("viewer")
    main = Agent.objects.get(session=small_session, kind=AgentKind.MAIN)
    sub = Agent.objects.filter(session=small_session, kind=AgentKind.SUBAGENT).first()
    html = client.get(viewer_url(workspace, small_session, agent=main) + "?page=1").content.decode()
    pages = [html]
    for page in range(2, -(-main.call_count // 50) + 1):
        pages.append(
            client.get(
                viewer_url(workspace, small_session, agent=main) + f"?page={page}"
            ).content.decode()
        )
    everything = "".join(pages)
    assert "Full compaction (auto):" in everything
    assert f"/annotations/sessions/{small_session.pk}/agents/{sub.pk}/" in everything
    assert "Open the subagent" in everything
    sub_html = client.get(viewer_url(workspace, small_session, agent=sub)).content.decode()
    assert "Spawned by" in sub_html
    redirect = client.get(f"/w/{workspace.slug}/annotations/sessions/{small_session.pk}/")
    assert redirect.status_code == 302 and redirect["Location"].endswith(f"/agents/{main.pk}/")


def test_marking_without_javascript_then_replacing(workspace, client_for, small_session, members):
    client = client_for("reviewer")
    run = main_run(small_session)
    step = call_in(run, 4).session_index
    url = f"/w/{workspace.slug}/annotations/sessions/{small_session.pk}/mark/"
    form = client.get(url, {"run": run.pk, "call_index": step})
    assert form.status_code == 200 and f'value="{step}"' in form.content.decode()
    bad = client.post(
        url, {"run": run.pk, "call_index": step, "failure_class": "other", "confidence": "low"}
    )
    assert bad.status_code == 400
    assert (
        "Say what went wrong when the class is Other (here or in the note)." in bad.content.decode()
    )
    outside = client.post(
        url,
        {
            "run": run.pk,
            "call_index": run.last_call_index + 1,
            "failure_class": "repetition",
            "confidence": "low",
        },
    )
    assert outside.status_code == 400 and f"outside run {run.pk}" in outside.content.decode()
    evidence = client.post(
        url,
        {
            "run": run.pk,
            "call_index": step,
            "failure_class": "repetition",
            "confidence": "low",
            "evidence": "3, x",
        },
    )
    assert (
        evidence.status_code == 400
        and "&#x27;x&#x27; is not a call number." in evidence.content.decode()
    )
    assert not Divergence.objects.exists()
    ok = client.post(
        url,
        {"run": run.pk, "call_index": step, "failure_class": "forgotten_constraint", "confidence": "high",
         "evidence": f"#{call_in(run, 1).session_index}", "note": "forgot the lint rule"},
    )  # fmt: skip
    assert ok.status_code == 302 and ok["Location"].endswith(f"?at={step}#step-{step}")
    page = client.get(ok["Location"]).content.decode()
    assert "Marked call" in page and "Your mark (replace it)" in page
    assert "Create a restart package from here" in page
    assert "The run diverged (forgotten constraint)" in page
    assert (
        f"specs/restart-packages/new/?session={small_session.pk}&amp;indicators=reproposed-rejected-interface"
        in page
    )
    # A viewer sees the mark but no link to a builder it may not open.
    viewer_response = client_for("viewer").get(ok["Location"].split("#")[0] + "&reveal=1")
    viewer_page = viewer_response.content.decode()
    assert viewer_response.status_code == 200 and "forgot the lint rule" in viewer_page
    assert "Create a restart package from here" not in viewer_page
    again = client.post(
        url,
        {"run": run.pk, "call_index": step + 0, "failure_class": "repetition", "confidence": "low"},
    )
    assert again.status_code == 302
    assert Divergence.objects.filter(run=run).count() == 2
    assert "1 replaced mark" in client.get(ok["Location"]).content.decode()
    # Other with only a note: the note says what went wrong.
    noted = client.post(
        url,
        {"run": run.pk, "call_index": step, "failure_class": "other", "confidence": "low",
         "note": "Chased a flaky test"},
    )  # fmt: skip
    assert noted.status_code == 302
    current = Divergence.objects.get(run=run, replaced_at__isnull=True)
    assert (current.failure_class, current.other_text, current.note) == (
        "other",
        "Chased a flaky test",
        "Chased a flaky test",
    )


def test_others_marks_are_hidden_until_you_mark(workspace, client_for, small_session, members):
    run = main_run(small_session)
    services.divergence_mark(
        session=small_session, annotator=members["editor"], call_index=call_in(run, 2).session_index,
        failure_class="repetition", confidence="low",
    )  # fmt: skip
    url = viewer_url(workspace, small_session, run=run)
    blind = client_for("reviewer").get(url).content.decode()
    assert "1 mark by others is hidden until you mark this run" in blind
    assert "◆ editor-a" not in blind
    assert "◆ editor-a" in client_for("admin").get(url).content.decode()
    assert "◆ editor-a" in client_for("viewer").get(url).content.decode()
    assert "◆ editor-a" in client_for("reviewer").get(url + "?reveal=1").content.decode()


def test_admin_adjudicates_from_the_run_page(workspace, client_for, small_session, members):
    run = main_run(small_session)
    a = services.divergence_mark(
        session=small_session, annotator=members["editor"], call_index=call_in(run, 2).session_index,
        failure_class="repetition", confidence="low",
    )  # fmt: skip
    url = f"/w/{workspace.slug}/annotations/sessions/{small_session.pk}/runs/{run.pk}/adjudicate/"
    assert client_for("reviewer").post(url, {"adopt": a.pk}).status_code == 403
    response = client_for("admin").post(url, {"adopt": a.pk})
    assert response.status_code == 302
    final = Divergence.objects.get(kind="adjudication")
    assert final.based_on == a
    page = client_for("viewer").get(viewer_url(workspace, small_session, run=run)).content.decode()
    assert "★ Final" in page
    incomplete = client_for("admin").post(url, {"call_index": "", "failure_class": ""})
    assert (
        incomplete.status_code == 400
        and "Required unless you adopt a mark." in incomplete.content.decode()
    )


def test_other_workspaces_are_404_and_viewers_cannot_mark(
    workspace, client_for, small_session, other_session, members
):
    client = client_for("admin")
    foreign_run = Run.objects.filter(session=other_session).first()
    base = f"/w/{workspace.slug}/annotations/sessions"
    assert client.get(f"{base}/{other_session.pk}/").status_code == 404
    assert client.get(f"{base}/{other_session.pk}/runs/{foreign_run.pk}/").status_code == 404
    assert client.get(f"{base}/{small_session.pk}/runs/{foreign_run.pk}/").status_code == 404
    assert client.get(f"{base}/{other_session.pk}/calls/0/part/?key=prompt").status_code == 404
    assert (
        client.post(f"{base}/{other_session.pk}/mark/", {"run": foreign_run.pk}).status_code == 404
    )
    viewer = client_for("viewer")
    run = main_run(small_session)
    assert viewer.get(f"{base}/{small_session.pk}/mark/?run={run.pk}").status_code == 403
    denied = viewer.post(
        f"{base}/{small_session.pk}/mark/",
        {
            "run": run.pk,
            "call_index": run.first_call_index,
            "failure_class": "repetition",
            "confidence": "low",
        },
    )
    assert denied.status_code == 403 and not Divergence.objects.exists()
    page = viewer.get(viewer_url(workspace, small_session, run=run)).content.decode()
    assert "marking needs the editor role" in page and 'id="mark-form"' not in page


def test_queue_pages_build_hand_out_and_report(workspace, client_for, small_session, members):
    reviewer = client_for("reviewer")
    base = f"/w/{workspace.slug}/annotations/queues/"
    empty = reviewer.get(base).content.decode()
    assert "No queues yet" in empty and "Build a queue" in empty
    preview = reviewer.get(base, {"preview": "1", "agent_kind": "main"}, HTTP_HX_REQUEST="true")
    main_runs = Run.objects.filter(session=small_session, agent__kind="main").count()
    assert f"<strong>{main_runs}</strong> runs match" in preview.content.decode()
    assert client_for("editor").post(base, {"name": "x"}).status_code == 403
    bad = reviewer.post(
        base,
        {
            "name": "",
            "sample_size": 5,
            "annotators": [],
            "annotators_per_run": 2,
            "agreement_window": 3,
        },
    )
    assert bad.status_code == 400 and "This field is required." in bad.content.decode()
    response = reviewer.post(
        base,
        {"name": "Main runs", "agent_kind": "main", "min_context": "1000", "sample_size": 2,
         "annotators": [members["reviewer"].pk, members["editor"].pk], "annotators_per_run": 2,
         "agreement_window": 3, "seed": 7},
    )  # fmt: skip
    assert response.status_code == 302
    detail_url = response["Location"]
    detail = reviewer.get(detail_url).content.decode()
    assert (
        "Take my next run" in detail
        and "agent_kind=main" in detail
        and "min_context=1000" in detail
    )
    nxt = reviewer.post(detail_url + "next/")
    assert nxt.status_code == 302 and "?queue=" in nxt["Location"]
    run_page = reviewer.get(nxt["Location"]).content.decode()
    assert "this run is yours to read" in run_page
    finish = reviewer.post(detail_url + "finish/", {"outcome": "no_divergence"})
    assert finish.status_code == 302  # straight to the next run
    assert AuditEvent.objects.filter(action="annotation_queue.no_divergence").count() == 1
    listing = reviewer.get(base).content.decode()
    assert "Main runs" in listing and "Continue your run" in listing
    assert "not an annotator" in client_for("admin").get(base).content.decode()
    assert client_for("admin").post(detail_url + "next/").status_code == 403  # not a member
    assert "not one of this queue" in client_for("admin").get(detail_url).content.decode()


def test_divergences_page_aggregates_with_n_and_empty_states(
    workspace, client_for, small_session, members
):
    url = f"/w/{workspace.slug}/annotations/divergences/"
    empty = client_for("viewer").get(url).content.decode()
    assert "No divergences marked yet" in empty
    assert f'href="/w/{workspace.slug}/annotations/sessions/{small_session.pk}/"' in empty
    runs = list(Run.objects.filter(session=small_session, agent__kind="main").order_by("index"))
    for number, run in enumerate(runs[:3]):
        services.divergence_mark(
            session=small_session, annotator=members["reviewer"], call_index=call_in(run, 3).session_index,
            failure_class=["repetition", "retrieval_failure", "repetition"][number], confidence="medium",
        )  # fmt: skip
    page = client_for("viewer").get(url).content.decode()
    assert "Failure classes by context band" in page and "n = 3 divergences" in page
    assert "No qualification for this model" in page
    csv_text = (
        client_for("viewer")
        .get(f"/w/{workspace.slug}/annotations/divergences/divergences.csv")
        .content.decode()
    )
    assert csv_text.count("\n") == 4 and "repetition" in csv_text
    bands = (
        client_for("viewer")
        .get(f"/w/{workspace.slug}/annotations/divergences/by-band.csv?band=50000")
        .content.decode()
    )
    header = bands.splitlines()[0].split(",")
    assert header[:3] == ["band_lower", "band_upper", "n"]
    assert sum(int(line.split(",")[2]) for line in bands.splitlines()[1:]) == 3
    filtered = client_for("viewer").get(url, {"failure_class": "repetition"}).content.decode()
    assert "n = 2 divergences" in filtered


def test_dashboard_card_and_menu(workspace, client_for, small_session, members):
    client = client_for("viewer")
    home = client.get(f"/w/{workspace.slug}/").content.decode()
    assert "Divergence annotations" in home and "No divergences marked yet" in home
    assert f'href="/w/{workspace.slug}/annotations/queues/"' in home  # menu: Annotation queue
    assert f'href="/w/{workspace.slug}/annotations/divergences/"' in home  # menu: Divergences
    run = main_run(small_session)
    for user in ("editor", "reviewer"):
        services.divergence_mark(
            session=small_session, annotator=members[user], call_index=call_in(run, 3).session_index,
            failure_class="repetition", confidence="low",
        )  # fmt: skip
    services.divergence_adjudicate(
        run=run, adjudicator=members["admin"], adopt=Divergence.objects.first()
    )
    home = client.get(f"/w/{workspace.slug}/").content.decode()
    card = home[home.index("Divergence annotations") :]
    assert re.search(r"<dt>Runs marked</dt><dd>1</dd>", card)
    assert re.search(r"<dt>Marks</dt><dd>2</dd>", card)
    assert re.search(r"<dt>Annotators</dt><dd>2</dd>", card)
    assert re.search(r"<dt>Final marks</dt><dd>1</dd>", card)


def test_viewer_reads_every_real_sample_transcript(workspace, client_for, shared_fixtures):
    """Claude Code, Codex and OTLP samples from other projects: every agent and run page and
    every window renders, and steps show the text that was stored."""
    from traces.services import ingest_paths

    ingest_paths(workspace=workspace, paths=[str(shared_fixtures)], fmt="auto")
    client = client_for("viewer")
    agents = list(Agent.objects.filter(workspace=workspace).select_related("session"))
    assert len(agents) >= 10
    texts = 0
    for agent in agents:
        url = viewer_url(workspace, agent.session, agent=agent)
        pages = max(1, -(-agent.call_count // 50))
        for page in range(1, pages + 1):
            response = client.get(url, {"page": page})
            assert response.status_code == 200, (url, page)
            texts += response.content.decode().count('class="part-wrap')
    for run in Run.objects.filter(workspace=workspace).select_related("session"):
        assert client.get(viewer_url(workspace, run.session, run=run)).status_code == 200
    assert texts > 100


def mark_field(html: str, name: str) -> str:
    """The value the mark form's text or number input `name` shows."""
    match = re.search(rf'<input type="(?:number|text)" name="{name}"[^>]*value="([^"]*)"', html)
    return match.group(1) if match else ""


@pytest.fixture
def long_session(workspace):
    """One main run of 120 steps: more than two windows of the viewer."""
    params = CorpusParams(
        sessions=1, steps_per_session=(120, 120), threshold=10**9, growth_at_100k=300,
        subagents_per_session=(1, 1), subagent_steps=(3, 3), seed=31,
    )  # fmt: skip
    return ingest_synthetic(workspace, params, name="long-run")[0]


def test_a_refused_mark_shows_the_viewer_again_with_every_error_and_the_input(
    workspace, client_for, long_session, members
):
    client = client_for("reviewer")
    small_session = long_session
    run = main_run(small_session)
    step, later = call_in(run, 60).session_index, call_in(run, 62).session_index
    url = viewer_url(workspace, small_session, run=run)
    refused = client.post(
        f"{url}?queue=7",
        {"call_index": step, "evidence": f"3, {later}", "note": "Kept: my reading notes"},
    )
    assert refused.status_code == 400
    html = refused.content.decode()
    # Still the viewer, at the window that holds the step typed, with the queue kept.
    assert 'id="strip"' in html and 'id="mark-form"' in html
    assert f'id="step-{step}"' in html and "Steps 51–" in html
    assert f'action="{url}?queue=7#mark-panel"' in html
    # Every error at once: the form's two and the service's evidence check.
    assert "Fix these 3 problems and save again" in html
    summary = html.split('id="mark-errors"')[1].split("</div>")[0]
    assert summary.count("<li>") == 3
    assert "What went wrong</a>: This field is required." in summary
    assert "Confidence</a>: This field is required." in summary
    assert f"Evidence must come before the divergence at call {step}; {later} do not." in summary
    # What was typed is kept, and pinned against the page's step selection.
    assert mark_field(html, "call_index") == str(step) and "data-pinned" in html
    assert mark_field(html, "evidence") == f"3, {later}"
    assert "Kept: my reading notes</textarea>" in html
    outside = client.post(
        url,
        {"call_index": run.last_call_index + 1, "failure_class": "other", "confidence": "low"},
    )
    errors = outside.content.decode().split('id="mark-errors"')[1].split("</div>")[0]
    assert outside.status_code == 400 and "Fix these 2 problems" in errors
    assert f"Step (call #)</a>: Call {run.last_call_index + 1} " in errors
    assert "Say what went wrong" in errors
    assert not Divergence.objects.exists()
    saved = client.post(
        f"{url}?queue=7",
        {"call_index": step, "failure_class": "repetition", "confidence": "high", "evidence": "3"},
    )
    assert saved.status_code == 302
    assert saved["Location"] == f"{url}?at={step}&queue=7#step-{step}"
    assert Divergence.objects.get().evidence_call_indexes == [3]


def test_the_mark_form_starts_at_the_step_you_are_looking_at(
    workspace, client_for, long_session, members
):
    client = client_for("reviewer")
    small_session = long_session
    run = main_run(small_session)
    url = viewer_url(workspace, small_session, run=run)
    first, fifth, later = (call_in(run, n).session_index for n in (0, 4, 57))
    assert mark_field(client.get(url).content.decode(), "call_index") == str(first)
    assert mark_field(client.get(url, {"at": later}).content.decode(), "call_index") == str(later)
    looking = client.get(url, {"step": fifth, "at": fifth}).content.decode()
    assert mark_field(looking, "call_index") == str(fifth) and "data-pinned" not in looking
    # Each step's "Mark divergence here" link opens the viewer at that step, form pre-filled.
    assert f'href="{url}?step={fifth}&amp;at={fifth}#mark-panel">Mark divergence here' in looking
    # A step not shown here is not pre-filled.
    assert mark_field(client.get(url, {"step": 10**6}).content.decode(), "call_index") == str(first)
    services.divergence_mark(
        session=small_session, annotator=members["reviewer"], call_index=fifth,
        failure_class="repetition", confidence="low",
    )  # fmt: skip
    mine = client.get(url, {"at": later}).content.decode()
    assert mark_field(mine, "call_index") == str(fifth) and "data-pinned" in mine
    moved = client.get(url, {"step": later, "at": later}).content.decode()
    assert mark_field(moved, "call_index") == str(later)


def test_marking_from_an_agent_page_stays_there_when_refused(
    workspace, client_for, small_session, members
):
    main = Agent.objects.get(session=small_session, kind=AgentKind.MAIN)
    url = viewer_url(workspace, small_session, agent=main)
    run = main_run(small_session)
    step = call_in(run, 3).session_index
    refused = client_for("editor").post(url, {"call_index": step, "confidence": "low"})
    html = refused.content.decode()
    assert refused.status_code == 400 and 'id="strip"' in html
    assert "What went wrong</a>: This field is required." in html
    assert f'action="{url}#mark-panel"' in html
    saved = client_for("editor").post(
        url, {"call_index": step, "failure_class": "repetition", "confidence": "low"}
    )
    assert saved.status_code == 302
    assert (
        saved["Location"]
        == f"{viewer_url(workspace, small_session, run=run)}?at={step}#step-{step}"
    )
    assert client_for("viewer").post(url, {"call_index": step}).status_code == 403
