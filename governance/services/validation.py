"""A model's own validation (field validators and `clean`), raised as one `InputError`."""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import models

from governance.errors import InputError


def full_clean(
    instance: models.Model, *, exclude: Iterable[str] = (), validate_constraints: bool = False
) -> None:
    """The model's field validators and checks, as one `InputError` naming each field.

    The database checks its constraints on save in any case; `validate_constraints` checks
    them here too, to name the field at fault."""
    try:
        instance.full_clean(exclude=list(exclude), validate_constraints=validate_constraints)
    except ValidationError as exc:
        raise InputError.for_fields(exc.message_dict) from None
