"""Shared chart conventions: log-axis ticks and token tick formats read as numfmt writes."""

import numfmt
from governance.charts import TOKEN_AXIS, log_axis
from qualification.charts import stratum_axis, stratum_labels


def test_log_axis_ticks_are_whole_steps_labelled_like_the_pages():
    axis = log_axis([88, 1950], numfmt.ratio)
    assert axis["type"] == "log"
    assert axis["ticktext"] == ["100×", "200×", "500×", "1,000×", "2,000×"]
    tokens = log_axis([25_000, 425_000])
    assert tokens["ticktext"] == ["30k", "50k", "70k", "100k", "150k", "200k", "300k"]
    assert log_axis([1, 331], numfmt.count)["ticktext"] == ["1", "3", "10", "30", "100", "300"]
    many = log_axis([1_000, 5e9])  # seven decades: one tick each, not 1-2-5
    assert many["ticktext"] == ["1k", "10k", "100k", "1M", "10M", "100M", "1B"]
    assert log_axis([]) == {"type": "log"} and log_axis([0, None]) == {"type": "log"}


def test_token_axes_use_the_d3_form_of_numfmt_tokens():
    assert TOKEN_AXIS["tickformat"] == numfmt.TOKENS_D3 == ".3~s"


def test_close_strata_take_their_label_onto_a_second_line():
    strata = [8000, 16000, 32000, 64000, 128000, 200000]
    assert stratum_labels(strata) == ["8k", "16k", "32k", "64k", "128k", "<br>200k"]
    assert stratum_labels([8000, 16000, 32000]) == ["8k", "16k", "32k"]
    # Three close together: alternate lines, never two lowered in a row.
    assert stratum_labels([100_000, 120_000, 140_000]) == ["100k", "<br>120k", "140k"]
    assert stratum_axis([131072, 8192])["ticktext"] == ["8k", "128k"]
