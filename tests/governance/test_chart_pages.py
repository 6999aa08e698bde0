"""Chromium over the demo workspace: every page with a chart. After the window is resized
(1920 → 1280 → 1600 → 1280) every drawing still fits inside its box, and at 1280 and 1920 no
label of a chart (ticks, annotations, titles, legend entries) runs into another."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from governance.management.commands.seed_demo import DEMO_SLUG, DEMO_USERS
from governance.models import Workspace
from qualification.contextfiles.models import Evaluation
from qualification.models import AssemblyAudit, OperatingLimit, Qualification
from traces.models import Run, Session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each chart's drawing (Plotly's root svg) and its box, measured in the page.
MEASURE = """() => Array.from(document.querySelectorAll('[data-figure]')).map(el => {
  const box = el.getBoundingClientRect();
  const svg = el.querySelector('.main-svg').getBoundingClientRect();
  return {id: el.id, box: [box.width, box.height], drawing: [svg.width, svg.height],
          clipped: el.scrollHeight > el.clientHeight + 1};
})"""

# Plotly redraws on the window's resize event: wait until every drawing has the width inside
# its box (the box's border excluded).
REDRAWN = """() => Array.from(document.querySelectorAll('[data-figure]')).every(el =>
  Math.abs(el.querySelector('.main-svg').getBoundingClientRect().width - el.clientWidth) <= 1)"""

# Pairs of texts in one chart whose boxes overlap or touch (closer than 1 px), and the legend's
# box against every other text. A tick label of one axis may meet one of another at a corner.
COLLISIONS = """() => {
  const near = (a, b) => a.left < b.right + 1 && b.left < a.right + 1
                         && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const kind = t => { const g = t.closest('g[class*="tick"]'); return g ? g.getAttribute('class') : 'text'; };
  const found = [];
  document.querySelectorAll('[data-figure]').forEach(el => {
    const texts = Array.from(el.querySelectorAll(
      'g[class*="tick"] > text, .annotation-text, .g-xtitle text, .g-ytitle text, ' +
      '[class^="g-x"][class$="title"] text, [class^="g-y"][class$="title"] text, ' +
      '.legendtext, .textpoint text, .gtitle'))
      .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0);
    const unique = Array.from(new Set(texts));
    for (let i = 0; i < unique.length; i++) {
      for (let j = i + 1; j < unique.length; j++) {
        const [a, b] = [unique[i], unique[j]];
        const ka = kind(a), kb = kind(b);
        if (ka !== 'text' && kb !== 'text' && ka !== kb) continue;
        if (a.closest('.legend') && b.closest('.legend')) continue;
        if (near(a.getBoundingClientRect(), b.getBoundingClientRect()))
          found.push([el.id, a.textContent, b.textContent]);
      }
    }
    const legend = el.querySelector('.legend .bg');
    if (legend) {
      const box = legend.getBoundingClientRect();
      unique.filter(t => !t.closest('.legend')).forEach(t => {
        if (near(box, t.getBoundingClientRect())) found.push([el.id, 'legend', t.textContent]);
      });
    }
  });
  return found;
}"""


@pytest.fixture
def demo_pages():
    """The demo workspace, and every page of it with a chart: {path: charts it must show}."""
    call_command("seed_demo", stdout=io.StringIO())
    workspace = Workspace.objects.get(slug=DEMO_SLUG)
    base = f"/w/{DEMO_SLUG}"
    pages = {f"{base}/qualification/sweeps/{q.pk}/": 5 for q in Qualification.objects.all()}
    pages |= {f"{base}/qualification/limits/{lim.pk}/": 0 for lim in OperatingLimit.objects.all()}
    pages[f"{base}/qualification/audits/{AssemblyAudit.objects.first().pk}/"] = 1
    analytics = {"": 3, "steps/": 1, "compactions/": 3, "coverage/": 1, "incidents/": 1,
                 "what-if/": 4, "post-compaction/": 1}  # fmt: skip
    pages |= {f"{base}/analytics/{path}": n for path, n in analytics.items()}
    pages[f"{base}/annotations/divergences/"] = 3
    run = Run.objects.filter(workspace=workspace).order_by("pk").first()
    pages[f"{base}/annotations/sessions/{run.session_id}/runs/{run.pk}/"] = 1
    session = Session.objects.filter(workspace=workspace).order_by("pk").first()
    pages[f"{base}/traces/sessions/{session.pk}/"] = 1
    pages[f"{base}/context-files/evaluations/{Evaluation.objects.first().pk}/"] = 1
    return pages


def open_charts(page, path: str, expected: int) -> int:
    page.goto(page.base_url + path)
    count = page.evaluate("document.querySelectorAll('[data-figure]').length")
    assert count >= expected, (path, count)
    page.wait_for_function(
        f"() => document.querySelectorAll('[data-figure] .main-svg').length >= {count}",
        timeout=20000,
    )
    return count


def test_every_chart_fits_its_box_after_resizes_and_reads_cleanly(
    page, login, demo_pages, screenshot
):
    """One test, so that the demo is seeded once (it takes a minute on a shared machine)."""
    login("reviewer", DEMO_USERS["reviewer"][1])
    checked = 0
    for path, expected in demo_pages.items():
        page.set_viewport_size({"width": 1920, "height": 1000})
        if not open_charts(page, path, expected):
            continue
        name = path.strip("/").replace("/", "-")
        assert page.evaluate(COLLISIONS) == [], (path, 1920)
        screenshot(f"charts-1920-{name}")
        heights = {c["id"]: c["drawing"][1] for c in page.evaluate(MEASURE)}
        for width in (1280, 1600, 1280):
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_function(REDRAWN)
            for chart in page.evaluate(MEASURE):
                (box_w, box_h), (draw_w, draw_h) = chart["box"], chart["drawing"]
                assert draw_h <= box_h + 1 and draw_w <= box_w + 1, (path, width, chart)
                assert not chart["clipped"], (path, width, chart)
                assert draw_h == heights[chart["id"]], (path, width, chart)  # nothing shrank
            checked += 1
        assert page.evaluate(COLLISIONS) == [], (path, 1280)
        screenshot(f"charts-1280-{name}")
        if "/sweeps/" in path:  # the decline curves keep their retention and retrieval panels
            assert max(heights.values()) > 600, heights
    assert checked >= 3 * 13
