"""Markdown import/export: crafted documents, line-numbered errors, and a round-trip property."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specs.analysis.content import (
    KINDS,
    STATUSES,
    Alternative,
    Item,
    canonical_items,
    fingerprint,
    normalize_text,
)
from specs.formats.markdown import (
    ExportHeader,
    MarkdownImportError,
    Source,
    SpecDocument,
    parse_markdown,
    render_markdown,
)


def roundtrip(document: SpecDocument) -> SpecDocument:
    result = parse_markdown(render_markdown(document, ExportHeader("slug", 4, "draft", 3)))
    assert result.declared_fingerprint == result.computed_fingerprint == fingerprint(document.items)
    return result.document


def canonical(document: SpecDocument) -> SpecDocument:
    return SpecDocument(document.title, tuple(canonical_items(document.items)), document.sources)


CRAFTED = SpecDocument(
    title="Zahlungs-API — Migration auf v2 ✓",
    items=(
        Item(
            "api-compat",
            "requirement",
            "The public API must remain backward compatible.\n- this line is text, not a bullet\n"
            "\\ starts with a backslash\n\n    indented code stays indented",
            rationale="Clients pin v1 for a year.\n  - nested bullet inside the rationale",
        ),
        Item(
            "q.storage",
            "open_question",
            "Where does raw tool output live?",
            status="unresolved",
            alternatives=(
                Alternative("S3-compatible object store", "Cheap at scale.\n- see ticket 12"),
                Alternative("PostgreSQL large objects", ""),
                Alternative("Local disk\nwith a second line", "Measured 3× faster in bench/"),
            ),
        ),
        Item("literal-marker", "decision", "(unresolved) is literal text in a settled decision"),
        Item("second-marker", "decision", "(settled) also literal"),
        Item("unicode", "definition", "Ünïcödé 🚀 — 上下文 — ‮RTL‬", rationale="ß ≠ ss"),
        Item("iface:v2", "interface", "POST /v2/charges takes {amount, currency}"),
        Item("req-2", "requirement", "[brackets] and `code` and **bold** survive"),
        Item("tbd-limit", "constraint", "Latency budget is still open.", status="unresolved"),
    ),
    sources=(
        Source("url", "https://tracker.example.org/issues/12", "Issue 12 — the decision"),
        Source("trace_session", "41", ""),
        Source("trace_run", "7", "the run that drifted"),
        Source("trace_divergence", "5", "where run 7 first went wrong"),
    ),
)


def test_crafted_document_round_trips_exactly():
    assert roundtrip(CRAFTED) == canonical(CRAFTED)


def test_export_is_readable_and_groups_items_by_kind():
    text = render_markdown(CRAFTED, ExportHeader("payments", 3, "authoritative", 2))
    assert text.startswith("# Zahlungs-API — Migration auf v2 ✓\n\n> Version 3 of `payments`")
    assert f"> Fingerprint: sha256:{fingerprint(CRAFTED.items)}\n" in text
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == [
        "## Requirements",
        "## Constraints",
        "## Definitions",
        "## Interfaces",
        "## Decisions",
        "## Open questions",
        "## Sources",
    ]
    assert "  \\- this line is text, not a bullet" in text
    assert "- [q.storage] (unresolved) Where does raw tool output live?" in text
    assert "  - Alternative: S3-compatible object store\n    - Evidence: Cheap at scale." in text
    assert "- [literal-marker] (settled) (unresolved) is literal text" in text
    assert "- trace-session:41\n" in text


def test_hand_written_document_with_lenient_forms():
    text = """\ufeff# Retention

