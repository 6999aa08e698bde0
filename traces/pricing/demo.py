"""Demo prices: the built-in list prices as version 1 of the demo workspace's price table.

Idempotent: loaded only when the workspace has no price table yet.
"""

from __future__ import annotations

from traces.pricing import selectors, services


def seed(*, workspace, users, stdout) -> None:
    if selectors.price_table_current(workspace=workspace) is not None:
        stdout.write("  price table already present")
        return
    version = services.price_table_load_list_prices(workspace=workspace, user=users.get("admin"))
    stdout.write(f"  price table v{version.number}: {version.note}")
