"""Helpers for artifact tests: store output through the real service, read stored bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from artifacts import services


@pytest.fixture
def store(workspace, members):
    """store(body, run_id=…, …) -> Artifact, through the same service the API uses."""

    def make(body: bytes, *, run_id: str = "run-1", command: str = "pytest -q", **kwargs):
        kwargs.setdefault("actor", members["editor"])
        return services.artifact_write(
            workspace=kwargs.pop("target_workspace", workspace),
            source=body,
            run_id=run_id,
            command=command,
            **kwargs,
        )

    return make


def stored_bytes(artifact) -> bytes:
    return Path(default_storage.path(artifact.storage_name)).read_bytes()


def artifact_files(root: Path | None = None) -> list[Path]:
    """Every file under the artifacts storage folder (published or staged)."""
    base = Path(default_storage.path("artifacts"))
    return sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []
