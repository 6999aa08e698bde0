"""Benchmark: parsing and drift-checking a large context file, and analysing a large evaluation.

Run: python -m bench.contextfiles   (writes its section of bench/RESULTS.md)
"""

from __future__ import annotations

from datetime import date

import numpy as np
from markdown_it import MarkdownIt

from bench.common import timed, write_section
from qualification.analysis.power import simulate_verdicts
from qualification.contextfiles.analysis import drift
from qualification.contextfiles.analysis.diff import diff_instructions
from qualification.contextfiles.analysis.evaluation import ArmSpec, TrialRecord, analyse_evaluation
from qualification.contextfiles.analysis.parsing import parse_context_file
from qualification.contextfiles.formats.listing import read_text_listing
from qualification.contextfiles.formats.trials import read_trials


def big_file(sections: int = 60, items: int = 25) -> str:
    parts = ["# AGENTS.md", "", f"This monorepo has {sections} packages and many rules.", ""]
    for s in range(sections):
        parts += [f"## Package {s}", f"These {items} rules:"]
        for i in range(items):
            parts.append(
                f"- Never edit `packages/p{s}/gen/file{i}.py` by hand; run `make gen-{s}` "
                f"(line length is {80 + (i % 3) * 10})."
            )
        parts.append("")
    return "\n".join(parts)


def listing_text(paths: int = 50_000) -> str:
    return "\n".join(f"packages/p{i % 60}/gen/file{i // 60}.py" for i in range(paths))


def trials_csv(tasks: int = 500, repeats: int = 5, seed: int = 1) -> str:
    rng = np.random.default_rng(seed)
    lines = [
        "task_id,arm,repeat,success,adherence,input_tokens,output_tokens,model_calls,tool_calls"
    ]
    for task in range(tasks):
        p = rng.uniform(0.3, 0.95)
        for repeat in range(1, repeats + 1):
            base = rng.random() < p
            lines.append(f"t{task},baseline,{repeat},{str(base).lower()},,90000,5000,12,18")
            for arm in ("full", "a1", "a2"):
                ok = rng.random() < (0.93 if base else 0.3)
                lines.append(f"t{task},{arm},{repeat},{str(ok).lower()},true,99000,5200,13,19")
    return "\n".join(lines) + "\n"


def main() -> None:
    text = big_file()
    md = MarkdownIt("commonmark").enable("table")
    listing = read_text_listing(listing_text())
    floor, _ = timed(lambda: md.parse(text))
    parse, _ = timed(lambda: parse_context_file(text))
    parsed = parse_context_file(text)

    def all_checks():
        commands = drift.named_commands(parsed)
        drift.check_counts(parsed, listing)
        drift.check_paths(parsed, listing)
        drift.check_commands(commands, {}, today=date(2026, 1, 1))
        drift.check_generated(parsed, listing)
        drift.check_contradictions(parsed)

    checks, _ = timed(all_checks, repeat=3)
    duplicates, _ = timed(lambda: drift.check_duplicates(parsed), repeat=3)
    before = [i.text for i in parsed.instructions]
    edited = [t.replace("by hand", "manually") for t in before]
    diff_all, _ = timed(lambda: diff_instructions(before, edited), repeat=3)
    diff_reversed, _ = timed(lambda: diff_instructions(before, edited[::-1]), repeat=1)

    csv = trials_csv()
    read, _ = timed(lambda: read_trials(csv), repeat=3)
    rows = read_trials(csv).rows
    records = [
        TrialRecord(r.task_id, r.repeat, r.arm, r.success, r.adherence, r.input_tokens,
                    r.output_tokens, r.model_calls, r.tool_calls)
        for r in rows
    ]  # fmt: skip
    arms = [ArmSpec("baseline", "baseline", "No file"), ArmSpec("full", "full", "Full")] + [
        ArmSpec(name, "ablation", name) for name in ("a1", "a2")
    ]
    analyse, _ = timed(lambda: analyse_evaluation(records, arms, delta=0.05, margin=0.1), repeat=3)
    simulate, _ = timed(
        lambda: simulate_verdicts(60, [0.45, 0.1, 0.1, 0.35], delta=0.05, margin=0.1, reps=20000),
        repeat=3,
    )
    body = f"""
| step | size | median | vs baseline |
|---|---|---|---|
| markdown-it parse (baseline) | {len(text) // 1024} KiB, {len(parsed.instructions)} instructions | {floor * 1000:.0f} ms | 1× |
| parse + categorise | same | {parse * 1000:.0f} ms | {parse / floor:.1f}× |
| drift checks without duplicates (listing of {len(listing.paths):,} paths) | same | {checks * 1000:.0f} ms | {checks / floor:.1f}× |
| duplicate check (every instruction a near-duplicate: worst case) | same | {duplicates * 1000:.0f} ms | {duplicates / floor:.1f}× |
| instruction diff, every instruction edited in place | same | {diff_all * 1000:.0f} ms | {diff_all / floor:.1f}× |
| instruction diff, every instruction edited and the order reversed | same | {diff_reversed:.1f} s | {diff_reversed / floor:.0f}× |
| read + validate trials CSV | {len(rows):,} trials | {read * 1000:.0f} ms | |
| analyse evaluation (4 arms, task-level TOST, power) | {len(rows):,} trials | {analyse * 1000:.0f} ms | {analyse / read:.2f}× reading |
| simulate the decision rule | 20,000 tables of 60 pairs | {simulate * 1000:.0f} ms | |

The file is a worst case: 1,500 instructions from one template, so every instruction is a
near-duplicate of the others. The reversed diff is the slowest input for the instruction
diff (every candidate within the pairing window passes difflib's cheap bounds); real
context files hold tens to a few hundred instructions.
"""
    write_section("contextfiles", body, command="python -m bench.contextfiles")
    print(body)


if __name__ == "__main__":
    main()
