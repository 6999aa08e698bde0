"""Validation rules for specs, each written once: model fields, forms, serializers and
services all call these, so a rule and its message cannot drift apart."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

COMMIT_MESSAGE = "Give a git commit hash: 7 to 64 hexadecimal digits."
MAX_OUTPUT_BYTES = 5 * 1024 * 1024

validate_commit = RegexValidator(r"\A[0-9a-fA-F]{7,64}\Z", COMMIT_MESSAGE, code="invalid_commit")


def validate_output_size(output: str | bytes) -> None:
    """A verification's raw output is stored verbatim, up to MAX_OUTPUT_BYTES."""
    size = len(output.encode() if isinstance(output, str) else output)
    if size > MAX_OUTPUT_BYTES:
        raise ValidationError(
            f"Raw output is over the limit of {MAX_OUTPUT_BYTES:,} bytes.", code="too_large"
        )
