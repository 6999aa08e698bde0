"""Read evaluation trials from a JSON list or CSV and check them against the registration. Pure.

Every problem is reported with the line it came from; callers save nothing unless the
whole batch is clean.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields

REQUIRED = ("task_id", "arm", "success")
COUNT_FIELDS = ("input_tokens", "output_tokens", "model_calls", "tool_calls")
OPTIONAL = ("repeat", "adherence", *COUNT_FIELDS, "cost", "latency_ms", "failure_class")
KNOWN = (*REQUIRED, *OPTIONAL)
MAX_TRIALS = 100_000
MAX_ERRORS = 200
_TRUE = {"true", "t", "yes", "y", "1", "pass", "passed"}
_FALSE = {"false", "f", "no", "n", "0", "fail", "failed"}


@dataclass(frozen=True)
class TrialRow:
    line: int
    task_id: str
    arm: str
    repeat: int
    success: bool
    adherence: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    cost: float | None = None
    latency_ms: int | None = None
    failure_class: str = ""

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.repeat)

    def values(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "line"}


@dataclass
class ReadResult:
    rows: list[TrialRow] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    # (arm, task_id, repeat) of rows refused for other reasons, so that their partners are
    # not also reported as unpaired.
    refused_keys: list[tuple[str, str, int]] = field(default_factory=list)

    def error(self, line: int | None, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append({"line": line, "error": message})


class TrialFormatError(ValueError):
    """The body is not a JSON list or a CSV with a header at all."""


def read_trials(data: bytes | str, *, content_type: str = "") -> ReadResult:
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    stripped = text.lstrip()
    if "json" in content_type or stripped.startswith("["):
        return _read_json(text)
    return _read_csv(text)


def _read_json(text: str) -> ReadResult:
    result = ReadResult()
    decoder = json.JSONDecoder()
    index = _skip_ws(text, 0)
    if index >= len(text) or text[index] != "[":
        raise TrialFormatError("expected a JSON list of trial objects")
    index = _skip_ws(text, index + 1)
    item = 0
    while index < len(text) and text[index] != "]":
        line = text.count("\n", 0, index) + 1
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise TrialFormatError(f"line {exc.lineno}: invalid JSON ({exc.msg})") from None
        item += 1
        if item > MAX_TRIALS:
            raise TrialFormatError(f"more than {MAX_TRIALS:,} trials in one upload")
        if not isinstance(value, dict):
            result.error(line, f"item {item} is not an object")
        else:
            _read_row(value, line, result, label=f"item {item}")
        index = _skip_ws(text, index)
        if index < len(text) and text[index] == ",":
            index = _skip_ws(text, index + 1)
    if index >= len(text):
        raise TrialFormatError("the JSON list is not closed with ']'")
    if item == 0:
        raise TrialFormatError("the list holds no trials")
    return result


def _skip_ws(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


def _read_csv(text: str) -> ReadResult:
    result = ReadResult()
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise TrialFormatError("the CSV is empty; its first line must name the columns")
    reader.fieldnames = header
    missing = [name for name in REQUIRED if name not in header]
    unknown = [name for name in header if name not in KNOWN]
    if missing or unknown:
        parts = []
        if missing:
            parts.append("missing column(s) " + ", ".join(missing))
        if unknown:
            parts.append(
                "unknown column(s) " + ", ".join(unknown) + " (known: " + ", ".join(KNOWN) + ")"
            )
        raise TrialFormatError("line 1: " + "; ".join(parts))
    count = 0
    for record in reader:
        count += 1
        if count > MAX_TRIALS:
            raise TrialFormatError(f"more than {MAX_TRIALS:,} trials in one upload")
        if None in record:
            result.error(reader.line_num, "more values than columns")
            continue
        if not any((v or "").strip() for v in record.values()):
            continue
        _read_row(record, reader.line_num, result, label="")
    if count == 0:
        raise TrialFormatError("the CSV has a header but no trials")
    return result


def _read_row(record: Mapping, line: int, result: ReadResult, *, label: str) -> None:
    problems: list[str] = []
    unknown = [k for k in record if k not in KNOWN]
    if unknown:
        problems.append("unknown field(s) " + ", ".join(map(str, unknown)))

    def text(name: str, *, required: bool) -> str:
        value = record.get(name)
        value = "" if value is None else str(value).strip()
        if required and not value:
            problems.append(f"{name} is required")
        if len(value) > 200:
            problems.append(f"{name} is longer than 200 characters")
        return value

    def boolean(name: str, *, required: bool) -> bool | None:
        value = record.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                problems.append(f"{name} is required (true or false)")
            return None
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        lowered = str(value).strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        problems.append(f"{name} must be true or false, not {value!r}")
        return None

    def integer(name: str, *, minimum: int = 0) -> int | None:
        value = record.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, bool):
            problems.append(f"{name} must be a whole number, not {value!r}")
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            problems.append(f"{name} must be a whole number, not {value!r}")
            return None
        if not math.isfinite(number) or number != int(number):
            problems.append(f"{name} must be a whole number, not {value!r}")
            return None
        if number < minimum:
            problems.append(f"{name} must be at least {minimum}, not {value!r}")
            return None
        return int(number)

    def fraction_or_bool(name: str) -> float | None:
        value = record.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, bool):
            return float(value)
        lowered = str(value).strip().lower()
        if lowered in _TRUE - {"1"}:
            return 1.0
        if lowered in _FALSE - {"0"}:
            return 0.0
        try:
            number = float(lowered)
        except ValueError:
            number = float("nan")
        if not 0 <= number <= 1:
            problems.append(f"{name} must be true/false or a share between 0 and 1, not {value!r}")
            return None
        return number

    def decimal(name: str) -> float | None:
        value = record.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if isinstance(value, bool) or not math.isfinite(number) or number < 0:
            problems.append(f"{name} must be a non-negative number, not {value!r}")
            return None
        return number

    task_id = text("task_id", required=True)
    arm = text("arm", required=True)
    repeat = integer("repeat", minimum=1)
    if "repeat" in record and record.get("repeat") in (None, "") and repeat is None:
        problems.append("repeat is empty (leave the column out when every task runs once)")
    success = boolean("success", required=True)
    adherence = fraction_or_bool("adherence")
    counts = {name: integer(name) for name in COUNT_FIELDS}
    cost = decimal("cost")
    latency = integer("latency_ms")
    failure_class = text("failure_class", required=False)
    if len(failure_class) > 64:
        problems.append(f"failure_class is at most 64 characters, not {len(failure_class)}")
    if problems:
        prefix = f"{label}: " if label else ""
        result.error(line, prefix + "; ".join(problems))
        if task_id and arm:
            result.refused_keys.append((arm, task_id, repeat or 1))
        return
    result.rows.append(
        TrialRow(
            line=line, task_id=task_id, arm=arm, repeat=repeat or 1, success=bool(success),
            adherence=adherence, cost=cost, latency_ms=latency, failure_class=failure_class,
            **counts,
        )
    )  # fmt: skip


@dataclass
class BatchCheck:
    new: list[TrialRow] = field(default_factory=list)
    already_recorded: int = 0
    errors: list[dict] = field(default_factory=list)


def check_batch(
    rows: Iterable[TrialRow],
    *,
    arms: Iterable[str],
    baseline: str,
    existing: Mapping[tuple[str, str, int], dict],
    refused: Iterable[tuple[str, str, int]] = (),
) -> BatchCheck:
    """Unknown arms, duplicates, changed re-uploads and unpaired trials, by line.

    `existing` maps (arm, task_id, repeat) to the stored values. After the batch, every
    (task_id, repeat) it touches must have a trial in every registered arm.
    """
    arms = list(arms)
    registered = set(arms)
    check = BatchCheck()
    seen: dict[tuple[str, str, int], int] = {}
    rows = list(rows)
    if (
        rows
        and baseline not in {r.arm for r in rows}
        and not any(k[0] == baseline for k in existing)
    ):
        check.errors.append(
            {"line": None, "error": f"no trial is in the baseline arm '{baseline}' (no file); "
             "every task needs its no-file run"}
        )  # fmt: skip
    present: dict[tuple[str, int], set[str]] = {}
    for key in [*existing, *refused]:
        present.setdefault((key[1], key[2]), set()).add(key[0])
    for row in rows:
        key = (row.arm, row.task_id, row.repeat)
        if row.arm not in registered:
            check.errors.append(
                {"line": row.line, "error": f"unknown arm '{row.arm}'; this evaluation's arms "
                 f"are {', '.join(arms)}"}
            )  # fmt: skip
            continue
        if key in seen:
            check.errors.append(
                {"line": row.line, "error": f"duplicate trial: task {row.task_id} repeat "
                 f"{row.repeat} in arm {row.arm} is already on line {seen[key]}"}
            )  # fmt: skip
            continue
        seen[key] = row.line
        if key in existing:
            if existing[key] == row.values():
                check.already_recorded += 1
                continue
            check.errors.append(
                {"line": row.line, "error": f"task {row.task_id} repeat {row.repeat} in arm "
                 f"{row.arm} was already recorded with different values; accepted trials "
                 "cannot be changed"}
            )  # fmt: skip
            continue
        check.new.append(row)
        present.setdefault(row.key, set()).add(row.arm)
    for row in check.new:
        missing = [arm for arm in arms if arm not in present[row.key]]
        if missing:
            check.errors.append(
                {"line": row.line, "error": f"unpaired: task {row.task_id} repeat {row.repeat} "
                 f"has no trial in arm(s) {', '.join(missing)}"}
            )  # fmt: skip
    check.errors.sort(key=lambda e: (e["line"] is not None, e["line"] or 0))
    return check
