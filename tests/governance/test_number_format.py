"""Chromium: the pages the reviewer named show numbers in the one format of `numfmt`: tokens as
'12k' / '1.37M' (never '16K' beside '12,000'), doublings to two decimals, ratios with '×',
and chart ticks written the same way as the tables beside them."""

from __future__ import annotations

import io
import re

import pytest

from qualification import demo
from qualification.models import Qualification

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOKENS = re.compile(r"^−?\d{1,3}(\.\d{1,2})?[kMB]?$")  # numfmt.tokens, and nothing else
UPPER_K = re.compile(r"\d(\.\d+)?K\b")
LONG_DOUBLINGS = re.compile(r"\d\.\d{3,} doubling")


def cells(page, selector: str, column: int) -> list[str]:
    return page.locator(f"{selector} tbody tr td:nth-child({column})").all_inner_texts()


@pytest.fixture
def seeded(workspace, members, named_sessions):
    """The demo's qualifications and limits in team-a, and four ingested sessions."""
    demo.seed(workspace=workspace, users=members, stdout=io.StringIO())
    return Qualification.objects.filter(workspace=workspace).order_by("pk").last()


def test_named_pages_show_one_number_format(page, login, seeded, screenshot):
    login("reviewer-a")
    page.set_viewport_size({"width": 1280, "height": 900})

    page.goto(f"{page.base_url}/w/team-a/qualification/limits/")
    limits = [cells(page, ".table-wrap table", n) for n in (3, 4, 5)]  # max, assembly, reserve
    assert all(limits) and all(TOKENS.match(t) for column in limits for t in column), limits
    screenshot("numbers-limits")

    page.goto(f"{page.base_url}/w/team-a/qualification/sweeps/{seeded.pk}/")
    page.wait_for_function("() => document.querySelectorAll('[data-figure] .main-svg').length >= 5")
    text = page.locator("main").inner_text()
    assert not UPPER_K.search(text), UPPER_K.search(text)
    shifts = page.locator("#shift-h + table").inner_text()
    assert re.search(r"−0\.64 doublings", shifts) and not LONG_DOUBLINGS.search(shifts), shifts
    ticks = page.locator("#decline-curves .xtick text").all_text_contents()
    assert ticks and all(TOKENS.match(t.strip()) for t in ticks), ticks  # "200k", not "200K"
    assert page.get_by_test_id("proposed-limit").inner_text() == "16k"
    costs = [c.strip() for c in page.locator("td").all_text_contents() if "$" in c]
    assert costs and all(re.match(r"^\$\d[\d,]*\.\d{2,}$", c) for c in costs), costs
    screenshot("numbers-sweep")

    page.goto(f"{page.base_url}/w/team-a/traces/")
    for column in (8, 9):  # compactions, max context
        values = cells(page, ".table-wrap table", column)
        assert values and all(TOKENS.match(v) for v in values), (column, values)
    # One tokens column: "in · out" over "cache write · read" (the list fits 1280 px).
    tokens = [cell.split() for cell in cells(page, ".table-wrap table", 10)]
    assert tokens and all(len(parts) == 6 for parts in tokens), tokens
    values = [v for parts in tokens for v in parts if v != "·"]
    assert len(values) == 4 * len(tokens) and all(TOKENS.match(v) for v in values), values

    page.goto(f"{page.base_url}/w/team-a/analytics/what-if/?compare_low=100000&compare_high=600000")
    ratios = page.locator("table.compact tbody td").all_inner_texts()
    # Three significant figures at most: "1.66×", "0.753×", never "1.661×".
    too_long = re.compile(r"[1-9]\.\d{3}×|0\.\d{4,}×")
    assert "1.66×" in ratios and not any(too_long.search(r) for r in ratios), ratios
    ticks = page.locator("#what-if-chart .xtick text").all_text_contents()
    assert "200k" in ticks and not any("M" in t and "." in t for t in ticks), ticks  # not 0.2M
