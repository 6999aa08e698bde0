"""The before/after compaction chart is binned on the server on shared edges, and keeps every
compaction: the bar heights sum to the section's counts."""

import numpy as np

from traces.analytics import charts


def test_compaction_histogram_counts_every_value_on_shared_bins():
    rng = np.random.default_rng(7)
    pre = rng.normal(180_000, 9_000, 25_000).round().tolist()
    post = rng.normal(60_000, 4_000, 24_000).round().tolist()
    fig = charts.compactions({"pre": pre, "post": post, "n_pre": len(pre), "n_post": len(post)})
    before, after = fig["data"]
    assert before["type"] == after["type"] == "bar"
    assert before["x"] == after["x"] and len(before["x"]) <= 60
    assert sum(before["y"]) == 25_000 and sum(after["y"]) == 24_000
    assert before["name"] == "before (n = 25000)"
    assert len(str(fig)) < 20_000  # bins, not the 49,000 raw values


def test_compaction_histogram_of_one_value_and_of_none():
    one = charts.compactions({"pre": [150_000], "post": [], "n_pre": 1, "n_post": 0})
    assert sum(one["data"][0]["y"]) == 1 and sum(one["data"][1]["y"]) == 0
    empty = charts.compactions({"pre": [], "post": [], "n_pre": 0, "n_post": 0})
    assert sum(empty["data"][0]["y"]) == 0
