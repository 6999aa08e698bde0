"""Read a repository listing: a plain file list, `git ls-tree -r` / `sha256sum` output, or a tarball.

Only names (and, for the text forms, content hashes) are read. A tarball is read as a
stream of member headers: nothing is extracted, decompressed bytes and members are
capped (archive bombs), and absolute, parent-relative or control-character names are
skipped with a reason.
"""

from __future__ import annotations

import bz2
import fnmatch
import gzip
import io
import lzma
import posixpath
import re
import tarfile
from dataclasses import dataclass, field
from typing import BinaryIO

MAX_PATHS = 200_000
MAX_PATH_LENGTH = 1024
MAX_DECOMPRESSED_BYTES = 1024**3
MAX_SKIPPED_REPORTED = 50

_LS_TREE = re.compile(r"^[0-7]{6} (?:blob|tree|commit) (?P<hash>[0-9a-f]{40,64})\t(?P<path>.+)$")
_LS_FILES_STAGE = re.compile(r"^[0-7]{6} (?P<hash>[0-9a-f]{40,64}) [0-3]\t(?P<path>.+)$")
_CHECKSUM = re.compile(r"^(?P<hash>[0-9a-fA-F]{32,128}) [ *](?P<path>.+)$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ListingError(ValueError):
    """The listing cannot be read at all (as opposed to single skipped names)."""


@dataclass
class Listing:
    paths: set[str] = field(default_factory=set)
    hashes: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    skipped_count: int = 0
    source_format: str = "file list"
    stripped_root: str = ""

    @property
    def directories(self) -> dict[str, set[str]]:
        """Every folder, with the names directly inside it (computed once per path set)."""
        key = len(self.paths)
        if getattr(self, "_directories_key", None) != key:
            tree: dict[str, set[str]] = {}
            for path in self.paths:
                parts = path.split("/")
                for i in range(1, len(parts)):
                    tree.setdefault("/".join(parts[:i]), set()).add(parts[i])
            self._directories, self._directories_key = tree, key
        return self._directories

    def exists(self, path: str) -> bool:
        path = path.strip("/")
        return path in self.paths or path in self.directories

    def matches(self, pattern: str) -> bool:
        pattern = pattern.strip("/")
        return any(fnmatch.fnmatchcase(p, pattern) for p in (*self.paths, *self.directories.keys()))

    def children(self, directory: str) -> set[str]:
        return set(self.directories.get(directory.strip("/"), set()))

    def hash_of(self, path: str) -> str:
        return self.hashes.get(path.strip("/"), "")

    def _skip(self, name: str, reason: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_SKIPPED_REPORTED:
            self.skipped.append(f"{name[:200]!r}: {reason}")


def clean_path(name: str) -> tuple[str | None, str]:
    """A safe, normalised relative path, or None and why it was refused."""
    if _CONTROL.search(name):
        return None, "contains control characters"
    if len(name) > MAX_PATH_LENGTH:
        return None, f"longer than {MAX_PATH_LENGTH} characters"
    if name.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", name):
        return None, "absolute path"
    if "\\" in name:
        name = name.replace("\\", "/")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None, "climbs out of the repository with '..'"
    path = posixpath.join(*parts) if parts else ""
    return (path or None), ("" if path else "empty name")


def read_text_listing(text: str) -> Listing:
    """One path per line; `git ls-tree -r`, `git ls-files -s` and `sha256sum` lines keep hashes."""
    listing = Listing()
    formats = set()
    for line in text.splitlines():
        raw = line.rstrip("\n\r")
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        digest = ""
        for name, pattern in (
            ("git ls-tree", _LS_TREE),
            ("git ls-files -s", _LS_FILES_STAGE),
            ("checksum list", _CHECKSUM),
        ):
            match = pattern.match(raw)
            if match:
                raw, digest = match["path"], match["hash"].lower()
                formats.add(name)
                break
        else:
            raw = raw.strip()
        _add(listing, raw, digest)
    listing.source_format = ", ".join(sorted(formats)) or "file list"
    _strip_common_root(listing, only_if_marked=False)
    return listing


def _add(listing: Listing, name: str, digest: str = "") -> None:
    path, reason = clean_path(name)
    if path is None:
        listing._skip(name, reason)
        return
    if len(listing.paths) >= MAX_PATHS:
        raise ListingError(f"more than {MAX_PATHS:,} paths; upload a listing of the relevant part")
    listing.paths.add(path)
    if digest:
        listing.hashes[path] = digest


class _CappedReader(io.RawIOBase):
    """Counts decompressed bytes and stops once the cap is passed."""

    def __init__(self, stream, cap: int):
        self.stream, self.cap, self.total = stream, cap, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        self.total += len(data)
        if self.total > self.cap:
            raise ListingError(
                f"the archive expands beyond {self.cap // 1024**2:,} MiB; refusing it as a "
                "possible archive bomb (upload `git ls-files` output instead)"
            )
        buffer[: len(data)] = data
        return len(data)


def _decompressed(stream: BinaryIO):
    head = stream.read(6)
    stream.seek(0)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=stream), "tar.gz"
    if head.startswith(b"BZh"):
        return bz2.BZ2File(stream), "tar.bz2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(stream), "tar.xz"
    return stream, "tar"


def is_tarball(stream: BinaryIO) -> bool:
    head = stream.read(512 + 6)
    stream.seek(0)
    if head[:2] == b"\x1f\x8b" or head[:3] == b"BZh" or head[:6] == b"\xfd7zXZ\x00":
        return True
    return len(head) >= 262 and head[257:262] == b"ustar"


def read_tarball(stream: BinaryIO, *, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> Listing:
    """Member names of a (compressed) tar stream; regular files only, nothing extracted."""
    raw, kind = _decompressed(stream)
    capped = io.BufferedReader(_CappedReader(raw, max_bytes), buffer_size=1024 * 64)
    listing = Listing(source_format=kind)
    try:
        with tarfile.open(fileobj=capped, mode="r|") as archive:
            for member in archive:
                if member.isdir():
                    continue
                if not (member.isfile() or member.issym()):
                    listing._skip(member.name, "not a regular file or symlink")
                    continue
                _add(listing, member.name)
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:
        raise ListingError(f"not a readable tar archive: {exc}") from exc
    if not listing.paths:
        raise ListingError("the archive holds no files")
    _strip_common_root(listing, only_if_marked=False)
    return listing


def _strip_common_root(listing: Listing, *, only_if_marked: bool) -> None:
    """`git archive --prefix=repo/` and release tarballs wrap everything in one folder."""
    roots = {p.split("/", 1)[0] for p in listing.paths}
    if len(roots) != 1 or any("/" not in p for p in listing.paths):
        return
    root = roots.pop()
    listing.stripped_root = root + "/"
    listing.paths = {p[len(root) + 1 :] for p in listing.paths}
    listing.hashes = {p[len(root) + 1 :]: h for p, h in listing.hashes.items()}


def read_listing(data: bytes) -> Listing:
    """A tarball (by magic bytes) or a UTF-8 text listing."""
    stream = io.BytesIO(data)
    if is_tarball(stream):
        return read_tarball(stream)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ListingError(
            f"neither a tar archive nor UTF-8 text (byte {exc.start} is not UTF-8)"
        ) from exc
    listing = read_text_listing(text)
    if not listing.paths:
        raise ListingError("the listing names no files")
    return listing
