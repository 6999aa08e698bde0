"""Home dashboard cards, contributed by each app's `dashboard.py` through `card(workspace)`."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module

from django.apps import apps


@dataclass
class DashboardCard:
    title: str
    order: int
    stats: list[tuple[str, str]] = field(default_factory=list)
    empty: bool = True
    empty_message: str = ""
    action_label: str = ""
    action_url: str = ""
    link_label: str = ""
    link_url: str = ""


def cards_for(workspace) -> list[DashboardCard]:
    cards = []
    for config in apps.get_app_configs():
        try:
            module = import_module(f"{config.name}.dashboard")
        except ModuleNotFoundError as exc:
            if exc.name != f"{config.name}.dashboard":
                raise
            continue
        card = getattr(module, "card", None)
        if card is not None and config.name != "governance":
            cards.append(card(workspace))
    return sorted(cards, key=lambda c: c.order)
