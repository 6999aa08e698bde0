"""Send the lines a transcript gained since the last send (`POST /api/v1/hooks/lines/`).

Per server and transcript path, `transcripts.json` in the cache dir keeps the byte offset the
server acknowledged and a fingerprint of the file's first bytes (their count and sha256). A
file that shrank below the offset, or whose first bytes changed, was truncated or replaced:
it is sent again from the start (the server counts nothing twice). Only whole lines are
sent, in chunks of about `CHUNK_BYTES`, while the hook's time budget lasts; the rest goes
with a later hook. The offset advances only by what the server acknowledged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time

from context_governance_cli import config

# One request's lines (unless a single line is longer): what a loaded server ingests within
# the lines' budget, so that a send is seldom cut off (then answered with 409 next time).
CHUNK_BYTES = 64 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024  # a longer line is left out (the server skips its bytes)
HEAD_BYTES = 64 * 1024
MIN_REQUEST_SECONDS = 0.02  # no request is started with less time than this left
MAX_STREAMS = 200  # transcripts remembered per state file (the most recently sent)


def state_path():
    return config.cache_dir() / "transcripts.json"


def _server_key(settings) -> str:
    # Offsets are per server and workspace (a token belongs to one workspace).
    return hashlib.sha256(f"{settings.url}\n{settings.token}".encode()).hexdigest()[:16]


def _load_state() -> dict:
    try:
        data = json.loads(state_path().read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_state(state: dict) -> None:
    streams = sorted(state.items(), key=lambda item: item[1].get("sent_at", 0))[-MAX_STREAMS:]
    path = state_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = path.with_name(f"{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(dict(streams)))
        os.replace(temporary, path)
    except OSError:
        pass


def _head(handle, size: int) -> tuple[int, str]:
    handle.seek(0)
    head = handle.read(size)
    return len(head), hashlib.sha256(head).hexdigest()


def _start_offset(handle, size: int, stream: dict) -> int:
    """Where to send from: the acknowledged offset, or 0 when the file shrank below it or
    no longer begins with the bytes it began with."""
    offset = int(stream.get("offset") or 0)
    if not offset or size < offset:
        return 0
    head_size = int(stream.get("head_size") or 0)
    if _head(handle, head_size) != (head_size, stream.get("head_sha256")):
        return 0
    return offset


def _chunk(handle, offset: int, size: int) -> tuple[bytes, int]:
    """Whole lines from `offset`: about CHUNK_BYTES (at least one line), and the byte where
    they end. A line over MAX_LINE_BYTES is left out of the data but counted in the end.
    (b"", offset) when no line is complete yet."""
    handle.seek(offset)
    data = handle.read(min(size - offset, CHUNK_BYTES))
    newline = data.rfind(b"\n")
    if newline >= 0:
        return data[: newline + 1], offset + newline + 1
    # One line longer than a chunk: read on to its end.
    read = len(data)
    while offset + read < size:
        more = handle.read(min(CHUNK_BYTES, size - offset - read))
        if not more:
            break
        at = more.find(b"\n")
        if at >= 0:
            end = offset + read + at + 1
            if end - offset > MAX_LINE_BYTES:
                return b"", end
            handle.seek(offset)
            return handle.read(end - offset), end
        read += len(more)
    return b"", offset  # the last line is not finished yet


def send_new_lines(settings, path: str, deadline: float, *, harness: str = "claude-code") -> dict:
    """Send what `path` gained, chunk by chunk, until done or `deadline` (time.monotonic).
    Returns {"sent": bytes acknowledged, "offset", "left": bytes not sent yet, "error",
    "unreachable": the server did not answer or refused the token}."""
    from context_governance_cli import client

    result = {"sent": 0, "offset": 0, "left": 0, "error": "", "unreachable": False}
    if not path:
        return result
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except OSError:
        return result  # no transcript (yet): nothing to send
    state = _load_state()
    key = f"{_server_key(settings)} {path}"
    stream = state.get(key) or {}
    with handle:
        size = os.fstat(handle.fileno()).st_size
        offset = _start_offset(handle, size, stream)
        # Known before and sent from 0: truncated or replaced; the server must start again.
        restart = bool(stream.get("offset")) and offset == 0
        while offset < size:
            left = deadline - time.monotonic()
            if left < MIN_REQUEST_SECONDS:
                break
            data, end = _chunk(handle, offset, size)
            if end == offset:
                break  # only an unfinished last line
            # The fingerprint covers the file's first bytes as they are now (sent or not), so
            # that any chunk, the first included, names the same head for the same file.
            head_size, head_sha256 = _head(handle, min(size, HEAD_BYTES))
            body = {
                "path": path, "harness": harness, "offset": offset, "end": end,
                "restart": restart and offset == 0,
                "data": base64.b64encode(data).decode(),
                "head_size": head_size, "head_sha256": head_sha256,
            }  # fmt: skip
            try:
                answer = client.request(
                    "POST", settings.url, settings.token, "/api/v1/hooks/lines/", body=body,
                    timeout=left,
                )  # fmt: skip
            except client.ServerError as exc:
                adopted = _adopt(handle, size, offset, exc)
                if adopted is None and offset == 0 and not restart and exc.status == 409:
                    restart = True  # the server's place is not in this file: start again
                    continue
                if adopted is None:
                    result["error"] = str(exc)
                    break
                offset = adopted
                continue
            except (client.ServerUnreachable, client.TokenRejected) as exc:
                result["error"] = str(exc)
                result["unreachable"] = True
                break
            acknowledged = int(answer.get("offset", end))
            result["sent"] += max(0, acknowledged - offset)
            offset = acknowledged
            stream = {
                "offset": offset, "head_size": head_size, "head_sha256": head_sha256,
                "sent_at": time.time(),
            }  # fmt: skip
            state[key] = stream
            _save_state(state)
    result["offset"] = offset
    result["left"] = max(0, size - offset)
    return result


def _adopt(handle, size: int, offset: int, exc) -> int | None:
    """After a 409: the server's offset when this file begins with the bytes the server has
    (a send whose answer never came, or a lost state file), else 0 to start again; None to
    stop (another refusal, or the server's answer already tried)."""
    data = exc.data if exc.status == 409 else {}
    if "offset" not in data:
        return None
    server = int(data.get("offset") or 0)
    head = (int(data.get("head_size") or 0), data.get("head_sha256") or "")
    if 0 < server <= size and server != offset and _head(handle, head[0]) == head:
        handle.seek(server - 1)
        if handle.read(1) == b"\n":
            return server
    return 0 if offset else None