Fingerprint lines outside '>' notes are not allowed, so this intro is wrapped:
"""
    with pytest.raises(MarkdownImportError) as caught:
        parse_markdown(text)
    assert [e.line for e in caught.value.errors] == [3]

    result = parse_markdown(
        "# Retention\r\n\r\n## requirement\r\n- Keep raw uploads for 30 days\r\n"
        "  - rationale: legal hold\r\n  - RATIONALE: second reason\r\n"
        "## Questions\r\n- [q1] (Unresolved) How long for artifacts?\r\n"
        "  - Alternative: 7 days\r\n    - Evidence: cost model\r\n    - Evidence: survey\r\n"
    )
    first, question = result.document.items
    assert first.key == "keep-raw-uploads-30" and first.kind == "requirement"
    assert first.rationale == "legal hold\nsecond reason"
    assert result.notices == ("line 4: no key given; using 'keep-raw-uploads-30'",)
    assert question.status == "unresolved" and question.kind == "open_question"
    assert question.alternatives == (Alternative("7 days", "cost model\nsurvey"),)
    assert result.declared_fingerprint is None and not result.matches_declared


def test_errors_name_every_bad_line():
    text = "\n".join(
        [
            "# T",
            "intro paragraph",  # 2
            "## Requirements",
            "- [ok] fine",
            "  - Foo: bar",  # 5
            "- [dup] one",
            "- [DUP] two",  # 7
            "- [bad key!] x",  # 8
            "## Nonsense",  # 9
            "## Open questions",
            "- [q] (unresolved) which?",
            "  - Alternative:",  # 12
            "## Sources",
            "- ftp://nope",  # 14
            "- trace-session:abc",  # 15
            "unindented continuation",  # 16
            "## Sources",
            "- trace-divergence:x1",  # 18
        ]
    )
    with pytest.raises(MarkdownImportError) as caught:
        parse_markdown(text)
    errors = {e.line: e.message for e in caught.value.errors}
    assert sorted(errors) == [2, 5, 7, 8, 9, 12, 14, 15, 16, 18]
    assert "Rationale" in errors[5]
    assert errors[7] == "key 'DUP' is already used on line 6; keys are unique (ignoring case)"
    assert "'bad key!' is not a valid key" in errors[8]
    assert "unknown section 'Nonsense'" in errors[9]
    assert errors[12] == "alternative 1: Describe the alternative."
    assert "trace-session:<id>" in errors[14]
    assert "numeric id" in errors[15]
    assert errors[18] == "'trace-divergence:x1' needs a numeric id, e.g. trace-divergence:42"


def test_empty_document_says_what_to_write():
    with pytest.raises(MarkdownImportError) as caught:
        parse_markdown("# Only a title\n")
    assert "no items found" in str(caught.value)


def test_edited_export_imports_with_a_different_fingerprint():
    text = render_markdown(CRAFTED)
    edited = text.replace("backward compatible", "backward compatible until 2027")
    result = parse_markdown(edited)
    assert result.declared_fingerprint == fingerprint(CRAFTED.items)
    assert result.computed_fingerprint != result.declared_fingerprint
    assert not result.matches_declared


# --- property: any valid spec survives export then import ---------------------

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=80
)
_tricky = st.sampled_from(
    [
        "- looks like a bullet",
        "\\ backslash",
        "(unresolved) marker",
        "(settled)",
        "  - Rationale: fake",
        "## Heading",
        "# Title",
        "> quote",
        "[KEY] text",
        "\t tab",
        "- [x] item",
        "    - Evidence: fake",
    ]
)
_line = st.one_of(_text, _tricky)
_multiline = st.lists(_line, min_size=1, max_size=4).map("\n".join)
_nonempty = _multiline.map(normalize_text).map(lambda text: text or "text")
_key = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True)


@st.composite
def documents(draw):
    keys = draw(st.lists(_key, min_size=1, max_size=8, unique_by=str.casefold))
    items = []
    for key in keys:
        status = draw(st.sampled_from(STATUSES))
        alternatives = tuple(
            Alternative(draw(_nonempty), draw(_multiline.map(normalize_text)))
            for _ in range(draw(st.integers(0, 3)))
        )
        items.append(
            Item(
                key=key,
                kind=draw(st.sampled_from(KINDS)),
                text=draw(_nonempty),
                rationale=draw(st.one_of(st.just(""), _multiline.map(normalize_text))),
                status=status,
                alternatives=alternatives,
            )
        )
    sources = draw(
        st.lists(
            st.one_of(
                st.builds(
                    Source,
                    st.just("url"),
                    st.from_regex(r"https://[a-z]{1,10}\.org/[a-z0-9/._-]{0,20}", fullmatch=True),
                    st.one_of(
                        st.just(""),
                        st.from_regex(r"[A-Za-z][A-Za-z0-9 ]{0,20}[a-z]", fullmatch=True),
                    ),
                ),
                st.builds(
                    Source, st.just("trace_session"), st.integers(1, 10**6).map(str), st.just("")
                ),
                st.builds(
                    Source, st.just("trace_run"), st.integers(1, 10**6).map(str), st.just("run")
                ),
                st.builds(
                    Source,
                    st.just("trace_divergence"),
                    st.integers(1, 10**6).map(str),
                    st.just(""),
                ),
            ),
            max_size=3,
        )
    )
    title = " ".join(normalize_text(draw(_text)).split()) or "Untitled"
    return SpecDocument(title=title, items=tuple(items), sources=tuple(sources))


@settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(documents())
def test_any_spec_round_trips_with_its_fingerprint(document):
    assert roundtrip(document) == canonical(document)
    # Rendering is deterministic: a second export of the import is byte-identical.
    once = render_markdown(document)
    assert render_markdown(parse_markdown(once).document) == once
