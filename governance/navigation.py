"""Navigation menu, assembled from each app's `navigation.py` (NetBox-style)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import import_module

from django.apps import apps
from django.urls import NoReverseMatch, reverse

GROUP_ORDER = ["Overview", "Traces", "Qualification", "Specifications", "Artifacts", "Workspace"]


@dataclass(frozen=True)
class NavItem:
    group: str
    label: str
    url_name: str
    order: int = 100
    min_role: int = 10


@cache
def all_items() -> tuple[NavItem, ...]:
    items: list[NavItem] = []
    for config in apps.get_app_configs():
        try:
            module = import_module(f"{config.name}.navigation")
        except ModuleNotFoundError as exc:
            if exc.name != f"{config.name}.navigation":
                raise
            continue
        items.extend(getattr(module, "ITEMS", []))
    return tuple(items)


def menu_for(*, workspace, role: int, current_path: str) -> list[dict]:
    groups: dict[str, list[dict]] = {}
    entries = []
    for item in sorted(all_items(), key=lambda i: (i.order, i.label)):
        if role < item.min_role:
            continue
        try:
            url = reverse(item.url_name, kwargs={"workspace": workspace.slug})
        except NoReverseMatch:
            continue
        entry = {"label": item.label, "url": url, "active": False}
        entries.append(entry)
        groups.setdefault(item.group, []).append(entry)
    # Only the longest matching entry is current, so a nested page does not light its parent too.
    matches = [e for e in entries if _is_active(e["url"], current_path, workspace)]
    if matches:
        max(matches, key=lambda e: len(e["url"]))["active"] = True
    ordered = [g for g in GROUP_ORDER if g in groups] + sorted(set(groups) - set(GROUP_ORDER))
    return [{"name": name, "items": groups[name]} for name in ordered]


def _is_active(url: str, current_path: str, workspace) -> bool:
    home = reverse("dashboard", kwargs={"workspace": workspace.slug})
    if url == home:
        return current_path == home
    return current_path.startswith(url)


ITEMS = [
    NavItem("Overview", "Dashboard", "dashboard", order=0),
    NavItem("Workspace", "Jobs", "job_list", order=900),
    NavItem("Workspace", "Members", "members", order=910),
    NavItem("Workspace", "API tokens", "tokens", order=920),
    NavItem("Workspace", "Audit log", "audit_log", order=930),
]
