"""Instruction diffs between revisions. No database."""

from qualification.contextfiles.analysis.diff import ChangeKind, diff_instructions, word_diff

OLD = [
    "- Run `make test` before commit.",
    "- Never edit `gen/` by hand.",
    "- Use 4 spaces.",
    "- Python 2 code lives in legacy/.",
]
NEW = [
    "- Never edit `gen/` by hand.",
    "- Run `make test` before every commit.",
    "- Use 4 spaces.",
    "- Ask before adding a dependency.",
]


def test_added_changed_removed_and_unchanged():
    summary = diff_instructions(OLD, NEW)
    kinds = [(c.kind, c.old_index, c.new_index) for c in summary.changes]
    assert (ChangeKind.CHANGED, 0, 1) in kinds
    assert (ChangeKind.REMOVED, 3, None) in kinds
    assert (ChangeKind.ADDED, None, 3) in kinds
    assert summary.counts == {"unchanged": 2, "moved": 0, "changed": 1, "added": 1, "removed": 1}


def test_changed_instruction_carries_a_word_diff():
    change = next(c for c in diff_instructions(OLD, NEW).changes if c.kind == ChangeKind.CHANGED)
    inserted = "".join(s.text for s in change.segments if s.op == "insert")
    assert inserted.strip() == "every"
    assert change.similarity > 0.8


def test_a_reordered_identical_instruction_is_moved_not_added():
    summary = diff_instructions(
        ["a rule about x", "b rule about y", "c rule about z"],
        ["c rule about z", "a rule about x", "b rule about y"],
    )
    assert summary.count(ChangeKind.ADDED) == 0 and summary.count(ChangeKind.REMOVED) == 0
    assert summary.count(ChangeKind.MOVED) == 1


def test_markup_only_changes_are_unchanged():
    summary = diff_instructions(["- Run **make test**"], ["* Run make test"])
    assert summary.changes[0].kind is ChangeKind.UNCHANGED


def test_empty_sides():
    assert diff_instructions([], ["new"]).counts["added"] == 1
    assert diff_instructions(["old"], []).counts["removed"] == 1


def test_word_diff_segments_rebuild_both_texts():
    segments = word_diff("use pnpm here", "use npm there")
    old = "".join(s.text for s in segments if s.op != "insert")
    new = "".join(s.text for s in segments if s.op != "delete")
    assert (old, new) == ("use pnpm here", "use npm there")


def test_a_long_file_edited_throughout_pairs_each_instruction_with_its_edit():
    old = [f"- Never edit `pkg{i}/gen/` by hand; run `make gen-{i}`." for i in range(400)]
    new = [text.replace("by hand", "manually") for text in old]
    summary = diff_instructions(old, new)
    changed = [c for c in summary.changes if c.kind is ChangeKind.CHANGED]
    assert len(changed) == 400 and all(c.old_index == c.new_index for c in changed)


def test_an_edited_and_moved_instruction_is_still_changed():
    old = ["alpha rule one", "beta rule two", "Run the integration tests before release"]
    new = ["Run the integration tests before every release", "alpha rule one", "beta rule two"]
    summary = diff_instructions(old, new)
    (changed,) = [c for c in summary.changes if c.kind is ChangeKind.CHANGED]
    assert (changed.old_index, changed.new_index) == (2, 0)
