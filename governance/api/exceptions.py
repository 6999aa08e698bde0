"""One error shape for the API: DRF's, plus the domain errors and Django validation errors.

Every `governance.errors.DomainError` answers its class's status with `as_body()` here, so no
view or viewset maps a domain error itself.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from governance.errors import DomainError

BodyRenderer = Callable[[DomainError, dict], dict]
_renderers: dict[type[DomainError], BodyRenderer] = {}


def register_body(error_class: type[DomainError], render: BodyRenderer) -> None:
    """Render `error_class`'s body with `render(exc, context)` instead of `as_body()`.

    For an error whose body holds objects the API serializes with the request (a tombstone
    with its links); the status still comes from the class.
    """
    _renderers[error_class] = render


def domain_error_body(exc: DomainError, context: dict) -> dict:
    for cls in type(exc).__mro__:
        if cls in _renderers:
            return _renderers[cls](exc, context)
    return exc.as_body()


def exception_handler(exc, context):
    if isinstance(exc, DomainError):
        set_rollback()
        return Response(domain_error_body(exc, context), status=exc.status)
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, Http404):
        message = str(exc) or "Not found."
        return Response({"detail": message}, status=status.HTTP_404_NOT_FOUND)
    return drf_exception_handler(exc, context)
