"""Writing artifacts: raw and multipart bodies, metadata errors, atomicity, idempotent retries."""

import hashlib
import socket
from urllib.parse import urlsplit

import pytest
import requests
from django.core.files.uploadedfile import SimpleUploadedFile

from artifacts import services
from artifacts.models import Artifact, ArtifactWriteFailure
from governance.models import AuditEvent
from tests.artifacts.conftest import artifact_files, stored_bytes

pytestmark = pytest.mark.django_db

URL = "/api/v1/artifacts/"


def raw(api, body: bytes, **headers):
    headers.setdefault("HTTP_X_RUN_ID", "run-1")
    headers.setdefault("HTTP_X_COMMAND", "pytest -q")
    return api.post(URL, data=body, content_type="text/plain", **headers)


def test_raw_write_returns_the_pointer(api_for, workspace):
    body = b"collected 3 items\n\ntest_a PASSED\ntest_b FAILED\n"
    response = raw(
        api_for("editor"),
        body,
        HTTP_X_TOOL_CALL_ID="call-1",
        HTTP_X_EXIT_STATUS="1",
        HTTP_X_COMPLETE="true",
        HTTP_X_STARTED_AT="2025-03-01T10:00:00Z",
        HTTP_X_FINISHED_AT="2025-03-01T10:00:05+00:00",
    )
    assert response.status_code == 201
    pointer = response.json()
    expected_fields = {"id", "url", "run_id", "tool_call_id", "command", "exit_status", "bytes",
                       "lines", "estimated_tokens", "sha256", "complete", "redactions", "expires_at"}  # fmt: skip
    assert expected_fields <= set(pointer)
    assert pointer["bytes"] == len(body)
    assert pointer["lines"] == 4
    assert pointer["estimated_tokens"] == 12  # 46 ASCII bytes / 4, rounded up
    assert pointer["sha256"] == hashlib.sha256(body).hexdigest()
    assert (pointer["run_id"], pointer["tool_call_id"], pointer["exit_status"]) == (
        "run-1",
        "call-1",
        1,
    )
    assert pointer["complete"] is True and pointer["redactions"] == 0
    assert pointer["started_at"] == "2025-03-01T10:00:00Z"
    assert response["Location"] == pointer["url"]
    artifact = Artifact.objects.get(pk=pointer["id"])
    assert stored_bytes(artifact) == body
    assert (
        artifact.storage_name == f"artifacts/{workspace.pk}/{artifact.pk.hex[:2]}/{artifact.pk.hex}"
    )
    assert AuditEvent.objects.filter(action="artifact.create", object_id=str(artifact.pk)).exists()


