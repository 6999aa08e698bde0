"""Shared benchmark helpers: machine description, medians, and RESULTS.md sections."""

from __future__ import annotations

import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HEADER = "# Benchmark results\n\nEach section is written by its benchmark; rerun the command it names to refresh it.\n"


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    postgres = ""
    try:
        postgres = subprocess.run(
            ["psql", "--version"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem_gb:.0f} GB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}" + (f", {postgres}" if postgres else "")
    )


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[], object], repeat: int = 5) -> tuple[float, list[float]]:
    """Median seconds over `repeat` runs, and all the samples."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), samples


def write_section(name: str, body: str, command: str | None = None) -> None:
    """Replace (or append) the section `name` of bench/RESULTS.md."""
    command = command or "python " + " ".join(sys.argv)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = (
        f"<!-- bench:{name} -->\n## {name}\n\n"
        f"- Command: `{command}`\n- Machine: {machine()}\n- Run: {stamp}\n\n{body.strip()}\n"
        f"<!-- /bench:{name} -->"
    )
    text = RESULTS.read_text() if RESULTS.exists() else HEADER
    pattern = re.compile(
        rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S
    )
    text = (
        pattern.sub(lambda _: section, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + section + "\n"
    )
    RESULTS.write_text(text)
