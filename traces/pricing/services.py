"""Writes to the price table: every change makes a new version, audited."""

from __future__ import annotations

from datetime import date
from decimal import Decimal, InvalidOperation

from django.db import transaction

from governance.errors import Conflict, InputError
from governance.models import Workspace
from governance.services import audit_record
from traces.pricing import selectors
from traces.pricing.analysis.cost import normalise_model
from traces.pricing.analysis.list_prices import LIST_PRICES
from traces.pricing.models import ModelPrice, PriceTableVersion

RATES = {
    "input": "input_rate",
    "output": "output_rate",
    "cache_read": "cache_read_rate",
    "cache_write_5m": "cache_write_5m_rate",
    "cache_write_1h": "cache_write_1h_rate",
}
MAX_RATE = Decimal("1000000")  # dollars per million tokens; far above any real price


def _rate(value, where: str) -> Decimal:
    try:
        rate = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise InputError(
            f"{where}: {value!r} is not a number of dollars per million tokens"
        ) from None
    if not rate.is_finite() or rate < 0:
        raise InputError(f"{where}: must be a number ≥ 0 (dollars per million tokens)")
    if rate >= MAX_RATE:
        raise InputError(f"{where}: {rate} dollars per million tokens is too large")
    if rate != rate.quantize(Decimal("0.000001")):
        raise InputError(f"{where}: at most 6 decimal places")
    return rate


