"""Chromium at 1280 px: the wide lists fit the window, long ids show short, and a table that
must scroll does so inside its wrapper with its first column kept in view."""

import hashlib
import random
import uuid

import pytest

from governance.models import Membership
from governance.services import audit_record
from qualification import services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The page, every table wrapper (does the table fit it?), and every short id and its cell.
MEASURE = """() => {
  const lines = el => {
    const style = getComputedStyle(el);
    const inner = el.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    return inner / parseFloat(style.lineHeight);
  };
  return {
    page: document.documentElement.scrollWidth, window: window.innerWidth,
    wraps: Array.from(document.querySelectorAll('.table-wrap')).map(w =>
      ({inside: w.clientWidth, table: w.querySelector('table').scrollWidth})),
    ids: Array.from(document.querySelectorAll('.short-id')).map(s => ({
      shown: s.getBoundingClientRect().width, title: s.title, text: s.textContent,
      ch: (() => { const probe = document.createElement('span'); probe.className = 'short-id';
                   probe.style.maxWidth = 'none'; probe.textContent = '0'; s.parentNode.appendChild(probe);
                   const w = probe.getBoundingClientRect().width; probe.remove(); return w; })(),
      cellLines: lines(s.closest('td'))})),
  };
}"""


@pytest.fixture
def wide_lists(loaded_qualification, members, named_sessions, workspace):
    """A limit with budget audits of long run ids, and audit events with long hashes."""
    limit = services.operating_limit_propose(
        qualification=loaded_qualification, actor=members["editor"],
        values={"source_limits": {"system": 2000, "retrieved_files": 8000}},
    )  # fmt: skip
    limit = services.operating_limit_approve(
        limit=limit, reviewer=members["reviewer"],
        membership=Membership.objects.get(user=members["reviewer"], workspace=workspace),
        confirmed=True,
    )  # fmt: skip
    run_ids = [str(uuid.UUID(int=random.Random(index).getrandbits(128))) for index in range(4)]
    for index, run_id in enumerate(run_ids):
        services.budget_check_record(
            limit=limit, allocation={"system": 1800, "retrieved_files": 7000 + 800 * index},
            stage="", run_ref=run_id, source="web", actor=members["editor"],
            omissions=[{"decision": "truncated", "note": "big.py"}],
        )  # fmt: skip
    for index in range(3):
        digest = hashlib.sha256(str(index).encode()).hexdigest()
        audit_record(
            workspace=workspace, actor=members["admin"], action="artifact.create",
            data={"sha256": digest * 2, "run_id": run_ids[0], "name": f"file-{index}.log"},
        )  # fmt: skip
    return {"sessions": named_sessions, "runs": run_ids}


PAGES = {
    "sessions": ("/w/team-a/traces/", True),
    "budget audits": ("/w/team-a/qualification/audits/", False),
    "qualifications": ("/w/team-a/qualification/sweeps/", True),
    "limits": ("/w/team-a/qualification/limits/", True),
    "audit log": ("/w/team-a/settings/audit/", True),
}


def test_lists_fit_1280_and_show_short_ids(page, login, wide_lists, screenshot):
    login("admin-a")
    page.set_viewport_size({"width": 1280, "height": 900})
    shown = {}
    for name, (path, must_fit) in PAGES.items():
        page.goto(page.base_url + path)
        seen = page.evaluate(MEASURE)
        screenshot(f"list-1280-{name.replace(' ', '-')}")
        assert seen["page"] <= seen["window"], (name, seen["page"])
        assert seen["wraps"], name  # every one of these lists is in a wrapper
        if must_fit:  # no column hidden to the right
            assert all(w["table"] <= w["inside"] for w in seen["wraps"]), (name, seen["wraps"])
        for short in seen["ids"]:
            assert short["text"] == short["title"] and len(short["title"]) > 12
            assert short["shown"] <= 8 * short["ch"] + 1, (name, short)  # the first 8 characters
            assert short["cellLines"] <= 2.05, (name, short)  # no id wraps onto more lines
        shown[name] = {short["title"] for short in seen["ids"]}
    assert {s.external_id for s in wide_lists["sessions"]} <= shown["sessions"]
    assert set(wide_lists["runs"]) <= shown["budget audits"]


def test_a_list_that_scrolls_keeps_its_first_column_in_view(page, login, wide_lists):
    login("editor-a")
    page.set_viewport_size({"width": 1000, "height": 900})  # narrow enough that it must scroll
    page.goto(page.base_url + PAGES["budget audits"][0])
    wrap = page.locator(".table-wrap").first
    assert wrap.evaluate("w => w.scrollWidth > w.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    first = page.locator(".table-wrap tbody tr:first-child > :first-child").first
    left = first.bounding_box()["x"]
    wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
    page.wait_for_function("() => document.querySelector('.table-wrap').scrollLeft > 0")
    assert first.bounding_box()["x"] == pytest.approx(left, abs=1)
    last = page.locator(".table-wrap thead th").last.bounding_box()
    box = wrap.bounding_box()
    assert last["x"] + last["width"] <= box["x"] + box["width"] + 1  # the last column in view
