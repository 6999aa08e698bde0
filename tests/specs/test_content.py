"""Pure content rules: normalisation, fingerprints, validation, key suggestions and the diff."""

from specs.analysis.content import (
    Alternative,
    Item,
    check_items,
    fingerprint,
    normalize_text,
    suggest_key,
)
from specs.analysis.diff import diff_items, resolved_keys, word_diff


def item(key, text="text", kind="requirement", status="settled", **extra):
    return Item(key=key, kind=kind, text=text, status=status, **extra)


def test_normalisation_is_idempotent_and_unifies_line_breaks():
    raw = "  Cafe\u0301\r\nline two   \u2028\n\n\n\nlast\x00 \t"
    assert normalize_text(raw) == "Café\nline two\n\nlast"
    assert normalize_text(normalize_text(raw)) == normalize_text(raw)


def test_fingerprint_ignores_kind_interleaving_and_whitespace_but_not_order_within_a_kind():
    a = [item("r1"), item("d1", kind="decision"), item("r2")]
    b = [item("r1"), item("r2"), item("d1  ", kind="decision")]
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint([item("r1", text="text  \r\n")]) == fingerprint([item("r1")])
    assert fingerprint([item("r2"), item("r1")]) != fingerprint([item("r1"), item("r2")])
    assert fingerprint([item("r1")]) != fingerprint([item("r1", rationale="why")])
    assert fingerprint([item("r1")]) != fingerprint([item("r1", status="unresolved")])
    assert len(fingerprint([])) == 64


def test_check_items_names_index_field_and_reason():
    problems = check_items(
        [
            item("ok"),
            item("OK"),
            item("bad key"),
            Item(key="", kind="wish", text="", status="maybe"),
            item("q", status="unresolved", alternatives=(Alternative("a", ""), Alternative(""))),
        ]
    ).problems
    found = {(p.index, p.field, p.alternative) for p in problems}
    assert found == {
        (1, "key", None),
        (2, "key", None),
        (3, "key", None),
        (3, "kind", None),
        (3, "status", None),
        (3, "text", None),
        (4, "text", 1),
    }
    duplicate = next(p for p in problems if p.index == 1)
    assert duplicate.duplicate_of == 0
    submission = check_items(
        [item("q", status="unresolved", alternatives=(Alternative("a", ""),))], for_submission=True
    )
    assert [(p.field, p.alternative) for p in submission.problems] == [("evidence", 0)]
    assert "needs its evidence" in submission.problems[0].message
    assert [p.message for p in check_items([], for_submission=True).problems] == [
        "A version needs at least one item."
    ]


def test_suggest_key_is_short_ascii_and_unique():
    assert suggest_key("The public API must remain backward compatible") == (
        "public-api-remain-backward"
    )
    assert suggest_key("Überprüfe die Größe", taken=["uberprufe-die-grosse"]) == (
        "uberprufe-die-grosse-2"
    )
    assert suggest_key("🚀 !!!") == "item"
    assert suggest_key("the of and") == "the-of-and"


def test_diff_puts_every_key_in_exactly_one_category():
    before = [
        item("same"),
        item("edited", text="Keep raw uploads for 30 days"),
        item("dropped"),
        item("q-answered", kind="open_question", status="unresolved"),
        item("q-removed", kind="open_question", status="unresolved"),
        item("reopened"),
        item("q-still-open", kind="open_question", status="unresolved"),
        item("kind-changed"),
    ]
    after = [
        item("same"),
        item("edited", text="Keep raw uploads for 90 days"),
        item("q-answered", kind="decision", text="Use S3"),
        item("reopened", status="unresolved"),
        item("q-still-open", kind="open_question", status="unresolved", rationale="new note"),
        item("kind-changed", kind="constraint"),
        item("brand-new"),
    ]
    diff = diff_items(before, after)
    assert diff.keys("retained") == ["same"]
    assert diff.keys("changed") == ["edited", "kind-changed", "q-still-open"]
    assert diff.keys("added") == ["brand-new"]
    assert diff.keys("omitted") == ["dropped"]
    assert diff.keys("resolved") == ["q-answered", "q-removed"]
    assert diff.keys("marked_unresolved") == ["reopened"]
    assert resolved_keys(before, after) == ["q-answered", "q-removed"]
    by_key = {entry.key: entry for entry in diff.entries}
    assert by_key["edited"].fields == ("text",)
    assert by_key["kind-changed"].fields == ("kind",)
    assert by_key["q-removed"].removed
    summary = diff.as_summary()
    assert summary["changed"][0] == {
        "key": "edited",
        "before": item("edited", text="Keep raw uploads for 30 days").as_dict(),
        "after": item("edited", text="Keep raw uploads for 90 days").as_dict(),
        "fields": ["text"],
    }
    assert set(summary) == {
        "retained", "changed", "omitted", "added", "marked_unresolved", "resolved"
    }  # fmt: skip
    assert diff.counts == {
        "resolved": 2, "marked_unresolved": 1, "changed": 3, "added": 1, "omitted": 1,
        "retained": 1,
    }  # fmt: skip


def test_diff_against_nothing_is_all_added():
    diff = diff_items([], [item("a"), item("b")])
    assert diff.keys("added") == ["a", "b"] and diff.has_changes
    assert not diff_items([item("a")], [item("a")]).has_changes


def test_word_diff_marks_only_changed_words():
    ops = word_diff("Keep raw uploads for 30 days.", "Keep raw uploads for 90 days, then purge.")
    assert [(op.op, op.text) for op in ops] == [
        ("equal", "Keep raw uploads for "),
        ("delete", "30"),
        ("insert", "90"),
        ("equal", " days"),
        ("insert", ", then purge"),
        ("equal", "."),
    ]
    assert "".join(op.text for op in ops if op.op != "insert") == "Keep raw uploads for 30 days."
    assert word_diff("", "new") == (word_diff("", "new")[0],)


def test_an_open_question_without_alternatives_cannot_be_submitted():
    question = item("q", kind="open_question", status="unresolved")
    assert check_items([question]).problems == ()  # a draft may be work in progress
    problems = check_items([question], for_submission=True).problems
    assert [(p.index, p.field) for p in problems] == [(0, "alternatives")]
    assert problems[0].message.startswith("Open question 'q' needs at least one alternative")
    # An unresolved constraint ("latency budget still open") needs no alternatives.
    open_constraint = item("c", kind="constraint", status="unresolved")
    assert check_items([open_constraint], for_submission=True).problems == ()
