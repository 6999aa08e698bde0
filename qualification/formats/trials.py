"""Parse trial uploads (CSV, JSON Lines, a JSON array) into typed rows with line-numbered errors.

Pure: bytes in, `ParsedTrials` out. Checks that need the database (known families, duplicates
against stored trials, pairing across strata) happen in the service that loads the rows.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

import orjson

FIELDS = [
    "task_id", "family", "stratum_tokens", "repeat", "retrieval_correct", "task_correct",
    "input_tokens", "output_tokens", "model_calls", "tool_calls", "cost_usd", "latency_ms",
    "failure_class", "session_id",
]  # fmt: skip
REQUIRED = ["task_id", "family", "stratum_tokens", "repeat", "task_correct", "input_tokens",
            "output_tokens"]  # fmt: skip

FAILURE_CLASSES = {
    "retrieval_failure": "Retrieval failure",
    "incorrect_symbol_relationships": "Incorrect symbol relationships",
    "forgotten_constraint": "Forgotten constraint",
    "repetition": "Repetition",
    "stale_or_conflicting_evidence": "Stale or conflicting evidence",
    "harness_truncation": "Harness truncation",
    "hallucinated_reference": "Hallucinated reference (missing context)",
    "over_broad_change": "Over-broad change (too much context)",
    "under_changed_fix": "Under-changed fix (call graph missed)",
    "refusal": "Refusal",
    "other": "Other",
}

# Annotations use the singular slug (issue 7's fixed API); trial files may use either.
FAILURE_CLASS_ALIASES = {"incorrect_symbol_relationship": "incorrect_symbol_relationships"}

TRUE = {"true", "1", "yes", "y", "pass", "passed", "t"}
FALSE = {"false", "0", "no", "n", "fail", "failed", "f"}
MAX_TOKENS = 100_000_000


@dataclass(frozen=True)
class TrialRow:
    line: int
    task_id: str
    family: str
    stratum_tokens: int
    repeat: int
    task_correct: bool
    input_tokens: int
    output_tokens: int
    retrieval_correct: bool | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    cost_usd: Decimal | None = None
    latency_ms: int | None = None
    failure_class: str = ""
    session_id: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.task_id, self.stratum_tokens, self.repeat)


@dataclass(frozen=True)
class RowError:
    line: int | None
    field: str
    error: str

    def as_dict(self) -> dict:
        return {"line": self.line, "field": self.field, "error": self.error}


@dataclass
class ParsedTrials:
    format: str
    rows: list[TrialRow] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    records: int = 0
    unknown_fields: list[str] = field(default_factory=list)


def _blank(value) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def _boolean(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _count(value, name: str, *, positive: bool = False, ceiling: int = MAX_TOKENS) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    try:
        number = float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None
    if number != number or number != int(number):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    number = int(number)
    if positive and number <= 0:
        raise ValueError(f"{name} must be a positive number of tokens, got {number}")
    if number < 0:
        raise ValueError(f"{name} must not be negative, got {number}")
    if number > ceiling:
        raise ValueError(f"{name} {number:,} is implausibly large (over {ceiling:,})")
    return number


def _text(value, name: str, limit: int = 200) -> str:
    text = str(value).strip()
    if len(text) > limit:
        raise ValueError(f"{name} is longer than {limit} characters")
    return text


def parse_record(record: dict, line: int) -> tuple[TrialRow | None, list[RowError]]:
    """Validate one record's fields. Every problem on the line is reported, not just the first."""
    errors: list[RowError] = []
    values: dict = {}
    if not isinstance(record, dict):
        return None, [RowError(line, "", "each trial must be an object with named fields")]
    for name in REQUIRED:
        if _blank(record.get(name)):
            errors.append(RowError(line, name, f"{name} is required"))

    def take(name, convert):
        raw = record.get(name)
        if _blank(raw):
            return
        try:
            values[name] = convert(raw)
        except ValueError as exc:
            errors.append(RowError(line, name, str(exc)))

    take("task_id", lambda v: _text(v, "task_id"))
    take("family", lambda v: _text(v, "family", 64).lower())
    take("stratum_tokens", lambda v: _count(v, "stratum_tokens", positive=True))
    take("repeat", lambda v: _count(v, "repeat", ceiling=10_000))
    take("task_correct", lambda v: _boolean(v, "task_correct"))
    take("retrieval_correct", lambda v: _boolean(v, "retrieval_correct"))
    take("input_tokens", lambda v: _count(v, "input_tokens"))
    take("output_tokens", lambda v: _count(v, "output_tokens"))
    take("model_calls", lambda v: _count(v, "model_calls", ceiling=1_000_000))
    take("tool_calls", lambda v: _count(v, "tool_calls", ceiling=1_000_000))
    take("latency_ms", lambda v: _count(v, "latency_ms", ceiling=2_000_000_000))
    take("session_id", lambda v: _text(v, "session_id"))

    def cost(v):
        try:
            amount = Decimal(str(v).strip())
        except InvalidOperation:
            raise ValueError(f"cost_usd must be a number, got {v!r}") from None
        if not amount.is_finite() or amount < 0:
            raise ValueError(f"cost_usd must be a non-negative amount, got {v!r}")
        if amount >= Decimal("1e8"):
            raise ValueError(f"cost_usd {v!r} is implausibly large")
        return amount.quantize(Decimal("0.000001"))

    take("cost_usd", cost)

    def failure(v):
        key = str(v).strip().lower().replace(" ", "_").replace("-", "_")
        key = FAILURE_CLASS_ALIASES.get(key, key)
        if key not in FAILURE_CLASSES:
            raise ValueError(
                f"unknown failure_class {v!r}; use one of {', '.join(FAILURE_CLASSES)}"
            )
        return key

    take("failure_class", failure)
    if errors:
        return None, errors
    extra = {k: v for k, v in record.items() if k not in FIELDS and not _blank(v)}
    return TrialRow(line=line, extra=extra, **values), []


