"""The one number formatter: each kind of number on its edge cases."""

import math

import pytest

import numfmt

NOTHING = [None, "", float("nan"), math.inf, "not a number", True]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (999, "999"),
        (999.4, "999"),
        (999.6, "1k"),  # rounds to 1,000
        (1000, "1k"),
        (1500, "1.5k"),
        (12_000, "12k"),
        (12_345, "12.3k"),
        (99_999, "100k"),
        (128_000, "128k"),
        (131_072, "128k"),  # a whole multiple of 1,024: binary units, as windows are named
        (8192, "8k"),
        (232_400, "232k"),
        (999_999, "1M"),  # not "1000k"
        (1_000_000, "1M"),
        (1_048_576, "1M"),
        (1_370_000, "1.37M"),
        (1_368_190_000, "1.37B"),  # was "1368.19M"
        (-12_345, "−12.3k"),
        (-5, "−5"),
        ("4096", "4k"),
    ],
)
def test_tokens(value, text):
    assert numfmt.tokens(value) == text


@pytest.mark.parametrize("value", NOTHING)
def test_nothing_reads_as_a_dash_in_every_kind(value):
    for kind in (numfmt.tokens, numfmt.count, numfmt.usd, numfmt.ratio, numfmt.percent,
                 numfmt.signed_percent, numfmt.points, numfmt.number, numfmt.signed,
                 numfmt.doublings):  # fmt: skip
        assert kind(value) == "–", (kind, value)


def test_counts_are_exact_with_separators():
    assert [numfmt.count(v) for v in (0, 999, 1000, 999_999, 1e6, -12_000)] == [
        "0", "999", "1,000", "999,999", "1,000,000", "−12,000",
    ]  # fmt: skip


def test_costs():
    assert [numfmt.usd(v) for v in (0, 4.123, 1368.19, 0.5, 0.0412, 0.000412, 1e-9, -3)] == [
        "$0.00", "$4.12", "$1,368.19", "$0.50", "$0.0412", "$0.000412", "$0.00", "−$3.00",
    ]  # fmt: skip


def test_ratios_percentages_and_points():
    assert [numfmt.ratio(v) for v in (2.3712, 12.54, 1368.2, 0, 0.6439)] == [
        "2.37×", "12.5×", "1,368×", "0×", "0.644×",
    ]  # fmt: skip
    assert [numfmt.percent(v) for v in (0.4189, 0, 1, -0.0621, -0.00001)] == [
        "41.9%", "0.0%", "100.0%", "−6.2%", "0.0%",
    ]  # fmt: skip
    assert numfmt.percent(0.4189, 0) == "42%"
    assert [numfmt.signed_percent(v) for v in (0.12, -0.05, 0)] == ["+12%", "−5%", "0%"]
    assert [numfmt.points(v) for v in (0.0621, -0.119, 0)] == ["+6.2 pp", "−11.9 pp", "0.0 pp"]


def test_other_floats_have_bounded_significant_figures():
    assert [numfmt.number(v) for v in (0.643856, -0.643856, 2.5311, 1234.6, 0.000123456, 0)] == [
        "0.644", "−0.644", "2.53", "1,235", "0.000123", "0",
    ]  # fmt: skip
    assert [numfmt.doublings(v) for v in (-0.643856, 1, -1, 2, 0, 1e-12)] == [
        "−0.64 doublings", "+1 doubling", "−1 doubling", "+2 doublings", "no change",
        "no change",
    ]  # fmt: skip


def test_negative_numbers_use_the_minus_sign_plotly_uses():
    texts = [numfmt.tokens(-1), numfmt.count(-1), numfmt.ratio(-1), numfmt.number(-0.5)]
    assert all(text.startswith("\u2212") for text in texts)
    assert not any("-" in text for text in texts)


def test_the_formatter_imports_no_django():
    import subprocess
    import sys

    code = "import sys, numfmt; sys.exit(any(m.startswith('django') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
