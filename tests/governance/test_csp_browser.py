"""Every page works under the Content-Security-Policy: Chromium walks the seeded demo and
reports no policy violation, no console error, and a drawing in every chart."""

from __future__ import annotations

import io
import re
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import Resolver404, resolve
from django.utils import timezone

from artifacts.models import Artifact
from artifacts.services import artifact_write
from governance.models import Job, JobStatus
from governance.services import job_create
from governance.staticfinders import PlotlyJsFinder
from tests.conftest import PASSWORD
from traces.analytics.selectors import JOB_KIND, AnalyticsFilters

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__violations.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " at "
    + (e.sourceFile || "") + ":" + e.lineNumber);
});
"""
# Links the walk does not follow: downloads, sorting and paging of lists already seen.
SKIP_LINK = re.compile(
    r"logout|\.csv|\.jsonl|/export/|/content/|/output/|download|[?&](sort|page)="
)
# Pages the walk must reach with the demo data: every menu entry and a detail page of each
# kind of seeded object.
MUST_VISIT = {
    "dashboard", "job_list", "job_detail", "members", "tokens", "audit_log", "invitations",
    "traces:session_list", "traces:session_detail", "traces:upload",
    "analytics:cost", "analytics:steps", "analytics:compactions", "analytics:coverage",
    "analytics:incidents", "analytics:what_if",
    "annotations:queue_list", "annotations:queue_detail", "annotations:divergence_list",
    "qualification:list", "qualification:detail", "qualification:limit_list",
    "qualification:limit_detail", "qualification:audit_list",
    "contextfiles:file_list", "contextfiles:file_detail", "contextfiles:evaluation_detail",
    "specs:spec_list", "specs:spec_detail", "specs:version_detail", "specs:version_diff",
    "specs:review_queue", "specs:package_list", "specs:package_detail", "specs:package_create",
    "artifacts:list", "artifacts:detail", "artifacts:settings", "api-docs",
}  # fmt: skip


def url_key(path: str) -> str:
    """One visit per URL shape: ids and UUIDs are alike."""
    return re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+", "N", urlsplit(path).path)


def test_every_page_works_under_the_policy(page, live_server):
    call_command("seed_demo", stdout=io.StringIO())
    problems: list[str] = []
    uncovered: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"{page.url}: {error}"))
    console: list[str] = []

    def on_console(msg):
        # Chromium asks for /favicon.ico where a page (DRF's, the admin's) names no icon.
        if msg.type == "error" and not msg.location.get("url", "").endswith("/favicon.ico"):
            console.append(msg.text)

    page.on("console", on_console)

    def check_header(response):
        if not response.url.startswith(live_server.url):
            return
        if response.request.resource_type in ("document", "xhr", "fetch"):
            header = response.headers.get("content-security-policy", "")
            policy = dict(part.strip().partition(" ")[::2] for part in header.split(";"))
            # DRF's browsable API may use style attributes (see governance.middleware).
            api_html = urlsplit(response.url).path.startswith("/api/v1/")
            if (
                policy.get("script-src") != "'self'"
                or policy.get("style-src") != "'self'"
                or policy.get("default-src") != "'self'"
                or policy.get("object-src") != "'none'"
                or policy.get("frame-ancestors") != "'none'"
                or ("style-src-attr" in policy and not api_html)
            ):
                uncovered.append(f"{response.status} {response.url}: {header!r}")

    page.on("response", check_header)
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto(f"{live_server.url}/accounts/login/")  # signed out, too
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("admin-demo-pass")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/w/demo/")

    queue = ["/w/demo/", "/invitations/", "/api/docs/", "/api/v1/specs/", "/admin/"]
    seen_keys: set[str] = set()
    visited_names: set[str] = set()
    charts_drawn = 0
    while queue:
        path = queue.pop(0)
        key = url_key(path)
        if key in seen_keys:
            continue
        seen_keys.add(key)
        console.clear()
        response = page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        try:
            visited_names.add(resolve(urlsplit(path).path).view_name)
        except Resolver404:
            pass
        # A tombstone answers 410 on purpose; the browser logs that status as an error.
        expected = f"status of {response.status}"
        errors = [text for text in console if response.ok or expected not in text]
        problems += [f"{path}: console: {text}" for text in errors]
        problems += [f"{path}: {v}" for v in page.evaluate("window.__violations || []")]
        charts = page.locator(".chart[data-figure]")
        if charts.count():
            page.wait_for_function(
                "() => Array.from(document.querySelectorAll('.chart[data-figure]'))"
                ".every(c => c.querySelector('.main-svg'))"
            )
            charts_drawn += charts.count()
        if not path.startswith(("/w/demo/", "/invitations/")):
            continue
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            target = urlsplit(urljoin(live_server.url + path, href))
            local = target.path + (f"?{target.query}" if target.query else "")
            if f"{target.scheme}://{target.netloc}" == live_server.url and not SKIP_LINK.search(
                local
            ):
                queue.append(local)

    assert problems == []
    assert uncovered == []
    assert MUST_VISIT - visited_names == set()
    assert charts_drawn >= 20


def test_plotly_stylesheet_matches_the_plotly_served(browser):
    """plotly.js's injected rules are served as a file; after an upgrade of plotly this
    says which rules or which injected <style> ids changed."""
    source = Path(PlotlyJsFinder().find("vendor/plotly.min.js"))
    context = browser.new_context()
    page = context.new_page()
    try:
        page.set_content("<!doctype html><html><head></head><body></body></html>")
        page.add_script_tag(path=str(source))
        injected = page.evaluate("Array.from(document.querySelectorAll('style')).map(s => s.id)")
        rules = page.evaluate(
            "Array.from(document.getElementById('plotly.js-style-global').sheet.cssRules)"
            ".map(r => r.cssText)"
        )
        page.set_content("<!doctype html><html><head></head><body></body></html>")
        page.add_style_tag(path=str(settings.BASE_DIR / "static" / "vendor" / "plotly.css"))
        served = page.evaluate("Array.from(document.styleSheets[0].cssRules).map(r => r.cssText)")
    finally:
        context.close()
    assert served == rules
    include = (settings.BASE_DIR / "templates" / "includes" / "plotly_js.html").read_text()
    for style_id in injected:
        assert f'id="{style_id}"' in include


def test_a_delete_asks_first_without_inline_script(page, login, members, workspace):
    artifact = artifact_write(
        workspace=workspace, source=b"build log\n", run_id="run-c", command="make"
    )
    login("editor-a", PASSWORD)
    page.goto(f"{page.base_url}/w/{workspace.slug}/artifacts/{artifact.pk}/")
    form = page.locator("form[data-confirm]")
    assert form.get_attribute("onsubmit") is None
    questions = []

    def answer(dialog, accept):
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, accept=False))
    page.get_by_role("button", name="Delete content").click()
    assert questions == [
        "Delete this artifact? Its content is removed and every pointer to it will answer 410."
    ]
    assert page.get_by_role("button", name="Delete content").is_visible()
    artifact.refresh_from_db()
    assert artifact.gone_at is None
    page.once("dialog", lambda dialog: answer(dialog, accept=True))
    page.get_by_role("button", name="Delete content").click()
    page.wait_for_selector(".art-tombstone")
    assert Artifact.objects.get(pk=artifact.pk).gone_at is not None


def test_the_analytics_page_reloads_itself_when_its_computation_ends(
    page, login, members, workspace
):
    """The notice says the page refreshes when the computation is done; app.js does that
    (data-reload-when-done) where an inline <script> used to sit, doing nothing."""
    filters = AnalyticsFilters()
    job = job_create(
        workspace=workspace,
        kind=JOB_KIND,
        params={"key": filters.key, "data_version": workspace.data_version},
    )
    login("viewer-a")
    page.goto(f"{page.base_url}/w/{workspace.slug}/analytics/")
    notice = page.locator("#analytics-status [data-reload-when-done]")
    assert "This page refreshes when it is done." in notice.inner_text()
    assert page.locator("#analytics-status script").count() == 0
    with page.expect_navigation():  # a whole-page load, not a swap of the notice
        Job.objects.filter(pk=job.pk).update(
            status=JobStatus.FAILED, error="the database went away", finished_at=timezone.now()
        )
    alert = page.locator("#analytics-status").get_by_role("alert")
    assert "on the current traces failed" in alert.inner_text()
    assert page.locator("[data-reload-when-done]").count() == 0
