"""Sidebar entry for context files."""

from governance.navigation import NavItem

ITEMS = [NavItem("Qualification", "Context files", "contextfiles:file_list", order=340)]
