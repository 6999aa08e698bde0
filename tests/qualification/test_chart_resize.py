"""Chromium: after the window is resized, every chart's drawing still fits inside its box."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each chart's drawing (Plotly's root svg) and its box, measured in the page.
MEASURE = """() => Array.from(document.querySelectorAll('[data-figure]')).map(el => {
  const box = el.getBoundingClientRect();
  const svg = el.querySelector('.main-svg').getBoundingClientRect();
  return {id: el.id, box: [box.width, box.height], drawing: [svg.width, svg.height],
          clipped: el.scrollHeight > el.clientHeight + 1};
})"""


def test_sweep_charts_fit_their_boxes_after_resizes(page, login, loaded_qualification, screenshot):
    login("editor-a")
    page.set_viewport_size({"width": 1920, "height": 1000})
    page.goto(f"{page.base_url}/w/team-a/qualification/sweeps/{loaded_qualification.pk}/")
    page.wait_for_function(
        "document.querySelectorAll('[data-figure] .main-svg').length >= 4", timeout=20000
    )
    tallest = max(chart["drawing"][1] for chart in page.evaluate(MEASURE))
    assert tallest > 600  # the decline curves: retention and retrieval panels included
    for width in (1280, 1600, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(400)  # Plotly redraws on the window's resize event
        charts = page.evaluate(MEASURE)
        assert len(charts) >= 4
        for chart in charts:
            (box_w, box_h), (draw_w, draw_h) = chart["box"], chart["drawing"]
            assert draw_h <= box_h + 1 and draw_w <= box_w + 1, (width, chart)
            assert not chart["clipped"], (width, chart)
        assert max(chart["drawing"][1] for chart in charts) == tallest
    screenshot("sweep-after-resize")


# Every legend's box against every subplot title, annotation and axis title in its chart.
OVERLAPS = """() => {
  const hit = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const found = [];
  document.querySelectorAll('[data-figure]').forEach(el => {
    const legend = el.querySelector('.legend');
    if (!legend) return;
    const box = legend.getBoundingClientRect();
    el.querySelectorAll('.annotation-text, .g-xtitle, .g-ytitle, .g-x2title, .g-y2title, .gtitle').forEach(t => {
      if (t.textContent.trim() && hit(box, t.getBoundingClientRect())) found.push([el.id, t.textContent]);
    });
  });
  return found;
}"""


def test_sweep_chart_legends_overlap_no_title(page, login, loaded_qualification):
    login("editor-a")
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{page.base_url}/w/team-a/qualification/sweeps/{loaded_qualification.pk}/")
        page.wait_for_function(
            "document.querySelectorAll('[data-figure] .main-svg').length >= 4", timeout=20000
        )
        assert page.evaluate(OVERLAPS) == [], width
