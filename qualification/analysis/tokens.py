"""Token counts as people read them. No dependencies, so that light modules can use it."""

from __future__ import annotations


def format_tokens(tokens: int | float | None) -> str:
    """8000 → '8K', 32768 → '32K', 1048576 → '1M', 12500 → '12.5K'."""
    if tokens is None:
        return "–"
    n = int(tokens)
    for unit, sizes in (("M", (1000**2, 1024**2)), ("K", (1000, 1024))):
        for size in sizes:
            if n >= size and n % size == 0:
                return f"{n // size}{unit}"
        if n >= sizes[0]:
            return f"{n / sizes[0]:.1f}".rstrip("0").rstrip(".") + unit
    return str(n)
