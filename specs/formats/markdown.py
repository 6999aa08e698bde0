"""Spec versions as Markdown: the documented import structure and an exact export. No Django.

    # Title
    > Version 3 of `slug` · authoritative · supersedes version 2     (ignored on import)
    > Fingerprint: sha256:<64 hex>                                   (checked on import)

    ## Requirements                  one section per kind (see KIND_HEADINGS)
    - [KEY] text                     an item; "(unresolved)" after the key marks it open
      more text                      continuation lines are indented to the content
      - Rationale: why               nested bullets, two spaces in
      - Alternative: one option
        - Evidence: what supports it four spaces in
    ## Sources
    - https://tracker/issue/12 — label     or trace-session:<id>, trace-run:<id>,
                                           trace-divergence:<id>

A continuation line that starts with "-" or "\\" is written with a leading backslash so it
cannot be mistaken for a bullet. `render_markdown` then `parse_markdown` gives back the same
items, sources and fingerprint. The parser is line-based rather than built on a CommonMark
tokenizer because the round trip must be byte-exact on item text (a tokenizer normalises
emphasis, escapes and whitespace) and errors must name their line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specs.analysis.content import (
    KEY_HELP,
    KIND_HEADINGS,
    KINDS,
    SETTLED,
    UNRESOLVED,
    Alternative,
    Item,
    canonical_items,
    check_items,
    fingerprint,
    is_valid_key,
    normalize_text,
    suggest_key,
)

SOURCE_KINDS = ("url", "trace_session", "trace_run", "trace_divergence")
SOURCE_PREFIXES = {
    "trace_session": "trace-session:",
    "trace_run": "trace-run:",
    "trace_divergence": "trace-divergence:",
}

_HEADING_ALIASES: dict[str, str] = {}
for _kind, _heading in KIND_HEADINGS.items():
    _HEADING_ALIASES[_heading.casefold()] = _kind
    _HEADING_ALIASES[_heading.casefold().rstrip("s")] = _kind
    _HEADING_ALIASES[_kind.replace("_", " ")] = _kind
_HEADING_ALIASES["questions"] = "open_question"
_HEADING_ALIASES["unresolved questions"] = "open_question"
SOURCES_SECTION = "sources"
for _alias in ("sources", "source", "references"):
    _HEADING_ALIASES[_alias] = SOURCES_SECTION

_ITEM = re.compile(r"- \[(?P<key>[^\]]*)\](?: (?P<rest>.*))?")
_MARKER = re.compile(r"\((?P<status>unresolved|settled)\)(?: |\Z)", re.IGNORECASE)
_LABELLED = re.compile(r"- (?P<label>[A-Za-z]+):(?: (?P<rest>.*))?")
_FINGERPRINT = re.compile(r"fingerprint:\s*(?:sha256:)?(?P<hex>[0-9a-fA-F]{64})\b", re.IGNORECASE)
_URL = re.compile(r"https?://\S+")
_LABEL_SEPARATOR = re.compile(r" (?:—|--|-) ")


@dataclass(frozen=True)
class Source:
    kind: str  # "url", "trace_session", "trace_run" or "trace_divergence"
    ref: str  # the URL, or the trace object's id
    label: str = ""

    @property
    def token(self) -> str:
        return self.ref if self.kind == "url" else f"{SOURCE_PREFIXES[self.kind]}{self.ref}"


@dataclass(frozen=True)
class SpecDocument:
    title: str
    items: tuple[Item, ...]
    sources: tuple[Source, ...] = ()


@dataclass(frozen=True)
class ExportHeader:
    """What the preamble says about the version; informative, ignored on import."""

    slug: str = ""
    number: int | None = None
    status: str = ""
    supersedes_number: int | None = None


@dataclass(frozen=True)
class LineError:
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class MarkdownImportError(ValueError):
    def __init__(self, errors: list[LineError]):
        self.errors = errors
        super().__init__("; ".join(str(error) for error in errors))


@dataclass(frozen=True)
class ImportResult:
    document: SpecDocument
    declared_fingerprint: str | None
    computed_fingerprint: str
    item_lines: tuple[int, ...]
    notices: tuple[str, ...] = ()

    @property
    def matches_declared(self) -> bool:
        return self.declared_fingerprint == self.computed_fingerprint


# --- export -----------------------------------------------------------------


def render_markdown(document: SpecDocument, header: ExportHeader | None = None) -> str:
    """The version as Markdown that `parse_markdown` reads back unchanged."""
    items = canonical_items(document.items)
    lines: list[str] = []
    title = _single_line(document.title)
    if title:
        lines += [f"# {title}", ""]
    lines += _preamble(header, fingerprint(items))
    lines += render_sections(items)
    if document.sources:
        lines += ["", "## Sources", ""]
        for source in document.sources:
            label = _single_line(source.label)
            lines.append(f"- {source.token} — {label}" if label else f"- {source.token}")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_sections(items, *, level: int = 2) -> list[str]:
    """The kind sections and their items, with headings at `level` (for embedding)."""
    lines: list[str] = []
    items = canonical_items(items)
    for kind in KINDS:
        group = [item for item in items if item.kind == kind]
        if not group:
            continue
        lines += ["", f"{'#' * level} {KIND_HEADINGS[kind]}", ""]
        for item in group:
            lines += _render_item(item)
    return lines


def _preamble(header: ExportHeader | None, digest: str) -> list[str]:
    lines = []
    if header is not None and header.number is not None:
        parts = [f"Version {header.number}" + (f" of `{header.slug}`" if header.slug else "")]
        if header.status:
            parts.append(header.status.replace("_", " "))
        parts.append(
            f"supersedes version {header.supersedes_number}"
            if header.supersedes_number
            else "first version"
        )
        lines.append("> " + " · ".join(parts))
    lines.append(f"> Fingerprint: sha256:{digest}")
    lines.append(
        "> Settled items govern. Items marked (unresolved) are open: do not decide them "
        "without review."
    )
    return lines


def _render_item(item: Item) -> list[str]:
    text = item.text
    if item.status == UNRESOLVED:
        text = f"(unresolved) {text}"
    elif _MARKER.match(text.split("\n", 1)[0]):
        text = f"(settled) {text}"
    lines = _block(f"- [{item.key}] ", text, indent=2)
    if item.rationale:
        lines += _block("  - Rationale: ", item.rationale, indent=4)
    for alternative in item.alternatives:
        lines += _block("  - Alternative: ", alternative.text, indent=4)
        if alternative.evidence:
            lines += _block("    - Evidence: ", alternative.evidence, indent=6)
    return lines


def _block(lead: str, text: str, *, indent: int) -> list[str]:
    first, *rest = text.split("\n")
    lines = [lead + first]
    pad = " " * indent
    for line in rest:
        if not line:
            lines.append("")
        elif line.startswith(("-", "\\")):
            lines.append(f"{pad}\\{line}")
        else:
            lines.append(pad + line)
    return lines


def _single_line(value: str) -> str:
    return " ".join(normalize_text(value).split("\n")).strip()


# --- import -----------------------------------------------------------------


@dataclass
class _Block:
    """An open item, rationale, alternative or evidence, collecting its lines."""

    kind: str  # "item", "rationale", "alternative", "evidence"
    content_indent: int
    child_indent: int | None
    line: int
    parts: list[str] = field(default_factory=list)
    pending_blank: int = 0

    def add(self, text: str) -> None:
        if self.pending_blank and self.parts:
            self.parts.append("")
        self.pending_blank = 0
        self.parts.append(text)

    @property
    def text(self) -> str:
        return normalize_text("\n".join(self.parts))


@dataclass
class _ItemDraft:
    key: str
    status: str
    kind: str
    line: int
    text: _Block
    rationale: list[_Block] = field(default_factory=list)
    alternatives: list[tuple[_Block, list[_Block]]] = field(default_factory=list)


def parse_source(line: str) -> Source:
    """One source line: a URL or a trace-session:, trace-run: or trace-divergence:<id> token,
    then optionally ' — label'."""
    token, label = (*_LABEL_SEPARATOR.split(line.strip(), maxsplit=1), "")[:2]
    token = token.strip()
    label = _single_line(label)
    for kind, prefix in SOURCE_PREFIXES.items():
        if token.lower().startswith(prefix):
            ref = token[len(prefix) :]
            if not ref.isdigit():
                raise ValueError(f"'{token}' needs a numeric id, e.g. {prefix}42")
            return Source(kind, str(int(ref)), label)
    if _URL.fullmatch(token):
        return Source("url", token, label)
    raise ValueError(
        f"'{token}' is not a source; use a URL (https://…), trace-session:<id>, "
        "trace-run:<id> or trace-divergence:<id>, optionally followed by ' — label'"
    )


def parse_markdown(text: str) -> ImportResult:
    """Read a spec from Markdown. Raises MarkdownImportError listing every problem by line."""
    parser = _Parser()
    parser.feed(text)
    return parser.finish()


class _Parser:
    def __init__(self):
        self.errors: list[LineError] = []
        self.notices: list[str] = []
        self.title = ""
        self.declared: str | None = None
        self.section: str | None = None
        self.items: list[_ItemDraft] = []
        self.sources: list[Source] = []
        self.stack: list[_Block] = []

    def error(self, line: int, message: str) -> None:
        self.errors.append(LineError(line, message))

    def feed(self, text: str) -> None:
        text = (text or "").lstrip("\ufeff")
        text = re.sub(r"\r\n|\r", "\n", text)
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.rstrip()
            if not line.strip():
                if self.stack:
                    self.stack[-1].pending_blank += 1
                continue
            indent = len(line) - len(line.lstrip(" "))
            if indent == 0:
                self.top_level(number, line)
            else:
                self.indented(number, line, indent)

    # Lines at the left margin: title, preamble, headings, items and sources.
    def top_level(self, number: int, line: str) -> None:
        self.stack = []
        if line.startswith("## ") or line == "##":
            name = line[2:].strip().casefold()
            section = _HEADING_ALIASES.get(name)
            if section is None:
                accepted = ", ".join([*KIND_HEADINGS.values(), "Sources"])
                self.error(number, f"unknown section '{line[2:].strip()}'; use one of: {accepted}")
                self.section = "unknown"
            else:
                self.section = section
            return
        if line.startswith("# ") and self.section is None and not self.title and not self.items:
            self.title = _single_line(line[2:])
            return
        if line.startswith(">") and self.section is None:
            match = _FINGERPRINT.search(line)
            if match:
                self.declared = match.group("hex").lower()
            return
        if line.startswith("- ") or line == "-":
            if self.section is None:
                self.error(
                    number,
                    "a bullet before the first section; start with a heading such as '## Requirements'",
                )
            elif self.section == SOURCES_SECTION:
                self.source(number, line[2:].strip())
            elif self.section != "unknown":
                self.item(number, line)
            return
        if self.section is None:
            self.error(
                number,
                "text before the first section is not imported; put it under a heading "
                "(## Requirements, ## Decisions …) or in a '>' note",
            )
        else:
            self.error(
                number,
                "unexpected text at the left margin; continuation lines are indented two "
                "spaces, and items start with '- [KEY] '",
            )

    def item(self, number: int, line: str) -> None:
        match = _ITEM.fullmatch(line)
        if match:
            key = match.group("key").strip()
            rest = match.group("rest") or ""
            if not is_valid_key(key):
                self.error(number, f"'{key}' is not a valid key: {KEY_HELP}")
        else:
            key, rest = "", line[2:]
        status = SETTLED
        marker = _MARKER.match(rest)
        if marker:
            status = marker.group("status").lower()
            rest = rest[marker.end() :]
        block = _Block("item", content_indent=2, child_indent=2, line=number)
        block.add(rest)
        self.items.append(_ItemDraft(key, status, self.section, number, block))
        self.stack = [block]

    def source(self, number: int, body: str) -> None:
        try:
            self.sources.append(parse_source(body))
        except ValueError as exc:
            self.error(number, str(exc))

    # Indented lines: continuation text, or a nested bullet of an open block.
    def indented(self, number: int, line: str, indent: int) -> None:
        if not self.stack:
            if self.section not in (None, "unknown", SOURCES_SECTION):
                self.error(number, "an indented line outside an item")
            elif self.section == SOURCES_SECTION:
                self.error(number, "sources are one line each")
            elif self.section is None:
                self.error(number, "text before the first section is not imported")
            return
        body = line[indent:]
        if body.startswith("- ") or body == "-":
            for depth, block in enumerate(self.stack):
                if block.child_indent == indent:
                    del self.stack[depth + 1 :]
                    self.child(number, block, body)
                    return
        innermost = self.stack[-1]
        if indent < innermost.content_indent:
            self.error(
                number,
                f"indent this line {innermost.content_indent} spaces to continue the "
                f"{innermost.kind}, or start a nested bullet",
            )
            return
        remainder = line[innermost.content_indent :]
        if remainder.startswith("\\"):
            remainder = remainder[1:]
        innermost.add(remainder)

    def child(self, number: int, parent: _Block, body: str) -> None:
        match = _LABELLED.fullmatch(body)
        label = match.group("label").casefold() if match else ""
        rest = (match.group("rest") or "") if match else ""
        item = self.items[-1]
        if parent.kind == "item" and label == "rationale":
            block = _Block("rationale", content_indent=4, child_indent=None, line=number)
            item.rationale.append(block)
        elif parent.kind == "item" and label == "alternative":
            block = _Block("alternative", content_indent=4, child_indent=4, line=number)
            item.alternatives.append((block, []))
        elif parent.kind == "alternative" and label == "evidence":
            block = _Block("evidence", content_indent=6, child_indent=None, line=number)
            item.alternatives[-1][1].append(block)
        else:
            expected = (
                "'- Rationale: …' or '- Alternative: …'"
                if parent.kind == "item"
                else "'- Evidence: …'"
            )
            self.error(
                number,
                f"a nested bullet here must be {expected}; write a literal leading '-' in "
                "text as '\\-'",
            )
            return
        block.add(rest)
        self.stack.append(block)

    def finish(self) -> ImportResult:
        items: list[Item] = []
        lines: list[int] = []
        taken = [draft.key for draft in self.items if draft.key]
        for draft in self.items:
            key = draft.key
            text = draft.text.text
            if not key and draft.line not in {e.line for e in self.errors}:
                key = suggest_key(text, taken)
                taken.append(key)
                self.notices.append(f"line {draft.line}: no key given; using '{key}'")
            items.append(
                Item(
                    key=key,
                    kind=draft.kind,
                    text=text,
                    rationale=normalize_text("\n".join(block.text for block in draft.rationale)),
                    status=draft.status,
                    alternatives=tuple(
                        Alternative(
                            text=block.text,
                            evidence=normalize_text("\n".join(e.text for e in evidence)),
                        )
                        for block, evidence in draft.alternatives
                    ),
                )
            )
            lines.append(draft.line)
        for problem in check_items(items).problems:
            line = lines[problem.index] if problem.index is not None else None
            if problem.alternative is not None:
                line = self.items[problem.index].alternatives[problem.alternative][0].line
            if problem.field == "key" and line in {e.line for e in self.errors}:
                continue
            message = problem.message
            if problem.duplicate_of is not None:
                message = (
                    f"key '{items[problem.index].key}' is already used on line "
                    f"{lines[problem.duplicate_of]}; keys are unique (ignoring case)"
                )
            if problem.alternative is not None:
                message = f"alternative {problem.alternative + 1}: {message}"
            self.error(line, message)
        if not items and not self.errors:
            self.error(
                None,
                "no items found; write sections such as '## Requirements' with '- [KEY] text' bullets",
            )
        if self.errors:
            self.errors.sort(key=lambda e: e.line or 0)
            raise MarkdownImportError(self.errors)
        ordered = canonical_items(items)
        document = SpecDocument(title=self.title, items=tuple(ordered), sources=tuple(self.sources))
        by_key = dict(zip([item.key for item in items], lines, strict=True))
        return ImportResult(
            document=document,
            declared_fingerprint=self.declared,
            computed_fingerprint=fingerprint(ordered),
            item_lines=tuple(by_key[item.key] for item in ordered),
            notices=tuple(self.notices),
        )
