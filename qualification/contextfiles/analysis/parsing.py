"""Split a context file (AGENTS.md, CLAUDE.md …) into instructions and guess their categories.

Pure: text in, dataclasses out. The rules are documented in docs/context-files.md:

* headings set the section; they are not instructions;
* every paragraph is one instruction, except a lead-in ending with ':' followed by a list
  (it labels the list's items) or by a code block (it is merged with the block);
* every list item is one instruction with its nested content, except an item whose own
  text ends with ':' or has at most four words and that holds a nested list: it is a
  group label, and its nested items are the instructions;
* a code block on its own is one instruction; every body row of a table is one;
* HTML comments are not instructions; `generated` markers in them delimit generated
  sections (see `GENERATED_START`).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from enum import StrEnum

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

CHARS_PER_TOKEN = 4
SECTION_SEPARATOR = " › "
GROUP_LABEL_MAX_WORDS = 4

GENERATED_START = re.compile(r"<!--\s*(?:begin\s+)?generated\b(?P<attrs>[^>]*?)-->", re.IGNORECASE)
GENERATED_END = re.compile(r"<!--\s*(?:end\s+generated|/generated)\b[^>]*-->", re.IGNORECASE)
_ATTR = re.compile(
    r"(?P<key>[a-z][a-z0-9_-]*)\s*[=:]\s*(?P<value>\"[^\"]*\"|'[^']*'|\S+)", re.IGNORECASE
)


class Category(StrEnum):
    BUILD_TEST = "build_test"
    FAILURE_PREVENTION = "failure_prevention"
    ARCHITECTURE = "architecture"
    CONVENTION = "convention"
    OTHER = "other"

    @property
    def label(self) -> str:
        return CATEGORY_LABELS[self]


CATEGORY_LABELS = {
    Category.BUILD_TEST: "Build/test command",
    Category.FAILURE_PREVENTION: "Failure-prevention rule",
    Category.ARCHITECTURE: "Architecture overview",
    Category.CONVENTION: "Convention",
    Category.OTHER: "Other",
}


def estimate_tokens(text: str) -> int:
    """≈ 4 characters per token: a documented estimate, not a tokenizer."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise(text: str) -> str:
    """Text as compared between revisions: markup, bullets and spacing removed, lower case."""
    text = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", text, flags=re.MULTILINE)
    text = re.sub(r"[`*_>#|]", " ", text)
    return re.sub(r"\s+", " ", text).strip().lower()


@dataclass(frozen=True)
class ParsedInstruction:
    position: int
    section: str
    kind: str  # paragraph, item, code, table_row
    text: str
    line_start: int  # 1-based, inclusive
    line_end: int
    category: Category
    category_basis: str

    @property
    def normalised(self) -> str:
        return normalise(self.text)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


@dataclass(frozen=True)
class Section:
    title: str
    path: str
    level: int
    line: int
    item_count: int  # list items and table rows directly under it (not in subsections)


@dataclass(frozen=True)
class LeadIn:
    """A paragraph ending with ':' that introduces a list, and how many items followed."""

    text: str
    line: int
    item_count: int


@dataclass(frozen=True)
class GeneratedSection:
    line_start: int
    line_end: int | None
    source: str
    fingerprint: str
    body: str
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedFile:
    text: str
    lines: list[str]
    instructions: list[ParsedInstruction]
    sections: list[Section]
    generated: list[GeneratedSection]
    lead_ins: list[LeadIn] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


_md = MarkdownIt("commonmark").enable("table")


def parse_context_file(text: str) -> ParsedFile:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    builder = _Builder(lines)
    builder.walk(SyntaxTreeNode(_md.parse(text)).children)
    instructions, sections = builder.instructions, builder.finish_sections()
    title = _document_title(sections)
    if title:
        instructions = [replace(i, section=_without_title(i.section, title)) for i in instructions]
        sections = [replace(s, path=_without_title(s.path, title)) for s in sections]
    return ParsedFile(
        text=text,
        lines=lines,
        instructions=instructions,
        sections=sections,
        generated=_generated_sections(lines),
        lead_ins=builder.lead_ins,
    )


