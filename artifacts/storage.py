"""Artifact content in Django storage: staged writes published atomically, seekable reads.

Local storage (the default) stages a write in `artifacts/.incoming/` next to its final
place, then hard-links it into place, which is atomic and never overwrites. Object storage
(django-storages S3) stages in a local temporary file and uploads it; the object appears
only when the upload completes. Reads return a seekable binary file: a plain file locally,
and for S3 a reader that fetches byte ranges, because S3Storage.open() downloads the whole
object before the first read.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, default_storage, storages

PREFIX = "artifacts"
INCOMING = f"{PREFIX}/.incoming"
STALE_AFTER_SECONDS = 24 * 3600


class StorageFailed(Exception):
    """Storage refused a write or a delete; the message says what happened."""


def artifact_storage() -> Storage:
    """The `artifacts` storage if configured, else the default storage."""
    if "artifacts" in settings.STORAGES:
        return storages["artifacts"]
    return default_storage


def is_local(storage: Storage) -> bool:
    try:
        storage.path(PREFIX)
    except NotImplementedError:
        return False
    return True


def storage_name_for(*, workspace_id: int, artifact_id: uuid.UUID) -> str:
    """The only name content is stored under: derived from server-generated ids."""
    hex_id = artifact_id.hex
    return f"{PREFIX}/{int(workspace_id)}/{hex_id[:2]}/{hex_id}"


class StagedBlob:
    """A write in progress. `publish()` moves it to its final name; `discard()` removes it."""

    def __init__(self, storage: Storage | None = None):
        self.storage = storage or artifact_storage()
        self.local = is_local(self.storage)
        try:
            if self.local:
                incoming = Path(self.storage.path(INCOMING))
                incoming.mkdir(parents=True, exist_ok=True)
                fd, path = tempfile.mkstemp(dir=incoming, suffix=".part")
            else:
                fd, path = tempfile.mkstemp(suffix=".artifact.part")
        except OSError as exc:
            raise StorageFailed(f"cannot stage the artifact: {exc.strerror or exc}") from exc
        self.path = path
        self.file = os.fdopen(fd, "wb")
        self.published_name: str | None = None

    def write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError as exc:
            raise StorageFailed(f"cannot write the artifact: {exc.strerror or exc}") from exc

    def publish(self, name: str) -> None:
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            if self.local:
                final = Path(self.storage.path(name))
                final.parent.mkdir(parents=True, exist_ok=True)
                os.link(self.path, final)  # fails rather than overwrite
                os.unlink(self.path)
            else:
                with open(self.path, "rb") as handle:
                    saved = self.storage.save(name, File(handle, name=name))
                os.unlink(self.path)
                if saved != name:
                    self.storage.delete(saved)
                    raise StorageFailed(f"storage renamed {name} to {saved}")
        except OSError as exc:
            self.discard()
            raise StorageFailed(f"cannot publish the artifact: {exc.strerror or exc}") from exc
        self.published_name = name

    def unpublish(self) -> None:
        """Undo a publish whose database row did not commit."""
        if self.published_name:
            blob_delete(self.published_name, storage=self.storage)
            self.published_name = None

    def discard(self) -> None:
        try:
            self.file.close()
        except OSError:
            pass
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def blob_open(name: str, storage: Storage | None = None) -> BinaryIO:
    """A seekable binary file; the caller seeks and reads only the bytes it needs."""
    storage = storage or artifact_storage()
    if is_local(storage):
        return storage.open(name, "rb")  # FileSystemStorage: a plain file, read on demand
    return io.BufferedReader(RangedObjectReader(storage, name), buffer_size=256 * 1024)


def blob_delete(name: str, storage: Storage | None = None) -> None:
    storage = storage or artifact_storage()
    try:
        storage.delete(name)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StorageFailed(f"cannot delete {name}: {exc}") from exc


def stale_staging_remove(storage: Storage | None = None, *, now: float | None = None) -> int:
    """Remove staged writes left by a process that died mid-write. Local storage only."""
    storage = storage or artifact_storage()
    if not is_local(storage):
        return 0
    incoming = Path(storage.path(INCOMING))
    if not incoming.is_dir():
        return 0
    cutoff = (now or time.time()) - STALE_AFTER_SECONDS
    removed = 0
    for entry in incoming.glob("*.part"):
        try:
            if entry.stat().st_mtime < cutoff:
                entry.unlink()
                removed += 1
        except FileNotFoundError:
            pass
    return removed


class RangedObjectReader(io.RawIOBase):
    """A seekable reader over an S3 object that fetches only the byte ranges asked for."""

    def __init__(self, storage: Storage, name: str):
        from storages.utils import clean_name

        self._object = storage.bucket.Object(storage._normalize_name(clean_name(name)))
        self._size = self._object.content_length
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer) -> int:
        if self._position >= self._size or len(buffer) == 0:
            return 0
        end = min(self._size, self._position + len(buffer)) - 1
        body = self._object.get(Range=f"bytes={self._position}-{end}")["Body"]
        data = body.read()
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)
