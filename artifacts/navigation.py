"""Sidebar entry for artifacts (settings are reached from the list page)."""

from governance.navigation import NavItem

ITEMS = [NavItem("Artifacts", "Artifacts", "artifacts:list", order=500)]
