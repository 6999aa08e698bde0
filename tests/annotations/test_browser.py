"""In Chromium: a reviewer reads a run with j/k and marks a divergence with the keyboard; a
click on the context strip brings its step into view; transcript markup never runs; the
pages people look at are screenshotted (GOVERNANCE_SCREENSHOTS)."""

import io
import re

import pytest

from tests.annotations.conftest import HOSTILE, ingest_synthetic, main_run
from traces.annotations.models import Divergence
from traces.models import Agent, AgentKind, Call, Run, Session
from traces.synthetic import CorpusParams

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def calls_of(run):
    return list(
        Call.objects.filter(
            agent=run.agent,
            session_index__gte=run.first_call_index,
            session_index__lte=run.last_call_index,
        )
        .order_by("session_index")
        .values_list("session_index", flat=True)
    )


def current_call(page):
    return page.evaluate(
        "(() => { const el = document.querySelector('#steps li.step.is-current'); return el ? Number(el.dataset.call) : null; })()"
    )


def test_reviewer_marks_a_divergence_with_the_keyboard(
    page, login, members, small_session, screenshot
):
    run = main_run(small_session)
    calls = calls_of(run)
    login("reviewer-a")
    page.goto(
        f"{page.base_url}/w/{small_session.workspace.slug}/annotations/sessions/{small_session.pk}/runs/{run.pk}/"
    )
    page.locator("#strip.js-plotly-plot").wait_for()
    page.keyboard.press("j")
    assert current_call(page) == calls[0]
    page.keyboard.press("j")
    assert current_call(page) == calls[1]
    focused = page.evaluate("document.activeElement.id")
    assert focused == f"step-{calls[1]}"  # focus follows, for keyboard and screen reader users
    assert page.locator(f"#step-{calls[1]}").get_attribute("aria-current") == "step"
    page.keyboard.press("e")  # this step is the evidence
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    page.keyboard.press("j")
    assert current_call(page) == calls[3]
    shapes = page.evaluate(
        "document.getElementById('strip').layout.shapes.filter(s => s.name === 'current').map(s => s.x0)"
    )
    assert shapes == [calls[3]]  # the strip highlights the current step
    page.keyboard.press("d")
    assert page.locator("#id_call_index").input_value() == str(calls[3])
    assert page.locator("[data-mark-evidence]").input_value() == str(calls[1])
    assert page.evaluate("document.activeElement.name") == "failure_class"
    screenshot("annotations-marking", full_page=False)
    page.keyboard.press("Space")  # the first class: retrieval failure
    page.keyboard.press("Tab")  # other text
    page.keyboard.press("Tab")  # confidence group
    page.keyboard.press("ArrowRight")  # medium
    page.keyboard.press("Tab")  # evidence (already filled by e)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_load_state("networkidle")
    assert page.get_by_text(f"Marked call {calls[3]} as Retrieval failure").is_visible()
    mark = Divergence.objects.get()
    assert (mark.call_index, mark.failure_class, mark.confidence) == (
        calls[3],
        "retrieval_failure",
        "medium",
    )
    assert mark.evidence_call_indexes == [calls[1]] and mark.annotator.username == "reviewer-a"
    assert current_call(page) == calls[3]  # back on the marked step
    assert page.get_by_role("link", name="Create a restart package from here").is_visible()
    screenshot("annotations-marked", full_page=False)


