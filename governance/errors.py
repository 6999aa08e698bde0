"""The one error vocabulary of services: each class names the HTTP status it maps to.

Services raise these and import nothing from DRF. The API exception handler
(`governance.api.exceptions`) and the page base view map them, once each.
"""

from __future__ import annotations

from typing import Any


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
    """Bad input from a user (400): a clear message, never retried."""


class Conflict(DomainError):
    """The request conflicts with the current state (409); `payload` says with what."""

    status = 409
    code = "conflict"


class Gone(DomainError):
    """The object existed and is gone for good (410)."""

    status = 410
    code = "gone"


class Forbidden(DomainError):
    """The user's role does not allow this (403)."""

    status = 403
    code = "forbidden"