def _document_title(sections: list[Section]) -> str:
    """A single level-1 heading that opens the file is its title, not a section."""
    level_one = [s for s in sections if s.level == 1]
    if len(level_one) == 1 and sections and sections[0] is level_one[0]:
        return level_one[0].title
    return ""


def _without_title(path: str, title: str) -> str:
    if path == title:
        return ""
    prefix = title + SECTION_SEPARATOR
    return path[len(prefix) :] if path.startswith(prefix) else path


class _Builder:
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.instructions: list[ParsedInstruction] = []
        self.headings: list[tuple[int, str]] = []
        self.sections: list[dict] = []
        self.lead_ins: list[LeadIn] = []

    @property
    def section(self) -> str:
        return SECTION_SEPARATOR.join(title for _, title in self.headings)

    def walk(self, nodes, label: str = "") -> None:
        skip_next = False
        for index, node in enumerate(nodes):
            if skip_next:
                skip_next = False
                continue
            following = nodes[index + 1] if index + 1 < len(nodes) else None
            if node.type == "heading":
                level = int(node.tag[1])
                title = _inline_text(node)
                self.headings = [h for h in self.headings if h[0] < level] + [(level, title)]
                self.sections.append(
                    {"title": title, "path": self.section, "level": level,
                     "line": node.map[0] + 1, "items": 0}
                )  # fmt: skip
                label = ""
            elif node.type == "paragraph":
                own = _inline_text(node)
                if own.rstrip().endswith(":") and following is not None:
                    if following.type in {"bullet_list", "ordered_list"}:
                        before = len(self.instructions)
                        self.walk_list(following, label=own.rstrip(" :"))
                        self.lead_ins.append(
                            LeadIn(own, node.map[0] + 1, len(self.instructions) - before)
                        )
                        skip_next = True
                        continue
                    if following.type in {"fence", "code_block"}:
                        self.add("paragraph", node.map[0], following.map[1], label)
                        skip_next = True
                        continue
                self.add("paragraph", node.map[0], node.map[1], label)
            elif node.type in {"bullet_list", "ordered_list"}:
                self.walk_list(node, label=label)
            elif node.type in {"fence", "code_block"}:
                self.add("code", node.map[0], node.map[1], label)
            elif node.type == "table":
                for row in _table_body_rows(node):
                    self.add("table_row", row.map[0], row.map[1], label)
                    self._count_item()
            elif node.type == "blockquote":
                self.walk(node.children, label=label)

    def walk_list(self, node, *, label: str) -> None:
        for item in node.children:
            nested = [c for c in item.children if c.type in {"bullet_list", "ordered_list"}]
            own_nodes = [c for c in item.children if c.type == "paragraph"]
            own = _inline_text(own_nodes[0]) if own_nodes else ""
            if nested and (own.endswith(":") or len(own.split()) <= GROUP_LABEL_MAX_WORDS):
                group = own.rstrip(" :")
                for child in nested:
                    self.walk_list(
                        child, label=f"{label}{SECTION_SEPARATOR}{group}" if label else group
                    )
                continue
            self.add("item", item.map[0], item.map[1], label)
            self._count_item()

    def _count_item(self) -> None:
        if self.sections:
            self.sections[-1]["items"] += 1

    def add(self, kind: str, start: int, end: int, label: str) -> None:
        while end > start + 1 and not self.lines[end - 1].strip():
            end -= 1
        text = "\n".join(self.lines[start:end]).strip("\n")
        if not text.strip():
            return
        section = self.section
        if label:
            section = f"{section}{SECTION_SEPARATOR}{label}" if section else label
        category, basis = categorise(text, section=section, kind=kind)
        self.instructions.append(
            ParsedInstruction(
                position=len(self.instructions) + 1,
                section=section,
                kind=kind,
                text=text,
                line_start=start + 1,
                line_end=end,
                category=category,
                category_basis=basis,
            )
        )

    def finish_sections(self) -> list[Section]:
        return [
            Section(s["title"], s["path"], s["level"], s["line"], s["items"]) for s in self.sections
        ]


