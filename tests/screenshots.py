"""Screenshots of a page at the widths issue 16 asks for, for a person to look at."""

import os
from pathlib import Path

WIDTHS = (1280, 1920)


def shoot_widths(page, name: str) -> None:
    """Full-page screenshots at each width when GOVERNANCE_SCREENSHOTS names a folder."""
    folder = os.environ.get("GOVERNANCE_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(Path(folder) / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size(size)
