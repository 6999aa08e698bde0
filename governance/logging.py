"""A logging filter that masks bearer tokens, API tokens and passwords in URLs."""

import logging
import re

_PATTERNS = [
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1[redacted]"),
    (re.compile(r"cg_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{20,}"), "[redacted-token]"),
    (re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^:/\s@]+:)[^@\s/]+@"), r"\1[redacted]@"),
    (re.compile(r"(?i)(password[\"']?\s*[:=]\s*[\"']?)[^\s\"',&]+"), r"\1[redacted]"),
]


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_TRACEBACKS = logging.Formatter()


class RedactSecretsFilter(logging.Filter):
    """Mask secrets in the message, and in the traceback and stack text the record carries."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            # Formatters reuse exc_text when it is set, so the masked text is what prints.
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