def _inline_text(node) -> str:
    for child in node.children:
        if child.type == "inline":
            return child.content.strip()
    return (node.content or "").strip()


def _table_body_rows(table):
    for part in table.children:
        if part.type == "tbody":
            yield from part.children


def _generated_sections(lines: list[str]) -> list[GeneratedSection]:
    found: list[GeneratedSection] = []
    open_start: tuple[int, dict[str, str]] | None = None
    for number, line in enumerate(lines, start=1):
        start = GENERATED_START.search(line)
        if start and not GENERATED_END.search(line):
            if open_start is not None:
                found.append(_generated(lines, open_start, None))
            attrs = {
                m["key"].lower().replace("-", "_"): m["value"].strip("\"'")
                for m in _ATTR.finditer(start["attrs"])
            }
            open_start = (number, attrs)
        elif GENERATED_END.search(line) and open_start is not None:
            found.append(_generated(lines, open_start, number))
            open_start = None
    if open_start is not None:
        found.append(_generated(lines, open_start, None))
    return found


def _generated(lines, start: tuple[int, dict[str, str]], end: int | None) -> GeneratedSection:
    line_start, attrs = start
    body_end = (end - 1) if end else len(lines)
    return GeneratedSection(
        line_start=line_start,
        line_end=end,
        source=attrs.get("from") or attrs.get("source") or "",
        fingerprint=attrs.get("fingerprint") or attrs.get("sha256") or attrs.get("sha") or "",
        body="\n".join(lines[line_start:body_end]),
        attrs=attrs,
    )


# --- categories ---------------------------------------------------------------

COMMAND_WORDS = frozenset(
    [
        "make",
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "bun",
        "node",
        "deno",
        "pytest",
        "python",
        "python3",
        "pip",
        "pip3",
        "uv",
        "uvx",
        "poetry",
        "pipenv",
        "tox",
        "nox",
        "ruff",
        "black",
        "mypy",
        "pyright",
        "flake8",
        "isort",
        "pre-commit",
        "cargo",
        "rustc",
        "go",
        "gradle",
        "gradlew",
        "mvn",
        "dotnet",
        "bundle",
        "bundler",
        "rake",
        "rails",
        "rspec",
        "php",
        "composer",
        "artisan",
        "docker",
        "docker-compose",
        "kubectl",
        "helm",
        "terraform",
        "just",
        "bazel",
        "cmake",
        "ctest",
        "ninja",
        "git",
        "gh",
        "jest",
        "vitest",
        "mocha",
        "tsc",
        "eslint",
        "prettier",
        "playwright",
        "manage.py",
        "django-admin",
        "alembic",
        "celery",
        "swift",
        "xcodebuild",
        "flutter",
        "dart",
        "mix",
        "elixir",
        "sbt",
        "lein",
        "./gradlew",
        "./mvnw",
        "bash",
        "sh",
        "zsh",
        "nix",
    ]
)
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(?P<body>.*?)^\1", re.MULTILINE | re.DOTALL)

