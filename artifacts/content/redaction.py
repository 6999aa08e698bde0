"""Streaming redaction: secrets are replaced before a byte is stored, across chunk boundaries.

All rules run as one RE2 alternation (linear time, so an administrator's pattern cannot
stall a write). Every rule has a bounded match length, so a match that starts before the
last `OVERLAP` bytes of the buffered input is final; the tail is held back and re-scanned
with the next chunk. A rule may name a `(?P<secret>…)` group to replace only that part
(keeping, say, the `password=` in front of it). A PEM private key is replaced whole, from
its BEGIN line to its END line (or, when the END line never comes, through the key body).
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from dataclasses import dataclass

import re2

OVERLAP = 64 * 1024
MAX_KEY_BLOCK = 32 * 1024
MAX_CUSTOM_WIDTH = 8 * 1024
CONTEXT = 256
_NAME = re.compile(r"^[a-z0-9_]{1,40}$")
_SECRET_GROUP = "(?P<secret>"


class RedactionPatternError(ValueError):
    """A redaction pattern that cannot be used; the message says why."""


@dataclass(frozen=True)
class RedactionRule:
    name: str
    pattern: str
    description: str = ""


DEFAULT_RULES: tuple[RedactionRule, ...] = (
    RedactionRule(
        "private_key",
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----",
        "PEM private keys, BEGIN line through END line",
    ),
    RedactionRule("aws_access_key_id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "AWS access key ids"),
    RedactionRule(
        "aws_secret_access_key",
        r"(?i:aws_secret_access_key|aws_secret_key)[\"']?\s{0,5}[:=]\s{0,5}[\"']?"
        r"(?P<secret>[A-Za-z0-9/+=]{40})",
        "AWS secret keys in assignments",
    ),
    RedactionRule(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
        "GitHub personal, OAuth, app and fine-grained tokens",
    ),
    RedactionRule(
        "llm_api_key",
        r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,300}",
        "OpenAI- and Anthropic-style sk- keys",
    ),
    RedactionRule("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,255}", "Slack tokens"),
    RedactionRule("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", "Google API keys"),
    RedactionRule("stripe_key", r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,255}", "Stripe keys"),
    RedactionRule(
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,1000}\.eyJ[A-Za-z0-9_-]{8,1000}\.[A-Za-z0-9_-]{8,1000}",
        "JSON Web Tokens",
    ),
    RedactionRule(
        "context_governance_token",
        r"\bcg_[0-9a-f]{8}_[A-Za-z0-9_-]{20,100}",
        "This application's API tokens",
    ),
    RedactionRule(
        "bearer_token",
        r"(?i:bearer)\s{1,10}(?P<secret>[A-Za-z0-9._~+/=-]{16,1000})",
        "Bearer credentials, e.g. in Authorization headers",
    ),
    RedactionRule(
        "password_in_url",
        r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^:/\s@]{1,200}:(?P<secret>[^@\s/]{1,200})@",
        "Passwords in URLs (scheme://user:password@host)",
    ),
    RedactionRule(
        "secret_assignment",
        r"(?i:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token"
        r"|client[_-]?secret|private[_-]?token)[\"']?\s{0,5}[:=]\s{0,5}[\"']?"
        r"(?P<secret>[^\s\"',;&]{4,500})",
        "password=…, api_key: …, client_secret=… and similar assignments",
    ),
)
DEFAULT_RULE_NAMES = tuple(rule.name for rule in DEFAULT_RULES)

_KEY_END = re2.compile(rb"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")
# Without an END line, the key runs on while lines look like PEM body or PEM headers.
_KEY_BODY = re2.compile(rb"(?:\r?\n(?:[A-Za-z0-9+/=]{1,128}|[A-Za-z-]{1,40}: [^\r\n]{0,200}))*")


def replacement_for(name: str) -> bytes:
    return f"[REDACTED:{name}]".encode()


def validate_custom_rule(name: str, pattern: str) -> None:
    """Raise RedactionPatternError unless the rule is safe to stream with."""
    if not _NAME.match(name):
        raise RedactionPatternError(
            f"name {name!r}: use 1–40 lowercase letters, digits or underscores"
        )
    if name in DEFAULT_RULE_NAMES:
        raise RedactionPatternError(f"name {name!r} is a built-in rule; choose another name")
    if not pattern:
        raise RedactionPatternError(f"{name}: the pattern is empty")
    if pattern.count(_SECRET_GROUP) > 1:
        raise RedactionPatternError(f"{name}: use at most one (?P<secret>…) group")
    try:
        compiled = re2.compile(pattern.encode())
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise RedactionPatternError(
            f"{name}: not a valid RE2 pattern ({detail}); lookaround and backreferences "
            "are not supported"
        ) from None
    if compiled.search(b"") is not None:
        raise RedactionPatternError(f"{name}: the pattern matches empty text")
    width = _max_width(name, pattern)
    if width > MAX_CUSTOM_WIDTH:
        raise RedactionPatternError(
            f"{name}: the pattern can match unboundedly long text; bound every repetition, "
            f"e.g. {{1,200}} instead of + or *, so a match stays under {MAX_CUSTOM_WIDTH} bytes"
        )


def _max_width(name: str, pattern: str) -> int:
    """The longest text the pattern can match, from Python's regex parser (RE2 has no API)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import sre_parse
    try:
        return sre_parse.parse(pattern).getwidth()[1]
    except (re.error, OverflowError, RecursionError) as exc:
        raise RedactionPatternError(
            f"{name}: cannot bound the pattern's match length ({exc}); use plain RE2 syntax"
        ) from None