def detect_format(data: bytes, filename: str = "", content_type: str = "") -> str:
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson")) or "ndjson" in content_type or "jsonl" in content_type:
        return "jsonl"
    if name.endswith(".csv") or "csv" in content_type:
        return "csv"
    if name.endswith(".json"):
        return "json"
    head = data.lstrip()[:1]
    if head == b"[":
        return "json"
    if head == b"{":
        return "jsonl"
    if "json" in content_type:
        return "json"
    return "csv"


def parse_trials(data: bytes, *, filename: str = "", content_type: str = "") -> ParsedTrials:
    """Parse a whole upload. Lines are 1-based; a CSV's header is line 1."""
    fmt = detect_format(data, filename, content_type)
    parsed = ParsedTrials(format=fmt)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        parsed.errors.append(RowError(None, "", f"the file is not UTF-8 text ({exc.reason})"))
        return parsed
    if not text.strip():
        parsed.errors.append(RowError(None, "", "the file is empty"))
        return parsed
    if fmt == "csv":
        _parse_csv(text, parsed)
    elif fmt == "jsonl":
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                parsed.errors.append(RowError(number, "", f"not valid JSON: {exc}"))
                continue
            _add(parsed, record, number)
    else:
        try:
            items = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            parsed.errors.append(RowError(None, "", f"not valid JSON: {exc}"))
            return parsed
        parse_items(items, parsed)
    return parsed


def parse_items(items, parsed: ParsedTrials | None = None) -> ParsedTrials:
    """A JSON array of trial objects; `line` is the item's 1-based position in the array."""
    parsed = parsed or ParsedTrials(format="json")
    if isinstance(items, dict) and isinstance(items.get("trials"), list):
        items = items["trials"]
    if not isinstance(items, list):
        parsed.errors.append(RowError(None, "", "expected a JSON array of trial objects"))
        return parsed
    if not items:
        parsed.errors.append(RowError(None, "", "the list of trials is empty"))
    for position, record in enumerate(items, start=1):
        _add(parsed, record, position)
    return parsed


def _add(parsed: ParsedTrials, record, line: int) -> None:
    parsed.records += 1
    if isinstance(record, dict):
        for key in record:
            if key not in FIELDS and key not in parsed.unknown_fields:
                parsed.unknown_fields.append(str(key))
    row, errors = parse_record(record, line)
    if row is not None:
        parsed.rows.append(row)
    parsed.errors.extend(errors)


def _parse_csv(text: str, parsed: ParsedTrials) -> None:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except (StopIteration, csv.Error) as exc:
        parsed.errors.append(RowError(1, "", f"cannot read the CSV header: {exc}"))
        return
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        parsed.errors.append(
            RowError(1, "", f"the header lacks required columns: {', '.join(missing)}")
        )
        return
    duplicated = sorted({h for h in header if header.count(h) > 1})
    if duplicated:
        parsed.errors.append(RowError(1, "", f"repeated columns: {', '.join(duplicated)}"))
        return
    line = reader.line_num
    while True:
        start = line + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            parsed.errors.append(RowError(start, "", f"malformed CSV: {exc}"))
            break
        line = reader.line_num
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            parsed.records += 1
            parsed.errors.append(
                RowError(start, "", f"expected {len(header)} columns, found {len(cells)}")
            )
            continue
        _add(parsed, dict(zip(header, cells, strict=True)), start)