def _clean_price(raw: dict, where: str) -> dict:
    """One row of a price table, checked field by field (errors name the row and field)."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: must be an object with model, rates, as_of and source")
    model = _clean_model(raw, where)
    values = {"model": model, "aliases": _clean_aliases(raw, where, model=model)}
    for name in RATES:
        if raw.get(name) in (None, ""):
            raise InputError(f"{where}.{name}: a rate is required (dollars per million tokens)")
        values[name] = _rate(raw[name], f"{where}.{name}")
    values["as_of"] = _clean_as_of(raw, where)
    source = str(raw.get("source") or "").strip()
    if not source:
        raise InputError(f"{where}.source: say where the rates come from (a page, a contract)")
    values["source"] = source[:500]
    return values


def _clean_model(raw: dict, where: str) -> str:
    model = normalise_model(str(raw.get("model") or ""))
    if not model:
        raise InputError(f"{where}.model: a model name is required, e.g. claude-sonnet-4-5")
    if len(model) > 200:
        raise InputError(f"{where}.model: at most 200 characters")
    return model


def _clean_aliases(raw: dict, where: str, *, model: str) -> list[str]:
    """Other names of the model: a list, or one string split at commas and spaces."""
    aliases = raw.get("aliases") or []
    if isinstance(aliases, str):
        aliases = [a for a in aliases.replace(",", " ").split()]
    if not isinstance(aliases, list | tuple):
        raise InputError(f"{where}.aliases: must be a list of model names")
    return sorted({normalise_model(str(a)) for a in aliases if normalise_model(str(a))} - {model})


def _clean_as_of(raw: dict, where: str) -> date:
    as_of = raw.get("as_of")
    if isinstance(as_of, str):
        try:
            as_of = date.fromisoformat(as_of.strip())
        except ValueError:
            raise InputError(f"{where}.as_of: {as_of!r} is not a date (YYYY-MM-DD)") from None
    if not isinstance(as_of, date):
        raise InputError(f"{where}.as_of: the date the rates were the price is required")
    return as_of


def _row_dict(price: ModelPrice) -> dict:
    return {
        "model": price.model,
        "aliases": list(price.aliases),
        **{name: getattr(price, field) for name, field in RATES.items()},
        "as_of": price.as_of,
        "source": price.source,
    }


def _changes(before: list[dict], after: list[dict]) -> dict:
    old = {row["model"]: row for row in before}
    new = {row["model"]: row for row in after}

    def comparable(row):
        return {
            k: format(v.normalize(), "f") if isinstance(v, Decimal) else v for k, v in row.items()
        }

    return {
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
        "changed": sorted(
            m for m in set(old) & set(new) if comparable(old[m]) != comparable(new[m])
        ),
    }


def price_table_version_create(
    *, workspace: Workspace, user, prices: list[dict], note: str = ""
) -> PriceTableVersion:
    """A new current version holding exactly `prices` (rows: model, aliases, the five rates in
    dollars per million tokens, as_of, source)."""
    if not isinstance(prices, list | tuple):
        raise InputError("prices: must be a list of model prices")
    rows = [_clean_price(raw, f"prices[{i}]") for i, raw in enumerate(prices)]
    seen: dict[str, str] = {}
    for i, row in enumerate(rows):
        for name in (row["model"], *row["aliases"]):
            if name in seen:
                raise InputError(
                    f"prices[{i}]: the name {name!r} is already used by {seen[name]!r}; "
                    "a name must price one model"
                )
            seen[name] = row["model"]
    with transaction.atomic():
        Workspace.objects.select_for_update().filter(pk=workspace.pk).first()  # one writer
        current = selectors.price_table_current(workspace=workspace)
        before = [_row_dict(p) for p in current.prices.all()] if current else []
        changes = _changes(before, rows)
        if current is not None and not any(changes.values()):
            raise Conflict(
                f"Nothing changed: the rows are those of price table v{current.number}.",
                payload={"version": current.number},
            )
        version = PriceTableVersion.objects.create(
            workspace=workspace,
            number=(current.number + 1) if current else 1,
            note=str(note or "").strip()[:500],
            changes=changes,
            created_by=user if getattr(user, "pk", None) else None,
        )
        ModelPrice.objects.bulk_create(
            ModelPrice(
                workspace=workspace,
                version=version,
                **{RATES.get(key, key): value for key, value in row.items()},
            )
            for row in rows
        )
        audit_record(
            workspace=workspace,
            actor=user,
            action="price_table.version_create",
            obj=version,
            data={"number": version.number, "note": version.note, **changes},
        )
    return version


def _current_rows(workspace: Workspace) -> list[dict]:
    current = selectors.price_table_current(workspace=workspace)
    return [_row_dict(p) for p in current.prices.all()] if current else []


def model_price_set(
    *, workspace: Workspace, user, values: dict, replaces: str = "", note: str = ""
) -> PriceTableVersion:
    """Add a model's price, or change the one named `replaces`, as a new version."""
    row = _clean_price(values, "price")
    current = _current_rows(workspace)
    rows = [r for r in current if r["model"] not in {replaces, row["model"]}]
    verb = "changed" if len(rows) < len(current) else "added"
    rows.append(row)
    return price_table_version_create(
        workspace=workspace, user=user, prices=rows, note=note or f"{row['model']} {verb}"
    )


def model_price_remove(
    *, workspace: Workspace, user, model: str, note: str = ""
) -> PriceTableVersion:
    rows = _current_rows(workspace)
    kept = [r for r in rows if r["model"] != model]
    if len(kept) == len(rows):
        raise InputError(f"model: {model!r} is not in the current price table")
    return price_table_version_create(
        workspace=workspace, user=user, prices=kept, note=note or f"{model} removed"
    )


def price_table_load_list_prices(*, workspace: Workspace, user) -> PriceTableVersion:
    """Add the built-in list prices of the models the table does not price yet."""
    rows = _current_rows(workspace)
    taken = {name for r in rows for name in (r["model"], *r["aliases"])}
    added = [dict(p) for p in LIST_PRICES if not ({p["model"], *p["aliases"]} & taken)]
    if not added:
        raise Conflict("The price table already prices every model of the list prices.")
    return price_table_version_create(
        workspace=workspace,
        user=user,
        prices=rows + added,
        note=f"list prices as of {added[0]['as_of'].isoformat()} loaded for {len(added)} models",
    )
