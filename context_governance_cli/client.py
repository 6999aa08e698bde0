"""The HTTP calls to the server, with short timeouts. `http.client` is imported only when a
call is made, so reading the cache costs no HTTP import."""

from __future__ import annotations

import json

from context_governance_cli import __version__


class ServerUnreachable(Exception):
    """No answer in time: connection refused, DNS failure, timeout, or a 5xx."""


class TokenRejected(Exception):
    """401 or 403: the token is unknown, revoked, or lacks the role."""


class ServerError(Exception):
    """Any other non-2xx answer; the message is the server's `detail`, `status` the HTTP
    status and `data` the decoded body (a dict, empty when it was not JSON)."""

    def __init__(self, message: str, *, status: int = 0, data: dict | None = None):
        super().__init__(message)
        self.status = status
        self.data = data or {}


def _detail(body: bytes, status: int) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return f"HTTP {status}"
    if isinstance(data, dict) and data.get("detail"):
        return str(data["detail"])
    return json.dumps(data)[:300]


def request(
    method: str, url: str, token: str, path: str, *, body: dict | None = None, timeout: float
) -> dict:
    """One JSON request; the decoded answer, or one of the exceptions above. `timeout` bounds
    the whole exchange: connecting, sending and the wait for the answer."""
    import http.client
    import time
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerError(f"The server URL must start with http:// or https://, not {url!r}.")
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_class(parts.hostname, parts.port, timeout=timeout)
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json",
        "User-Agent": f"context-governance-cli/{__version__}",
    }
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    deadline = time.monotonic() + timeout
    try:
        connection.connect()
        connection.sock.settimeout(max(0.001, deadline - time.monotonic()))
        connection.request(method, parts.path.rstrip("/") + path, body=data, headers=headers)
        response = connection.getresponse()
        status, answer = response.status, response.read()
    except (TimeoutError, OSError, http.client.HTTPException) as exc:
        raise ServerUnreachable(str(exc) or type(exc).__name__) from None
    finally:
        connection.close()
    if status in (401, 403):
        raise TokenRejected(_detail(answer, status))
    if status >= 500:
        raise ServerUnreachable(f"HTTP {status}")
    if status >= 300:
        try:
            data = json.loads(answer)
        except ValueError:
            data = None
        raise ServerError(
            _detail(answer, status), status=status, data=data if isinstance(data, dict) else None
        )
    try:
        return json.loads(answer) if answer else {}
    except ValueError:
        raise ServerError(f"HTTP {status} with a body that is not JSON") from None
