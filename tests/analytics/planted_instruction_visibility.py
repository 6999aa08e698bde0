"""A planted corpus for instruction visibility: Claude Code transcripts in which the calls
whose thinking holds the instruction, exactly or reworded, are known.

- "delivered" (cwd /work/demo): call 0 says nothing of it; call 1's prompt delivers it and
  its thinking quotes it exactly; calls 3 and 22 restate it in capitals (normalised match
  only); calls 10–14 have no thinking; 25 calls.
- "silent" (cwd /work/demo): 10 calls with thinking; no prompt holds it.
- "repository" (cwd /home/dev/shop, the ledger file's repository): 8 calls with thinking,
  calls 0 and 5 quote it exactly; no prompt holds it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

INSTRUCTION = "Never commit directly to main; open a pull request."
LEDGER_TEXT = f"# Shop\n\n## Git\n\n- {INSTRUCTION}\n- Run `pnpm lint` before pushing.\n"


def _transcript(index: int, cwd: str, calls: list[tuple[str, tuple[str, ...]]]) -> bytes:
    """calls: (prompt, thinking texts) per call."""
    session_id = f"00000000-0000-4000-8000-{index:012d}"
    clock = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
    base = {"sessionId": session_id, "version": "2.1.89", "cwd": cwd, "userType": "external", "isSidechain": False}  # fmt: skip
    lines = []
    for n, (prompt, thinking) in enumerate(calls):
        clock += timedelta(seconds=5)
        stamp = clock.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        lines.append({**base, "type": "user", "uuid": f"u{index}-{n}", "timestamp": stamp,
                      "message": {"role": "user", "content": prompt}})  # fmt: skip
        content = [{"type": "thinking", "thinking": t, "signature": "x"} for t in thinking]
        content.append({"type": "text", "text": f"Step {n} done."})
        lines.append({
            **base, "type": "assistant", "uuid": f"a{index}-{n}", "timestamp": stamp, "requestId": f"req{index}-{n}",
            "message": {"id": f"msg{index}-{n}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                        "content": content, "stop_reason": "end_turn",
                        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 20_000 + 500 * n, "output_tokens": 40}},
        })  # fmt: skip
    return b"\n".join(json.dumps(line).encode() for line in lines) + b"\n"


def sessions() -> dict[str, bytes]:
    delivered = []
    for n in range(25):
        prompt = f"Go on with step {n}."
        thinking: tuple[str, ...] = (f"I will look at file {n} and then run the tests.",)
        if n == 1:
            prompt = f"A rule for this repository: {INSTRUCTION} Now fix the parser."
            thinking = (f"The user said: {INSTRUCTION} So I will branch first.",)
        elif n in (3, 22):
            thinking = ("Reminder to self.", INSTRUCTION.upper())
        elif 10 <= n <= 14:
            thinking = ()
        delivered.append((prompt, thinking))
    silent = [(f"Task {n}.", (f"Thinking about task {n}.",)) for n in range(10)]
    repository = [
        (f"Shop task {n}.", (f"Plan: {INSTRUCTION}" if n in (0, 5) else f"Shop plan {n}.",))
        for n in range(8)
    ]
    return {
        "delivered": _transcript(1, "/work/demo", delivered),
        "silent": _transcript(2, "/work/demo", silent),
        "repository": _transcript(3, "/home/dev/shop", repository),
    }