def test_multipart_write(api_for):
    body = b"hello\nworld\n"
    response = api_for("editor").post(
        URL,
        {
            "file": SimpleUploadedFile("out.log", body),
            "run_id": "run-m",
            "tool_call_id": "call-m",
            "command": "echo hello",
            "exit_status": "0",
            "complete": "false",
            "dropped_bytes": "1200",
            "dropped_lines": "40",
            "started_at": "2025-03-01T10:00:00Z",
            "finished_at": "2025-03-01T10:00:01Z",
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    pointer = response.json()
    assert (pointer["bytes"], pointer["lines"], pointer["complete"]) == (12, 2, False)
    assert (pointer["dropped_bytes"], pointer["dropped_lines"], pointer["status"]) == (
        1200,
        40,
        "truncated",
    )
    assert stored_bytes(Artifact.objects.get(pk=pointer["id"])) == body


def test_the_raw_form_of_a_secret_is_never_stored(api_for):
    secret = b"ghp_" + b"S3cr" * 9
    body = b"export GITHUB_TOKEN=" + secret + b"\nok\n"
    response = raw(api_for("editor"), body, HTTP_X_COMMAND="deploy --token " + secret.decode())
    pointer = response.json()
    assert pointer["redactions"] == 2
    assert pointer["redactions_by_rule"] == {"github_token": 2}
    assert pointer["command"] == "deploy --token [REDACTED:github_token]"
    artifact = Artifact.objects.get(pk=pointer["id"])
    assert stored_bytes(artifact) == b"export GITHUB_TOKEN=[REDACTED:github_token]\nok\n"
    assert pointer["sha256"] == hashlib.sha256(stored_bytes(artifact)).hexdigest()
    for path in artifact_files():
        assert secret not in path.read_bytes()
    audit = AuditEvent.objects.get(action="artifact.create", object_id=str(artifact.pk))
    assert secret.decode() not in str(audit.data) + audit.object_repr


def test_retry_returns_the_same_pointer_and_new_output_a_new_one(api_for):
    api = api_for("editor")
    first = raw(api, b"same output\n", HTTP_X_TOOL_CALL_ID="call-1")
    retry = raw(api, b"same output\n", HTTP_X_TOOL_CALL_ID="call-1")
    assert (first.status_code, retry.status_code) == (201, 200)
    assert retry.json()["id"] == first.json()["id"]
    other_call = raw(api, b"same output\n", HTTP_X_TOOL_CALL_ID="call-2")
    other_bytes = raw(api, b"different output\n", HTTP_X_TOOL_CALL_ID="call-1")
    ids = {first.json()["id"], other_call.json()["id"], other_bytes.json()["id"]}
    assert len(ids) == 3
    assert Artifact.objects.count() == 3
    assert len(artifact_files()) == 3  # the retry staged and then discarded its copy


@pytest.mark.parametrize(
    ("headers", "field", "message"),
    [
        ({"HTTP_X_RUN_ID": ""}, "X-Run-Id", "may not be blank"),
        ({"HTTP_X_COMMAND": ""}, "X-Command", "may not be blank"),
        ({"HTTP_X_EXIT_STATUS": "one"}, "X-Exit-Status", "valid integer"),
        ({"HTTP_X_EXIT_STATUS": str(2**40)}, "X-Exit-Status", "less than or equal"),
        ({"HTTP_X_COMPLETE": "maybe"}, "X-Complete", "valid boolean"),
        ({"HTTP_X_STARTED_AT": "yesterday"}, "X-Started-At", "wrong format"),
        ({"HTTP_X_STARTED_AT": "2025-13-45T99:00:00Z"}, "X-Started-At", "wrong format"),
        ({"HTTP_X_FINISHED_AT": "2025-03-01T10:00:00"}, "X-Finished-At", "timezone"),
        (
            {
                "HTTP_X_STARTED_AT": "2025-03-01T10:00:00Z",
                "HTTP_X_FINISHED_AT": "2025-03-01T09:00:00Z",
            },
            "X-Finished-At",
            "before started_at",
        ),
        ({"HTTP_X_DROPPED_BYTES": "10"}, "X-Dropped-Bytes", "complete=false"),
        (
            {"HTTP_X_COMPLETE": "false", "HTTP_X_DROPPED_BYTES": "-1"},
            "X-Dropped-Bytes",
            "greater than or equal",
        ),
        ({"HTTP_X_RUN_ID": "r" * 201}, "X-Run-Id", "no more than 200"),
        ({"HTTP_X_COMMAND": "utf-8''%FF%FE"}, "X-Command", "percent-encoded UTF-8"),
    ],
)
def test_bad_metadata_names_the_header_and_stores_nothing(api_for, headers, field, message):
    response = raw(api_for("editor"), b"body\n", **headers)
    assert response.status_code == 400
    errors = response.json()
    assert field in errors, errors
    assert message in " ".join(errors[field])
    assert Artifact.objects.count() == 0
    assert artifact_files() == []
    assert ArtifactWriteFailure.objects.filter(reason__startswith="bad metadata").count() == 1


def test_bad_multipart_metadata_names_the_field(api_for):
    response = api_for("editor").post(
        URL,
        {
            "file": SimpleUploadedFile("a.log", b"x\n"),
            "run_id": "r",
            "command": "c",
            "started_at": "noon",
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert "started_at" in response.json()
    assert Artifact.objects.count() == 0 and artifact_files() == []


def test_multipart_without_a_file_part(api_for):
    response = api_for("editor").post(URL, {"run_id": "r", "command": "c"}, format="multipart")
    assert response.status_code == 400
    assert "file" in response.json()


def test_unicode_metadata_in_headers(api_for):
    command = "grep -n ‘café’ src/"
    encoded = "utf-8''" + requests.utils.quote(command, safe="")
    response = raw(api_for("editor"), b"x\n", HTTP_X_COMMAND=encoded)
    assert response.status_code == 201
    assert response.json()["command"] == command


def test_viewers_cannot_write(api_for):
    response = raw(api_for("viewer"), b"x\n")
    assert response.status_code == 403
    assert Artifact.objects.count() == 0


def test_run_scoped_token_writes_only_to_its_run(api_for):
    api = api_for("editor", run_id="run-7")
    assert raw(api, b"mine\n", HTTP_X_RUN_ID="run-7").status_code == 201
    response = raw(api, b"elsewhere\n", HTTP_X_RUN_ID="run-8")
    assert response.status_code == 403
    assert "scoped to run 'run-7'" in response.json()["detail"]
    assert list(Artifact.objects.values_list("run_id", flat=True)) == ["run-7"]
    assert artifact_files() and len(artifact_files()) == 1


def test_too_large_is_refused_before_and_while_streaming(api_for, workspace):
    services.artifact_policy_update(workspace=workspace, actor=None, max_artifact_bytes=1000)
    api = api_for("editor")
    response = raw(api, b"x" * 1001)
    assert response.status_code == 413
    assert response.json()["limit"] == "max_artifact_bytes"
    assert "1,000" in response.json()["detail"]
    multipart = api.post(
        URL,
        {"file": SimpleUploadedFile("big.log", b"y" * 5000), "run_id": "r", "command": "c"},
        format="multipart",
    )
    assert multipart.status_code == 413
    assert Artifact.objects.count() == 0
    assert artifact_files() == []


def test_storage_failure_is_an_explicit_error_and_leaves_no_pointer(api_for, settings, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the storage folder should be")
    settings.MEDIA_ROOT = blocker / "media"
    response = raw(api_for("editor"), b"output\n")
    assert response.status_code == 503
    assert "nothing was stored" in response.json()["detail"]
    assert Artifact.objects.count() == 0
    assert ArtifactWriteFailure.objects.count() == 1


def test_publish_failure_removes_the_staged_copy(workspace, members, settings):
    from django.core.files.storage import default_storage

    # Put a file where this workspace's artifact folder must be created.
    folder = default_storage.path(f"artifacts/{workspace.pk}")
    import os

    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with open(folder, "w") as handle:
        handle.write("in the way")
    with pytest.raises(services.StorageFailed):
        services.artifact_write(workspace=workspace, source=b"data\n", run_id="r", command="c")
    assert Artifact.objects.count() == 0
    assert [p.name for p in artifact_files()] == [str(workspace.pk)]  # only the blocker


def test_service_write_for_other_apps(workspace, members):
    chunks = (b"chunk %d\n" % i for i in range(3))
    artifact = services.artifact_write(
        workspace=workspace,
        source=chunks,
        run_id="restart-12",
        tool_call_id="verify-1",
        command="pytest tests/specs",
        exit_status=0,
        actor=members["editor"],
    )
    assert artifact.line_count == 3
    assert stored_bytes(artifact) == b"chunk 0\nchunk 1\nchunk 2\n"
    again = services.artifact_write(
        workspace=workspace, source=b"chunk 0\nchunk 1\nchunk 2\n", run_id="restart-12",
        tool_call_id="verify-1", command="pytest tests/specs", exit_status=0,
    )  # fmt: skip
    assert again.pk == artifact.pk
    with pytest.raises(services.InputError, match="run_id: required"):
        services.artifact_write(workspace=workspace, source=b"x", run_id=" ", command="c")


# --- through a real HTTP server ------------------------------------------------


@pytest.fixture
def token(members, workspace):
    return services_token(members, workspace)


def services_token(members, workspace, run_id=""):
    from governance.services import api_token_create

    return api_token_create(workspace=workspace, user=members["editor"], run_id=run_id).plaintext


@pytest.mark.django_db(transaction=True)
def test_streaming_upload_of_several_megabytes(live_server, token, tmp_path):
    """A file object body streams through requests with Content-Length; secrets split
    across the server's read chunks are still redacted."""
    secret = b"AKIAIOSFODNN7EXAMPLE"
    path = tmp_path / "big.log"
    with path.open("wb") as handle:
        for i in range(120_000):
            handle.write(b"line %07d the quick brown fox\n" % i)
            if i % 25_000 == 0:
                handle.write(secret + b"\n")
    size = path.stat().st_size
    with path.open("rb") as body:
        response = requests.post(
            f"{live_server.url}{URL}",
            data=body,
            headers={
                "Authorization": f"Bearer {token}",
                "X-Run-Id": "big",
                "X-Command": "gen",
                "Content-Type": "application/octet-stream",
            },
            timeout=60,
        )
    assert response.status_code == 201, response.text
    pointer = response.json()
    assert pointer["redactions"] == 5
    assert pointer["lines"] == 120_005
    replaced = len(b"[REDACTED:aws_access_key_id]") - len(secret)
    assert pointer["bytes"] == size + 5 * replaced
    artifact = Artifact.objects.get(pk=pointer["id"])
    data = stored_bytes(artifact)
    assert secret not in data
    assert hashlib.sha256(data).hexdigest() == pointer["sha256"]

    # Multipart through the same server.
    with path.open("rb") as body:
        response = requests.post(
            f"{live_server.url}{URL}",
            files={"file": ("big.log", body, "text/plain")},
            data={"run_id": "big", "tool_call_id": "again", "command": "gen"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
    assert response.status_code == 201, response.text
    assert response.json()["sha256"] == pointer["sha256"]


def _send_partial(live_server, head: bytes, body: bytes) -> bytes:
    host = urlsplit(live_server.url)
    with socket.create_connection((host.hostname, host.port), timeout=20) as sock:
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.django_db(transaction=True)
def test_interrupted_raw_body_is_an_error_and_leaves_nothing(live_server, token):
    body = b"partial output\n" * 1000
    head = (
        f"POST {URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: text/plain\r\nX-Run-Id: run-cut\r\nX-Command: make\r\n"
        f"Content-Length: {len(body) * 4}\r\nConnection: close\r\n\r\n"
    ).encode()
    reply = _send_partial(live_server, head, body)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:300]
    assert b"the body ended after 15,000 of 60,000 bytes" in reply
    assert Artifact.objects.count() == 0
    assert artifact_files() == []
    failure = ArtifactWriteFailure.objects.get()
    assert (failure.run_id, failure.bytes_received) == ("run-cut", 15000)


@pytest.mark.django_db(transaction=True)
def test_interrupted_multipart_upload_leaves_nothing(live_server, token):
    boundary = "XyZ"
    part = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="run_id"\r\n\r\nrun-mp\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="command"\r\n\r\nmake\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="o.log"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode() + b"some output\n" * 2000
    head = (
        f"POST {URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(part) + 5000}\r\nConnection: close\r\n\r\n"
    ).encode()
    reply = _send_partial(live_server, head, part)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:300]
    assert b"nothing was stored" in reply
    assert Artifact.objects.count() == 0
    assert artifact_files() == []


@pytest.mark.django_db(transaction=True)
def test_raw_body_without_content_length_is_refused(live_server, token):
    def body():
        yield b"chunked "
        yield b"output\n"

    response = requests.post(
        f"{live_server.url}{URL}",
        data=body(),
        headers={"Authorization": f"Bearer {token}", "X-Run-Id": "r", "X-Command": "c"},
        timeout=20,
    )
    assert response.status_code == 411
    assert "Content-Length" in response.json()["detail"]
    assert Artifact.objects.count() == 0