def test_chart_click_scrolls_to_the_step(page, login, members, workspace, screenshot):
    params = CorpusParams(
        sessions=1, steps_per_session=(160, 160), threshold=10**9, growth_at_100k=300,
        subagents_per_session=(1, 1), subagent_steps=(4, 4), seed=21,
    )  # fmt: skip
    session = ingest_synthetic(workspace, params, name="click")[0]
    run = Run.objects.get(session=session, agent__kind=AgentKind.MAIN)
    calls = calls_of(run)
    target = calls[137]  # in the third window of fifty
    login("viewer-a")
    page.goto(
        f"{page.base_url}/w/{workspace.slug}/annotations/sessions/{session.pk}/runs/{run.pk}/"
    )
    strip = page.locator("#strip.js-plotly-plot")
    strip.wait_for()
    assert page.locator(f"#step-{target}").count() == 0
    x, y = page.evaluate(
        """(call) => {
            const el = document.getElementById('strip');
            const L = el._fullLayout, trace = el.data[0];
            const i = trace.x.indexOf(call);
            return [L._size.l + L.xaxis.l2p(call), L._size.t + L.yaxis.l2p(trace.y[i])];
        }""",
        target,
    )
    box = strip.bounding_box()
    page.mouse.move(box["x"] + x, box["y"] + y)
    page.mouse.click(box["x"] + x, box["y"] + y)
    step = page.locator(f"#step-{target}")
    step.wait_for()
    page.wait_for_function(
        f"() => document.querySelector('#step-{target}').classList.contains('is-current')"
    )
    page.wait_for_timeout(400)
    top = step.bounding_box()["y"]
    strip_bottom = page.locator("#strip-wrap").bounding_box()
    assert (
        strip_bottom["y"] + strip_bottom["height"] - 5 <= top < 900
    )  # below the sticky strip, on screen
    assert page.url.endswith(f"#step-{target}")
    assert page.get_by_text(f"Steps 101–150 of {run.call_count}").first.is_visible()
    shaded = page.evaluate(
        "document.getElementById('strip').layout.shapes.filter(s => s.name === 'window').map(s => [s.x0, s.x1])"
    )
    assert shaded == [[calls[100] - 0.5, calls[149] + 0.5]]
    screenshot("annotations-strip-click", full_page=False)
    # j at the end of a window loads the next one.
    page.locator(f"#step-{calls[149]} h3").click()
    page.keyboard.press("j")
    page.wait_for_function(f"() => document.querySelector('#step-{calls[150]}') !== null")
    page.wait_for_function(
        f"() => document.querySelector('#step-{calls[150]}').classList.contains('is-current')"
    )


def test_transcript_markup_never_runs(page, login, members, hostile_session, screenshot):
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    agent = Agent.objects.get(session=hostile_session, kind=AgentKind.MAIN)
    login("editor-a")
    page.goto(
        f"{page.base_url}/w/{hostile_session.workspace.slug}/annotations/sessions/{hostile_session.pk}/agents/{agent.pk}/"
    )
    page.locator("#strip.js-plotly-plot").wait_for()
    first = page.locator("li.step").first
    assert HOSTILE in first.inner_text()  # shown as text
    expand = first.get_by_role("link", name=re.compile("^Expand: 390 more lines"))
    expand.click()
    page.get_by_text("399 line").first.wait_for()
    assert first.locator(".tool .part").nth(1).inner_text().count("<script>") == 400
    screenshot("annotations-escaped", full_page=False)
    assert dialogs == []
    assert page.get_by_text("Full compaction").is_visible()


def test_full_page_expand_leads_back_to_the_step(page, login, members, hostile_session, screenshot):
    """Without htmx the Expand link opens the part's own page; its back link returns to the
    step in the viewer."""
    agent = Agent.objects.get(session=hostile_session, kind=AgentKind.MAIN)
    viewer = (
        f"/w/{hostile_session.workspace.slug}/annotations/sessions/{hostile_session.pk}"
        f"/agents/{agent.pk}/"
    )
    login("viewer-a")
    page.goto(page.base_url + viewer)
    expand = page.locator("li.step").first.get_by_role("link", name=re.compile("^Expand: 390"))
    page.goto(page.base_url + expand.get_attribute("href"))
    assert page.get_by_role("heading", name="Call 0: tool result").is_visible()
    assert page.get_by_text("399 line").first.is_visible()
    screenshot("annotations-part-page", full_page=False)
    with page.expect_navigation():
        page.get_by_role("link", name="← Back to the step").click()
    page.locator("#strip.js-plotly-plot").wait_for()
    assert page.url == f"{page.base_url}{viewer}?at=0#step-0"
    assert page.locator("#step-0").is_visible()


