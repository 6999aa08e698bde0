"""Drift checks on crafted files. No database."""

from datetime import UTC, date, datetime

from qualification.contextfiles.analysis import drift
from qualification.contextfiles.analysis.parsing import parse_context_file
from qualification.contextfiles.formats.listing import read_text_listing
from tests.contextfiles.conftest import AGENTS_MD

LISTING = "\n".join(
    [
        "100644 blob " + "f" * 40 + "\tdocs/api.md",
        "100644 blob " + "b" * 40 + "\tapi/handlers.py",
        "100644 blob " + "c" * 40 + "\tservices/billing/main.go",
        "100644 blob " + "c" * 40 + "\tservices/search/main.go",
        "100644 blob " + "d" * 40 + "\tgen/client.py",
        "100644 blob " + "e" * 40 + "\ttests/unit/test_x.py",
    ]
)


def by_check(findings, name):
    return [f for f in findings if f.check == name]


def test_claimed_counts_against_sections_lists_and_repository_folders():
    parsed = parse_context_file(AGENTS_MD)
    findings = drift.check_counts(parsed, read_text_listing(LISTING))
    messages = {f.message for f in findings if f.severity == "error"}
    assert "Claims “3 services” but the repository folder `services/` has 2." in messages
    assert "Claims “6 rules” but the section “Rules” has 5." in messages


def test_three_inconsistent_counts_are_reported_together():
    text = "# Skills\nThis library has 12 skills.\n\n## Index\nAll 14 skills:\n- a\n- b\n\nSee the 13 skills above.\n"
    findings = drift.check_counts(parse_context_file(text))
    inconsistent = [f for f in findings if f.severity == "warning"]
    assert len(inconsistent) == 1
    assert inconsistent[0].data["claims"] == [[12, 2], [14, 5], [13, 9]]
    assert "3 different counts of skills" in inconsistent[0].message
    assert any(
        f.data.get("counted_in") == "the list that follows" and f.data["actual"] == 2
        for f in findings
    )


def test_approximate_and_correct_counts_are_not_findings():
    text = "## Rules\nThere are about 40 rules below.\nThese 2 rules:\n- a\n- b\n"
    assert drift.check_counts(parse_context_file(text)) == []


def test_paths_missing_from_the_listing():
    parsed = parse_context_file(AGENTS_MD)
    findings = drift.check_paths(parsed, read_text_listing(LISTING))
    missing = sorted(f.data["path"] for f in findings)
    assert missing == ["worker/jobs.py"]
    assert findings[0].line == 16


def test_paths_without_a_listing_say_what_to_do():
    (finding,) = drift.check_paths(parse_context_file(AGENTS_MD), None)
    assert finding.severity == "info" and "git ls-files" in finding.message


def test_globs_urls_and_absolute_paths():
    text = "- Configs live in `config/*.yaml`.\n- See https://example.com/a/b.md and `/usr/bin/env`.\n- Notes in docs/notes/.\n"
    listing = read_text_listing("config/app.yaml\nREADME.md\n")
    findings = drift.check_paths(parse_context_file(text), listing)
    assert [f.data["path"] for f in findings] == ["docs/notes/"]


def test_commands_listed_with_their_last_verification():
    parsed = parse_context_file(AGENTS_MD)
    commands = drift.named_commands(parsed)
    assert [c.command for c in commands] == [
        "make test",
        "ruff check .",
        "pytest tests/unit",
        "make gen",
    ]
    today = date(2026, 11, 30)
    verifications = {
        "make test": drift.Verification(True, 0, datetime(2026, 11, 1, tzinfo=UTC)),
        "ruff check .": drift.Verification(False, 1, datetime(2026, 11, 2, tzinfo=UTC)),
        "make gen": drift.Verification(True, 0, datetime(2026, 1, 2, tzinfo=UTC)),
    }
    findings = {
        f.data["command"]: f for f in drift.check_commands(commands, verifications, today=today)
    }
    assert "make test" not in findings
    assert (
        findings["ruff check ."].severity == "error"
        and "exit 1" in findings["ruff check ."].message
    )
    assert findings["pytest tests/unit"].message.endswith("has never been verified.")
    assert "more than 90 days ago" in findings["make gen"].message


def test_console_blocks_only_take_prompt_lines():
    text = "```console\n$ make build\nBuilding…\ndone\n```\n"
    assert [c.command for c in drift.named_commands(parse_context_file(text))] == ["make build"]


def test_generated_section_with_a_stale_fingerprint():
    parsed = parse_context_file(AGENTS_MD)
    (finding,) = drift.check_generated(parsed, read_text_listing(LISTING))
    assert finding.severity == "error" and "stale" in finding.message
    assert finding.data["current"] == "f" * 40


def test_generated_section_that_matches_and_one_that_cannot_be_checked():
    text = "<!-- generated from=docs/api.md fingerprint=fffffff -->\nx\n<!-- end generated -->\n"
    assert drift.check_generated(parse_context_file(text), read_text_listing(LISTING)) == []
    (info,) = drift.check_generated(parse_context_file(text), read_text_listing("docs/api.md\n"))
    assert info.severity == "info" and "hashes" in info.message
    missing = "<!-- generated from=docs/gone.md sha256=abcdef12 -->\nx\n"
    findings = drift.check_generated(parse_context_file(missing), read_text_listing(LISTING))
    assert {f.severity for f in findings} == {"warning", "error"}  # never closed; source missing


def test_contradictions_by_the_documented_heuristic():
    findings = drift.check_contradictions(parse_context_file(AGENTS_MD))
    subjects = {f.data.get("subject") for f in findings}
    assert {"JavaScript package manager", "line length"} <= subjects
    polar = [f for f in findings if "Opposite instructions" in f.message]
    assert len(polar) == 1 and polar[0].data["lines"] == [21, 22]


def test_no_contradiction_when_values_agree_or_are_negated():
    text = "- Use pnpm for installs.\n- Never use npm.\n- Line length is 100.\n- The maximum line length: 100 characters.\n"
    assert drift.check_contradictions(parse_context_file(text)) == []


def test_language_versions_conflict():
    text = "- Target Python 3.11.\n\n## Later\n- New code uses Python 3.12.\n"
    (finding,) = drift.check_contradictions(parse_context_file(text))
    assert finding.data["subject"] == "python version"


def test_duplicates():
    text = "- Prefer snake_case for function names.\n- Prefer snake_case for function names!\n- Something else entirely.\n"
    (finding,) = drift.check_duplicates(parse_context_file(text))
    assert finding.line == 2 and finding.data["first_position"] == 1


def test_forbidden_commands_and_paths_are_not_checked():
    text = "- Never run `make seed` against a shared database.\n- Do not commit `.env` files.\n- Run `make up`.\n"
    parsed = parse_context_file(text)
    assert [c.command for c in drift.named_commands(parsed)] == ["make up"]
    assert drift.check_paths(parsed, read_text_listing("Makefile\n")) == []


def test_command_arguments_in_shell_blocks_are_path_checked():
    text = "```bash\n$ pytest tests/integration\n```\n"
    (finding,) = drift.check_paths(
        parse_context_file(text), read_text_listing("tests/unit/test_a.py\n")
    )
    assert finding.data["path"] == "tests/integration"
