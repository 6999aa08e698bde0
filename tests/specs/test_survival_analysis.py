"""The survival comparison on its own: the planted summary, the verbatim facts, the threshold,
and generated specs checked against a reference built independently of the comparison."""

import random

import pytest

from specs.analysis import survival
from specs.analysis.survival import THRESHOLD, AuditItem, audit, identifiers, numbers
from tests.specs.survival_planted import KEPT, LOST, PLANTED_ITEMS, PLANTED_SUMMARY


def settled(items):
    return [AuditItem(i.key, i.text) for i in items if i.status == "settled"]


def test_planted_summary_keeps_three_and_loses_two_one_by_its_number():
    verdicts = {v.key: v for v in audit(settled(PLANTED_ITEMS), PLANTED_SUMMARY)}
    assert set(verdicts) == KEPT | LOST  # the open question is not audited
    assert {k for k, v in verdicts.items() if v.kept} == KEPT
    assert {k for k, v in verdicts.items() if not v.kept} == LOST
    number = verdicts["limit.operating"]
    assert number.reason == "number 115000 missing"
    assert number.missing == ("number 115000",)
    assert number.score >= THRESHOLD  # its words survived; the number did not
    theme = verdicts["ui.theme"]
    assert theme.missing == () and theme.score == 0
    assert theme.reason == "0 of 8 words found (0%), below 60%"
    retries = verdicts["upload.retries"]
    assert retries.facts == ("3", "MAX_RETRIES")
    assert retries.reason.endswith("; 2 verbatim facts present")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("115,000 tokens and 3.5 s", ["115000", "3.5"]),
        ("90% of 128K, version 1.2.3, on 2026-12-03.", ["90%", "128k", "1.2.3", "2026-12-03"]),
        ("v2 and gpt-4o and MAX_RETRIES_3 hold no bare number", []),
        ("1,5 is not a thousands group; 1,500 is", ["1,5", "1500"]),
    ],
)
def test_numbers(text, expected):
    assert numbers(text) == expected


def test_identifiers():
    text = (
        "See e.g. `retry()` in src/app.py, settings.json, --dry-run, gpt-4o, camelCase, "
        "MAX_RETRIES, ~/x/y, ./run.sh, std::vector; not well-known, not RFC words MUST."
    )
    assert identifiers(text) == [
        "retry()", "src/app.py", "settings.json", "--dry-run", "gpt-4o", "camelCase",
        "MAX_RETRIES", "~/x/y", "./run.sh", "std::vector",
    ]  # fmt: skip


def test_identifier_must_match_verbatim_and_whole():
    item = [AuditItem("k", "Set MAX_RETRIES in config/app.toml")]
    assert not audit(item, "set max_retries in config/app.toml")[0].kept
    assert not audit(item, "Set MAX_RETRIES_V2 in config/app.toml")[0].kept
    kept = audit(item, "Set `MAX_RETRIES` in (config/app.toml).")[0]
    assert kept.kept and kept.score == 1


def test_the_key_alone_keeps_an_item_whose_facts_are_present():
    item = [AuditItem("REQ-7", "Deploys happen only from the release branch after review.")]
    assert audit(item, "Per req-7 we deploy from release.")[0].kept
    assert not audit(item, "Per REQ-70 we deploy from release.")[0].kept


def test_threshold_is_inclusive_and_checked():
    # Five content words; three found = 60%.
    item = [AuditItem("k", "alpha bravo charlie delta echo")]
    assert audit(item, "alpha bravo charlie")[0].kept
    assert not audit(item, "alpha bravo")[0].kept
    assert audit(item, "alpha bravo", threshold=0.4)[0].kept
    with pytest.raises(ValueError, match="threshold"):
        audit(item, "x", threshold=0)


def test_plural_case_punctuation_and_unicode_do_not_matter():
    item = [AuditItem("k", "Reviewers approve High-Consequence versions.")]
    assert audit(item, "reviewer APPROVES high consequence version")[0].score == 1
    assert audit(item, "Ｒｅｖｉｅｗｅｒｓ approve high-consequence versions")[0].kept


VOCABULARY = [a + b + c for a in ("ba", "ke", "lo", "mi", "nu") for b in ("dra", "ste", "pli", "vo") for c in ("rn", "sk", "lt", "mp", "nd")]  # fmt: skip


def _generated(rng: random.Random, n_items: int):
    """Items with disjoint vocabularies, some with a number and an identifier; a summary that
    copies a chosen subset whole, copies another subset with its number changed, and mentions
    nothing of the rest. The expected verdicts come from that construction alone."""
    words = rng.sample(VOCABULARY, n_items * 6)
    items, parts, expected = [], [], {}
    for i in range(n_items):
        own = words[i * 6 : i * 6 + 6]
        number = str(rng.randint(10, 99_999)) if rng.random() < 0.5 else None
        ident = f"CONF_{i}_{rng.randint(0, 9)}" if rng.random() < 0.5 else None
        text = " ".join(own[:4] + ([number] if number else []) + ([ident] if ident else []))
        key = f"item-{i}"
        items.append(AuditItem(key, text + "."))
        fate = rng.choice(
            ["whole", "changed", "absent", "absent"] if number else ["whole", "absent"]
        )
        if fate == "whole":
            parts.append(text)
            expected[key] = (True, ())
        elif fate == "changed":
            parts.append(text.replace(number, str(int(number) + 1)))
            expected[key] = (False, (f"number {number}",))
        else:
            facts = ([f"number {number}"] if number else []) + (
                [f"identifier {ident}"] if ident else []
            )
            expected[key] = (False, tuple(facts))
    rng.shuffle(parts)
    filler = "Work so far"
    return items, f"{filler}. " + ". ".join(parts) + ".", expected


@pytest.mark.parametrize("seed", range(40))
def test_generated_specs_match_the_reference(seed):
    rng = random.Random(seed)
    items, summary, expected = _generated(rng, rng.randint(1, 12))
    verdicts = audit(items, summary)
    assert [v.key for v in verdicts] == [i.key for i in items]
    assert {v.key: (v.kept, v.missing) for v in verdicts} == expected
    for v in verdicts:
        if v.kept:
            assert v.score == 1
        elif v.missing:
            assert v.reason == ", ".join(v.missing) + " missing"
        else:
            assert v.score == 0 and v.reason.endswith("below 60%")


def test_method_and_threshold_are_what_the_docs_say():
    assert survival.METHOD == "survival@1"
    assert survival.THRESHOLD == 0.6