def test_pages_for_review(page, login, members, workspace, screenshot):
    """The queue and divergences pages with the demo data, including the lab comparison."""
    from qualification import demo as qualification_demo
    from traces import demo as traces_demo
    from traces.annotations import demo

    users = {k: members[k] for k in ("admin", "reviewer", "editor", "viewer")}
    traces_demo.seed(workspace=workspace, users=users, stdout=io.StringIO())
    demo.seed(workspace=workspace, users=users, stdout=io.StringIO())
    qualification_demo.seed(workspace=workspace, users=users, stdout=io.StringIO())
    login("reviewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/annotations/divergences/")
    page.locator("#lab-chart.js-plotly-plot").wait_for()
    assert page.get_by_text("Production diverges earlier than the lab predicted").is_visible()
    screenshot("annotations-divergences")
    page.locator("#lab-chart").scroll_into_view_if_needed()
    screenshot("annotations-lab", full_page=False)
    page.goto(f"{page.base_url}/w/{workspace.slug}/annotations/queues/")
    page.get_by_role("link", name=re.compile("^Demo: Sonnet 4.5")).click()
    page.get_by_text("Cohen's κ =").wait_for()  # after the click's navigation, not before
    assert page.get_by_text("Cohen's κ =").is_visible()
    screenshot("annotations-queue")
    page.get_by_role("button", name="Take my next run").click()
    page.wait_for_load_state("networkidle")
    assert page.get_by_text("this run is yours to read").is_visible()
    screenshot("annotations-queue-run", full_page=False)


def test_annotator_finds_and_marks_the_constraint_forgotten_after_a_compaction(
    page, login, members, workspace, runs_that_go_wrong, screenshot
):
    """The annotation job end to end on a demo run that goes wrong: open the queue, read the
    run, find where it goes wrong, mark it from the selected step, get every error of a bad
    submit at once without leaving the viewer, fix it and see the mark recorded."""
    from traces.annotations.demo_runs import forgotten_constraint

    demo = forgotten_constraint()
    session = Session.objects.get(workspace=workspace, external_id=demo.session_id)
    divergence = demo.expected_call
    later = divergence + 2
    login("editor-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/annotations/queues/")
    page.get_by_role("link", name="Demo: runs to read for their first divergence").click()
    screenshot("annotations-read-queue")
    page.get_by_role(
        "link", name=re.compile("^Refund reason codes in the checkout refund flow")
    ).click()
    page.locator("#strip.js-plotly-plot").wait_for()
    viewer = page.url.split("?")[0]
    assert page.get_by_role("heading", name=re.compile("^Run 1 of main")).is_visible()

    # Reading: the compaction, its summary without the payments rule, the payments edit.
    assert page.get_by_text("Full compaction (manual)").is_visible()
    summary = page.locator(".compaction-summary")
    assert "compaction summary" in summary.inner_text().lower()
    assert summary.get_by_role("link", name=re.compile("^Expand")).count() == 0  # all of it
    text = summary.locator(".part").inner_text()
    assert (
        "Constraints from the user" in text and "Keep the refunds API backwards compatible" in text
    )
    assert "payments" not in text.split("Constraints from the user")[1].split("4. Pending")[0]
    step = page.locator(f"#step-{divergence}")
    step.scroll_into_view_if_needed()
    assert (
        step.locator(".tool-summary")
        .inner_text()
        .endswith("db/payments/migrations/0047_refund_reason.sql")
    )
    assert "ALTER TABLE payments.refunds ADD COLUMN reason text;" in step.inner_text()
    assert "Stop. The payments schema is off limits" in page.locator("#steps").inner_text()

    # Selecting the step pre-fills the form with it.
    step.locator("h3").click()
    assert current_call(page) == divergence
    assert page.locator("#id_call_index").input_value() == str(divergence)

    # A deliberate mistake: no confidence, and evidence after the divergence.
    page.locator("input[name=failure_class][value=forgotten_constraint]").check()
    page.locator("#id_evidence").fill(f"0, {later}")
    page.locator("#id_note").fill("Wrote a payments migration after /compact dropped the rule.")
    with page.expect_navigation():
        page.get_by_role("button", name="Save mark").click()
    errors = page.locator("#mark-errors")
    assert errors.is_visible()
    shown = errors.inner_text()
    assert "Fix these 2 problems and save again" in shown
    assert "Confidence: This field is required." in shown
    assert (
        f"Evidence must come before the divergence at call {divergence}; {later} do not." in shown
    )
    assert page.url.split("?")[0].split("#")[0] == viewer  # still the viewer, not another page
    assert page.locator("#strip.js-plotly-plot").count() == 1
    assert current_call(page) == divergence  # back at the step it was for
    assert page.locator(f"#step-{divergence} .tool-summary").is_visible()
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.id === 'mark-errors'"
    )
    assert page.locator("#id_call_index").input_value() == str(divergence)  # input kept
    assert page.locator("input[name=failure_class][value=forgotten_constraint]").is_checked()
    assert page.locator("#id_evidence").input_value() == f"0, {later}"
    assert "dropped the rule" in page.locator("#id_note").input_value()
    assert not Divergence.objects.exists()
    screenshot("annotations-walk-errors", full_page=False)

    # Fixed and saved.
    page.locator("input[name=confidence][value=high]").check()
    page.locator("#id_evidence").fill("0")
    with page.expect_navigation():
        page.get_by_role("button", name="Save mark").click()
    assert page.get_by_text(f"Marked call {divergence} as Forgotten constraint").is_visible()
    assert page.get_by_role("heading", name="Your mark (replace it)").is_visible()
    assert page.locator(f"#step-{divergence} .mark-badge").inner_text() == (
        "◆ editor-a: Forgotten constraint"
    )
    mark = Divergence.objects.get()
    assert (mark.session_id, mark.call_index, mark.failure_class, mark.confidence) == (
        session.pk,
        divergence,
        "forgotten_constraint",
        "high",
    )
    assert mark.evidence_call_indexes == [0] and mark.annotator.username == "editor-a"
    screenshot("annotations-walk-marked", full_page=False)


