"""Splitting context files into instructions and guessing categories. No database."""

from qualification.contextfiles.analysis.parsing import (
    Category,
    categorise,
    estimate_tokens,
    parse_context_file,
)
from tests.contextfiles.conftest import AGENTS_MD


def test_bullets_paragraphs_and_code_under_headings():
    parsed = parse_context_file(AGENTS_MD)
    texts = [i.text for i in parsed.instructions]
    assert texts[0] == "This repository has 3 services. Follow these 6 rules."
    assert texts[1] == "- Run `make test` before every commit."
    assert parsed.instructions[0].section == ""  # the single opening H1 is the title
    assert parsed.instructions[1].section == "Build and test"
    code = next(i for i in parsed.instructions if i.kind == "code")
    assert code.text.startswith("```bash") and "$ pytest tests/unit" in code.text
    assert (code.line_start, code.line_end) == (9, 12)
    assert len(parsed.instructions) == 15
    assert [s.title for s in parsed.sections] == [
        "AGENTS.md",
        "Build and test",
        "Architecture",
        "Rules",
        "Style",
    ]
    assert [s.path for s in parsed.sections][:2] == ["", "Build and test"]


def test_line_numbers_point_at_the_source():
    parsed = parse_context_file(AGENTS_MD)
    lines = AGENTS_MD.split("\n")
    for instruction in parsed.instructions:
        assert lines[instruction.line_start - 1].strip() in instruction.text
        assert instruction.line_end >= instruction.line_start


def test_lead_in_labels_its_list_and_group_labels_nest():
    text = "## Rules\nFollow these 3 rules:\n- one thing\n- two things\n- Database:\n  - never drop columns\n  - always migrate\n"
    parsed = parse_context_file(text)
    assert [i.text.strip("- ") for i in parsed.instructions] == [
        "one thing",
        "two things",
        "never drop columns",
        "always migrate",
    ]
    assert parsed.instructions[2].section == "Rules › Follow these 3 rules › Database"
    assert parsed.lead_ins[0].item_count == 4


def test_paragraph_ending_with_a_colon_merges_with_its_code_block():
    parsed = parse_context_file("To run the tests:\n\n```\nmake test\n```\n")
    assert len(parsed.instructions) == 1
    assert parsed.instructions[0].category is Category.BUILD_TEST


def test_table_rows_are_instructions_and_html_comments_are_not():
    text = "| Command | Purpose |\n|---|---|\n| `make lint` | lint |\n| `make test` | test |\n\n<!-- a note -->\n"
    parsed = parse_context_file(text)
    assert [i.kind for i in parsed.instructions] == ["table_row", "table_row"]


def test_generated_sections_are_found_with_their_attributes():
    parsed = parse_context_file(AGENTS_MD)
    (section,) = parsed.generated
    assert section.source == "docs/api.md" and section.fingerprint == "abc1234"
    assert section.line_end == section.line_start + 2


def test_categories_are_guessed_with_reasons():
    assert categorise("- Run `make test` before every commit.")[0] is Category.BUILD_TEST
    category, basis = categorise("- Never edit files in `gen/` by hand.", section="Rules")
    assert category is Category.FAILURE_PREVENTION and "never" in basis
    assert (
        categorise("`api/` contains the HTTP handlers.", section="Architecture")[0]
        is Category.ARCHITECTURE
    )
    assert (
        categorise("Prefer snake_case for function names.", section="Style")[0]
        is Category.CONVENTION
    )
    assert categorise("Hello there.") == (Category.OTHER, "no category signal")


def test_token_estimate_and_crlf():
    assert estimate_tokens("abcd" * 10) == 10
    parsed = parse_context_file("- one\r\n- two\r\n")
    assert [i.line_start for i in parsed.instructions] == [1, 2]


def test_several_top_level_headings_stay_in_the_path():
    parsed = parse_context_file("# Backend\n- run make\n# Frontend\n- run pnpm\n")
    assert [i.section for i in parsed.instructions] == ["Backend", "Frontend"]


def test_plain_text_files_still_parse():
    parsed = parse_context_file("Always write tests.\n\nNever push to main.\n")
    assert len(parsed.instructions) == 2
