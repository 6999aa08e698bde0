"""The one error vocabulary of services: each class names the HTTP status it maps to.

Services raise these and import nothing from DRF. The API exception handler
(`governance.api.exceptions`) and the page base view map them, once each.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied


class DomainError(Exception):
    """A request the domain refuses; `message` is shown to the user as it is."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, code: str | None = None, payload: dict | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.payload: dict[str, Any] = payload or {}

    def as_body(self) -> dict[str, Any]:
        """The JSON body of the error: its message, its code and its payload."""
        return {"detail": self.message, "code": self.code, **self.payload}


class InputError(DomainError, ValueError):
    """Bad input from a user (400): a clear message, never retried.

    `field_errors` ({field: [messages]}) names the input fields at fault: a page binds them to
    its form's fields and the API answers them in DRF's validation shape. Build one with
    `InputError.for_fields({"slug": "Taken."})`.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        payload: dict | None = None,
        field_errors: dict[str, list[str]] | None = None,
    ):
        super().__init__(message, code=code, payload=payload)
        self.field_errors: dict[str, list[str]] = {
            name: list(messages) for name, messages in (field_errors or {}).items()
        }

    @classmethod
    def for_fields(cls, errors: dict[str, str | list[str]], **kwargs) -> InputError:
        """One error for several fields; its message joins theirs."""
        field_errors = {
            name: [messages] if isinstance(messages, str) else list(messages)
            for name, messages in errors.items()
        }
        message = " ".join(m for messages in field_errors.values() for m in messages)
        return cls(message, field_errors=field_errors, **kwargs)

    def as_body(self) -> dict[str, Any]:
        """With field errors, DRF's validation shape ({field: [messages]}), as a serializer
        answers; otherwise the message and code."""
        if self.field_errors:
            return {**self.field_errors, **self.payload}
        return super().as_body()


class Conflict(DomainError):
    """The request conflicts with the current state (409); `payload` says with what."""

    status = 409
    code = "conflict"


class Gone(DomainError):
    """The object existed and is gone for good (410)."""

    status = 410
    code = "gone"


class Forbidden(DomainError, PermissionDenied):
    """The user's role does not allow this (403); Django's `PermissionDenied` too, so code
    (and Django itself) handling that one handles it."""

    status = 403
    code = "forbidden"
