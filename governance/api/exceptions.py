"""One error shape for the API: DRF's, plus Django validation errors and conflicts."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from governance.services import InputError


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class Gone(exceptions.APIException):
    status_code = status.HTTP_410_GONE
    default_detail = "This resource is gone."
    default_code = "gone"


def exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, InputError):
        exc = exceptions.ValidationError({"detail": str(exc)})
    elif isinstance(exc, Http404):
        message = str(exc) or "Not found."
        return Response({"detail": message}, status=status.HTTP_404_NOT_FOUND)
    return drf_exception_handler(exc, context)