@pytest.mark.parametrize("width", [1280, 1920])
def test_bad_demo_run_viewer_screenshots(
    page, login, members, workspace, runs_that_go_wrong, screenshot, width
):
    """The viewer on a demo run that goes wrong, at both widths people use: nothing overflows
    sideways and the mark panel stays beside (or below) the steps."""
    from traces.annotations.demo import run_holding_divergence
    from traces.annotations.demo_runs import forgotten_constraint, harness_truncation

    demo = harness_truncation()
    session = Session.objects.get(workspace=workspace, external_id=demo.session_id)
    run = Run.objects.get(session=session, agent__kind=AgentKind.MAIN)
    page.set_viewport_size({"width": width, "height": 1000})
    login("reviewer-a")
    page.goto(
        f"{page.base_url}/w/{workspace.slug}/annotations/sessions/{session.pk}/runs/{run.pk}/"
        f"?at={demo.expected_call - 1}#step-{demo.expected_call - 1}"
    )
    page.locator("#strip.js-plotly-plot").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    truncated = page.locator(f"#step-{demo.expected_call - 1} .tool .part").nth(1)
    assert truncated.inner_text().rstrip().endswith("[… output truncated …]")
    assert truncated.is_visible() and current_call(page) == demo.expected_call - 1
    screenshot(f"annotations-bad-run-{width}", full_page=False)
    # The other run a reader must see whole: the compaction summary that dropped a rule.
    constraint = run_holding_divergence(workspace, forgotten_constraint())
    page.goto(
        f"{page.base_url}/w/{workspace.slug}/annotations/sessions/{constraint.session_id}/runs/"
        f"{constraint.pk}/"
    )
    page.locator("#strip.js-plotly-plot").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.locator(".compaction-summary").is_visible()
    screenshot(f"annotations-summary-{width}", full_page=False)


def test_the_mark_form_follows_the_step_you_look_at_until_you_choose(
    page, login, members, workspace
):
    params = CorpusParams(
        sessions=1, steps_per_session=(40, 40), threshold=10**9, growth_at_100k=300,
        subagents_per_session=(1, 1), subagent_steps=(3, 3), seed=23,
    )  # fmt: skip
    session = ingest_synthetic(workspace, params, name="follow")[0]
    run = Run.objects.get(session=session, agent__kind=AgentKind.MAIN)
    calls = calls_of(run)
    login("editor-a")
    page.goto(
        f"{page.base_url}/w/{workspace.slug}/annotations/sessions/{session.pk}/runs/{run.pk}/"
    )
    page.locator("#strip.js-plotly-plot").wait_for()
    field = page.locator("#id_call_index")
    assert field.input_value() == str(calls[0])  # the first step shown
    # Scrolled to, before any step is selected: the step at the top of the list.
    page.locator(f"#step-{calls[6]}").evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_function(f"() => document.getElementById('id_call_index').value === '{calls[6]}'")
    page.locator(f"#step-{calls[9]} h3").click()  # selected
    assert current_call(page) == calls[9] and field.input_value() == str(calls[9])
    page.keyboard.press("j")
    assert field.input_value() == str(calls[10])
    field.fill(str(calls[2]))  # chosen by hand: selection no longer moves it
    page.locator(f"#step-{calls[12]} h3").click()
    assert current_call(page) == calls[12] and field.input_value() == str(calls[2])
