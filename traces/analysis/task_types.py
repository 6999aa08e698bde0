"""Classify a run's task type from its tool-call signatures (documented rules, shown in the UI).

Each tool call's signature token (see `traces.formats.tools`) counts towards at most one
category. The rules are applied in order; the first that holds decides:

1. **driving a PR to merge**: at least 2 PR calls (`gh pr`, `gh run`, `git push`,
   `git rebase`, `git merge`, GitHub MCP tools) and at least 10% of tool calls;
2. **QA / dogfooding**: browser and app checks (Playwright/Puppeteer/Chrome tools,
   `curl`, screenshots) are at least 25% of tool calls;
3. **building**: at least one edit, and edits plus build/test commands (`pytest`,
   `npm test`, `make`, `cargo build`, linters …) are at least 20% of tool calls;
4. **research**: web search and fetch are at least 30% of tool calls;
5. **code understanding**: reads and searches (`Read`, `Grep`, `Glob`, `rg`, `git log` …)
   are at least 40% of tool calls;
6. otherwise the category with the most calls; **unclassified** when the run made none.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

PR = "pr_to_merge"
QA = "qa"
BUILDING = "building"
RESEARCH = "research"
UNDERSTANDING = "code_understanding"
UNCLASSIFIED = "unclassified"

_PR_COMMANDS = {"gh-pr", "gh-run", "gh-api", "git-push", "git-rebase", "git-merge", "gh-issue"}
_QA_COMMANDS = {"curl", "wget", "playwright", "http", "httpie", "lighthouse", "open"}
_BUILD_COMMANDS = {
    "pytest", "npm-test", "npm-run", "pnpm-test", "pnpm-run", "yarn-test", "yarn-run", "make",
    "cargo-build", "cargo-test", "cargo-check", "cargo-clippy", "go-build", "go-test", "tsc", "jest",
    "vitest", "ruff", "eslint", "mypy", "tox", "nox", "gradle", "mvn", "uv-run", "poetry-run",
    "npm-install", "pip", "pip3", "docker-build", "cmake", "ctest", "node", "python", "python3",
}  # fmt: skip
_READ_COMMANDS = {
    "rg", "grep", "find", "ls", "cat", "sed", "head", "tail", "nl", "wc", "tree", "fd", "ag",
    "git-log", "git-show", "git-diff", "git-blame", "git-status", "git-grep",
}  # fmt: skip
_EDIT_TOOLS = {
    "Edit",
    "MultiEdit",
    "Write",
    "NotebookEdit",
    "apply_patch",
    "write_file",
    "edit_file",
}
_READ_TOOLS = {"Read", "Grep", "Glob", "LS", "NotebookRead", "read_file", "view_image", "list_dir"}
_RESEARCH_TOOLS = {"WebSearch", "WebFetch", "web_search_call", "web_search", "fetch"}

LABELS = {
    PR: "driving a PR to merge",
    QA: "QA / dogfooding",
    BUILDING: "building",
    RESEARCH: "research",
    UNDERSTANDING: "code understanding",
    UNCLASSIFIED: "unclassified",
}


@dataclass(frozen=True)
class Classification:
    task_type: str
    reason: str
    counts: dict


def category_of(token: str) -> str | None:
    if token.startswith("Bash:"):
        command = token[5:]
        if command in _PR_COMMANDS:
            return PR
        if command in _QA_COMMANDS:
            return QA
        if command in _BUILD_COMMANDS:
            return BUILDING
        if command in _READ_COMMANDS:
            return UNDERSTANDING
        return None
    if token.startswith("mcp:"):
        server = token.split(":")[1].lower()
        if "github" in server or "gitlab" in server:
            return PR
        if any(word in server for word in ("playwright", "puppeteer", "chrome", "browser")):
            return QA
        if any(word in token.lower() for word in ("search", "fetch", "docs")):
            return RESEARCH
        return None
    if token in _EDIT_TOOLS or token == "Edit":
        return BUILDING
    if token in _READ_TOOLS:
        return UNDERSTANDING
    if token in _RESEARCH_TOOLS:
        return RESEARCH
    if token.startswith(("browser_", "screenshot")):
        return QA
    return None


def classify(tokens: list[str]) -> Classification:
    total = len(tokens)
    if total == 0:
        return Classification(UNCLASSIFIED, "no tool calls in this run", {})
    counts: Counter = Counter()
    edits = 0
    for token in tokens:
        category = category_of(token)
        if category:
            counts[category] += 1
        if token in _EDIT_TOOLS:
            edits += 1

    def share(category: str) -> float:
        return counts[category] / total

    def because(category: str, what: str) -> str:
        return f"{counts[category]} of {total} tool calls {what} ({share(category):.0%})"

    if counts[PR] >= 2 and share(PR) >= 0.10:
        return Classification(PR, because(PR, "drive a PR (gh pr, git push, …)"), dict(counts))
    if share(QA) >= 0.25:
        return Classification(QA, because(QA, "check the app (browser, curl, …)"), dict(counts))
    if edits >= 1 and share(BUILDING) >= 0.20:
        return Classification(BUILDING, because(BUILDING, "edit files or build/test"), dict(counts))
    if share(RESEARCH) >= 0.30:
        return Classification(RESEARCH, because(RESEARCH, "search or fetch the web"), dict(counts))
    if share(UNDERSTANDING) >= 0.40:
        return Classification(
            UNDERSTANDING, because(UNDERSTANDING, "read or search code"), dict(counts)
        )
    if counts:
        category, _ = counts.most_common(1)[0]
        return Classification(
            category, because(category, "fall in this category, the largest"), dict(counts)
        )
    return Classification(UNCLASSIFIED, f"none of the {total} tool calls matches a rule", {})
