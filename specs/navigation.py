"""Sidebar entries for specifications, the review queue and restart packages."""

from governance.models import Role
from governance.navigation import NavItem

ITEMS = [
    NavItem("Specifications", "Specifications", "specs:spec_list", order=400),
    NavItem(
        "Specifications", "Review queue", "specs:review_queue", order=410, min_role=Role.REVIEWER
    ),
    NavItem("Specifications", "Restart packages", "specs:package_list", order=420),
]