_KEYWORDS: dict[Category, tuple[re.Pattern, ...]] = {
    Category.BUILD_TEST: (
        re.compile(r"\b(build|builds|test|tests|testing|lint|linting|compile|install|"
                   r"typecheck|type-check|run|runs|ci|migrations?|deploy|format)\b", re.I),
    ),
    Category.FAILURE_PREVENTION: (
        re.compile(r"\b(never|do not|don't|must not|mustn't|avoid|forbidden|prohibited|"
                   r"under no circumstances|do n't)\b", re.I),
        re.compile(r"\b(otherwise|or else|breaks?|broke|will fail|corrupt|incident|"
                   r"regress\w*|data loss|careful|warning|important|always)\b", re.I),
    ),
    Category.ARCHITECTURE: (
        re.compile(r"\b(architecture|directory|directories|folder|module|modules|package|"
                   r"packages|layer|layers|service|services|component|components|lives in|"
                   r"located in|contains|structure|overview|responsible for|entry point|"
                   r"monorepo|backend|frontend|database|schema)\b", re.I),
    ),
    Category.CONVENTION: (
        re.compile(r"\b(naming|name|names|style|prefer|instead of|camelcase|snake_case|"
                   r"pascalcase|kebab-case|indent\w*|commit messages?|type hints?|docstrings?|"
                   r"conventions?|comments?|imports?|should|consistent|line length|quotes?)\b",
                   re.I),
    ),
}  # fmt: skip

_HEADING_HINTS: dict[Category, re.Pattern] = {
    Category.BUILD_TEST: re.compile(
        r"\b(build|test|tests|testing|commands?|setup|development|dev|ci|running|scripts?|"
        r"tooling|verification)\b",
        re.I,
    ),
    Category.FAILURE_PREVENTION: re.compile(
        r"\b(rules?|don'?ts?|do not|pitfalls?|gotchas?|warnings?|safety|prohibitions?|"
        r"never|caution|constraints?|incidents?|failure)\b",
        re.I,
    ),
    Category.ARCHITECTURE: re.compile(
        r"\b(architecture|structure|overview|layout|project|repository|repo|map|"
        r"components?|services?|modules?)\b",
        re.I,
    ),
    Category.CONVENTION: re.compile(
        r"\b(conventions?|style|guidelines?|coding standards?|naming|formatting)\b", re.I
    ),
}

_PRIORITY = [
    Category.FAILURE_PREVENTION,
    Category.BUILD_TEST,
    Category.ARCHITECTURE,
    Category.CONVENTION,
]


def code_snippets(text: str) -> list[str]:
    """Inline code spans and the lines of fenced blocks, in order."""
    snippets = []
    for block in _FENCE.finditer(text + ("\n" if not text.endswith("\n") else "")):
        snippets.extend(line for line in block["body"].split("\n") if line.strip())
    without_fences = _FENCE.sub("", text + "\n")
    snippets.extend(m.group(1) for m in _CODE_SPAN.finditer(without_fences))
    return snippets


def looks_like_command(snippet: str) -> bool:
    words = snippet.strip().lstrip("$> ").split()
    if not words:
        return False
    first = words[0]
    return first in COMMAND_WORDS or first.startswith("./") or first.endswith(".sh")


def categorise(text: str, *, section: str = "", kind: str = "paragraph") -> tuple[Category, str]:
    """Guess a category from the text and its section; return it with the reasons."""
    scores = dict.fromkeys(_PRIORITY, 0)
    reasons: dict[Category, list[str]] = {c: [] for c in _PRIORITY}
    commands = [s for s in code_snippets(text) if looks_like_command(s)]
    if commands:
        scores[Category.BUILD_TEST] += 3
        reasons[Category.BUILD_TEST].append(f"names the command `{commands[0].strip()[:60]}`")
    for category, patterns in _KEYWORDS.items():
        for weight, pattern in zip((2, 1), patterns, strict=False):
            hits = sorted({m.group(0).lower() for m in pattern.finditer(text)})
            if hits:
                weight = weight if len(patterns) > 1 else 1
                scores[category] += weight * min(len(hits), 3)
                reasons[category].append("words: " + ", ".join(hits[:4]))
    for category, pattern in _HEADING_HINTS.items():
        heading = next(
            (part for part in reversed(section.split(SECTION_SEPARATOR)) if pattern.search(part)),
            None,
        )
        if heading:
            scores[category] += 2
            reasons[category].append(f"under “{heading}”")
    best = max(_PRIORITY, key=lambda c: (scores[c], -_PRIORITY.index(c)))
    if scores[best] == 0:
        return Category.OTHER, "no category signal"
    return best, "; ".join(reasons[best])
