"""Large artifacts on local storage: bounded reads touch only the bytes they need, and a
large raw upload streams through the server in bounded memory."""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import tracemalloc
from urllib.parse import urlsplit

import pytest
from django.core.files import File
from django.core.files.storage import FileSystemStorage

from artifacts import services
from artifacts.models import Artifact
from governance.services import api_token_create
from tests.artifacts.conftest import stored_bytes

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
LINE = 64  # every generated line is 64 bytes, so line n starts at byte (n - 1) * 64


def line(n: int) -> bytes:
    return b"%010d " % n + b"." * (LINE - 12) + b"\n"


def generated(start: int, end: int) -> bytes:
    """Bytes [start, end) of the generated artifact."""
    first, last = start // LINE + 1, (end - 1) // LINE + 1
    data = b"".join(line(n) for n in range(first, last + 1))
    offset = (first - 1) * LINE
    return data[start - offset : end - offset]


class CountingFileIO(io.FileIO):
    """A real file that adds up the bytes the OS hands it."""

    def __init__(self, path, counter: dict):
        super().__init__(path, "rb")
        self.counter = counter
        counter["opened"] += 1

    def readinto(self, buffer):
        n = super().readinto(buffer)
        self.counter["bytes"] += n or 0
        return n

    def readall(self):
        data = super().readall()
        self.counter["bytes"] += len(data)
        return data


class CountingFileSystemStorage(FileSystemStorage):
    """FileSystemStorage whose binary reads are counted; everything else is unchanged."""

    counter = {"opened": 0, "bytes": 0}

    def _open(self, name, mode="rb"):
        if mode != "rb":
            return super()._open(name, mode)
        return File(io.BufferedReader(CountingFileIO(self.path(name), self.counter)), name)


@pytest.fixture
def counted(settings):
    """Artifacts stored in the test's media folder through CountingFileSystemStorage."""
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": f"{__name__}.CountingFileSystemStorage",
            "OPTIONS": {"location": str(settings.MEDIA_ROOT)},
        },
    }
    counter = CountingFileSystemStorage.counter

    def reset():
        counter.update(opened=0, bytes=0)
        return counter

    return reset


def test_tail_head_and_ranges_of_a_large_artifact_read_only_a_few_blocks(
    counted, api_for, workspace
):
    lines = 48 * MIB // LINE
    per_chunk = MIB // LINE

    def chunks():
        for first in range(1, lines + 1, per_chunk):
            yield b"".join(line(n) for n in range(first, first + per_chunk))

    artifact = services.artifact_write(
        workspace=workspace, source=chunks(), run_id="big", command="generate"
    )
    size = 48 * MIB
    assert (artifact.size_bytes, artifact.line_count) == (size, lines)
    api = api_for("viewer")
    base = f"/api/v1/artifacts/{artifact.pk}"
    middle = lines // 2
    near_end = size - 10_000 * LINE - 5
    # read: (action, parameters, the bytes [start, end) it must return)
    reads = {
        "tail": ("tail", {"lines": 100}, (size - 100 * LINE, size)),
        "head": ("head", {"lines": 100}, (0, 100 * LINE)),
        "line range": (
            "range",
            {"start_line": middle, "end_line": middle + 99},
            ((middle - 1) * LINE, (middle + 99) * LINE),
        ),
        "byte range": (
            "range",
            {"start_byte": near_end, "end_byte": near_end + 4096},
            (near_end, near_end + 4096),
        ),
    }
    read_from_disk = {}
    for name, (action, params, (start, end)) in reads.items():
        counter = counted()
        body = api.get(f"{base}/{action}/", params).json()
        assert (body["start_byte"], body["end_byte"]) == (start, end), name
        assert body["text"].encode() == generated(start, end), name
        assert counter["opened"] == 1, name  # the read went through the storage's open
        read_from_disk[name] = counter["bytes"]
    # Each read touches at most a few 64 KiB blocks of the 48 MiB file (the index stride,
    # the tail/head block, the excerpt itself); 256 KiB is 0.5% of the artifact.
    assert all(0 < n <= 256 * 1024 for n in read_from_disk.values()), read_from_disk

    # The counter does see whole-file reads: a search scans everything, the full load
    # streams everything.
    counter = counted()
    found = api.get(f"{base}/search/", {"q": f"{lines:010d} "}).json()
    assert [m["line"] for m in found["matches"]] == [lines]
    assert counter["bytes"] >= size
    counter = counted()
    response = api.get(f"{base}/content/")
    assert sum(len(block) for block in response.streaming_content) == size
    assert counter["bytes"] >= size


@pytest.mark.django_db(transaction=True)
def test_a_64_mib_raw_upload_streams_through_the_server_in_bounded_memory(
    live_server, members, workspace
):
    """The body is generated chunk by chunk, sent over a socket to the live server and
    streamed into storage; the process's peak traced memory stays a small fraction of it."""
    token = api_token_create(workspace=workspace, user=members["editor"]).plaintext
    target = urlsplit(live_server.url)
    block = b"".join(line(n) for n in range(MIB // LINE))
    chunks = 64

    def post(body_chunks, length: int, call: str) -> tuple[int, dict]:
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
        conn.putrequest("POST", "/api/v1/artifacts/")
        for header, value in {
            "Authorization": f"Bearer {token}",
            "Content-Type": "text/plain",
            "Content-Length": str(length),
            "X-Run-Id": "upload",
            "X-Tool-Call-Id": call,
            "X-Command": "generate 64 MiB",
        }.items():
            conn.putheader(header, value)
        conn.endheaders()
        for chunk in body_chunks:
            conn.send(chunk)
        response = conn.getresponse()
        data = json.loads(response.read())
        conn.close()
        return response.status, data

    # Warm up: imports and first-request set-up are not part of the streaming cost.
    assert post([block[:4096]], 4096, "warm-up")[0] == 201

    sha256 = hashlib.sha256()
    newlines = 0

    def body():
        nonlocal newlines
        for k in range(chunks):
            header = b"chunk %06d\n" % k
            chunk = header + block[len(header) :]
            sha256.update(chunk)
            newlines += chunk.count(b"\n")
            yield chunk

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        status, pointer = post(body(), chunks * MIB, "big")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 201, pointer
    assert pointer["bytes"] == chunks * MIB
    assert pointer["sha256"] == sha256.hexdigest()
    assert pointer["lines"] == newlines
    assert pointer["redactions"] == 0
    artifact = Artifact.objects.get(pk=pointer["id"])
    assert hashlib.sha256(stored_bytes(artifact)).hexdigest() == sha256.hexdigest()
    # Client and server together: a few 1 MiB chunks in flight, never the body.
    assert peak < 12 * MIB, f"peak traced memory {peak / MIB:.1f} MiB for a 64 MiB body"