class Redactor:
    """A compiled rule set. `stream()` starts one write's redaction."""

    def __init__(self, rules: tuple[RedactionRule, ...] | list[RedactionRule]):
        self.rules = tuple(rules)
        if not self.rules:
            self._regex = None
            return
        parts = []
        for index, rule in enumerate(self.rules):
            body = rule.pattern.replace(_SECRET_GROUP, f"(?P<s{index}>")
            parts.append(f"(?P<r{index}>{body})")
        options = re2.Options()
        options.max_mem = 64 << 20
        self._regex = re2.compile("|".join(parts).encode(), options)
        groups = self._regex.groupindex
        self._groups = [
            (rule.name, groups[f"r{i}".encode()], groups.get(f"s{i}".encode()))
            for i, rule in enumerate(self.rules)
        ]

    def stream(self) -> RedactionStream:
        return RedactionStream(self)

    def redact(self, data: bytes) -> tuple[bytes, Counter]:
        """Redact a whole (small) value, such as a command line."""
        stream = self.stream()
        out = stream.feed(data) + stream.finish()
        return out, stream.counts


class RedactionStream:
    """Feed chunks in, get redacted bytes out; `finish()` flushes the held-back tail."""

    def __init__(self, redactor: Redactor):
        self._redactor = redactor
        self._context = b""
        self._pending = b""
        self.counts: Counter = Counter()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def feed(self, chunk: bytes) -> bytes:
        if self._redactor._regex is None:
            return chunk
        self._pending += chunk
        if len(self._pending) < 2 * OVERLAP:  # scan in steps of at least OVERLAP bytes
            return b""
        return self._scan(final=False)

    def finish(self) -> bytes:
        if self._redactor._regex is None or not self._pending:
            return b""
        return self._scan(final=True)

    def _scan(self, *, final: bool) -> bytes:
        text = self._context + self._pending
        start = len(self._context)
        safe = len(text) if final else len(text) - OVERLAP
        out: list[bytes] = []
        cursor = start
        for match in self._redactor._regex.finditer(text, start):
            if match.start() >= safe:
                break
            name, span_start, span_end = self._span(match, text)
            if span_start < cursor:
                continue
            out.append(text[cursor:span_start])
            out.append(replacement_for(name))
            cursor = span_end
            self.counts[name] += 1
        commit = max(safe, cursor)
        out.append(text[cursor:commit])
        self._pending = text[commit:]
        self._context = text[max(0, commit - CONTEXT) : commit]
        return b"".join(out)

    def _span(self, match, text: bytes) -> tuple[str, int, int]:
        for name, rule_group, secret_group in self._redactor._groups:
            if match.start(rule_group) == -1:
                continue
            if name == "private_key":
                return name, match.start(), _key_block_end(text, match.end())
            if secret_group is not None and match.start(secret_group) != -1:
                return name, match.start(secret_group), match.end(secret_group)
            return name, match.start(rule_group), match.end(rule_group)
        raise AssertionError("a match without a matching rule group")


def _key_block_end(text: bytes, header_end: int) -> int:
    limit = min(len(text), header_end + MAX_KEY_BLOCK)
    end_line = _KEY_END.search(text, header_end, limit)
    if end_line is not None:
        return end_line.end()
    body = _KEY_BODY.match(text, header_end, limit)
    return body.end() if body is not None else header_end
