"""What a finished job led to, contributed by each app's `jobs.py` through
`job_sections(job)`: the job page shows these sections below its counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module

from django.apps import apps


@dataclass
class JobSection:
    """A part of the job page: `template` is rendered with `section` in its context."""

    title: str
    template: str
    links: list[tuple[str, str]] = field(default_factory=list)  # (label, url)
    data: dict = field(default_factory=dict)


def sections_for(job) -> list[JobSection]:
    sections = []
    for config in apps.get_app_configs():
        try:
            module = import_module(f"{config.name}.jobs")
        except ModuleNotFoundError as exc:
            if exc.name != f"{config.name}.jobs":
                raise
            continue
        contribute = getattr(module, "job_sections", None)
        if contribute is not None and config.name != "governance":
            sections += contribute(job)
    return sections
