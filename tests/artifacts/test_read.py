"""Bounded reads, limits, the read log, scoping, and the seed's five operational tests."""

import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone
from rest_framework.test import APIClient

from artifacts import services
from artifacts.models import Artifact, ArtifactRead
from governance.services import api_token_create
from tests.artifacts.conftest import artifact_files, stored_bytes

pytestmark = pytest.mark.django_db

LOG = b"".join(b"[%05d] step ok\n" % i for i in range(1, 2001)) + (
    b"E   AssertionError: expected 200, got 503 (upstream=billing)\n"
    b"FAILED tests/test_api.py::test_checkout\n"
    b"== 1 failed, 1999 passed ==\n"
)


def url(artifact, action=""):
    return f"/api/v1/artifacts/{artifact.pk}/{action + '/' if action else ''}"


def resolve(artifact_bytes: bytes, pointer_sha: str, excerpt: dict) -> None:
    """An excerpt must be exactly the source bytes at its offsets, under the same fingerprint."""
    assert excerpt["artifact_sha256"] == pointer_sha == hashlib.sha256(artifact_bytes).hexdigest()
    source = artifact_bytes[excerpt["start_byte"] : excerpt["end_byte"]]
    assert hashlib.sha256(source).hexdigest() == excerpt["sha256"]
    assert source.decode() == excerpt["text"]
    lines = artifact_bytes.splitlines(keepends=True)
    assert (
        b"".join(lines[excerpt["start_line"] - 1 : excerpt["end_line"]]) == source
        or excerpt["clipped"]
    )


def test_tail_head_range_return_exact_excerpts(api_for, store):
    artifact = store(LOG, tool_call_id="call-1")
    api = api_for("viewer")
    tail = api.get(url(artifact, "tail"), {"lines": 3}).json()
    assert tail["text"].splitlines()[0].startswith("E   AssertionError")
    assert (tail["start_line"], tail["end_line"], tail["artifact_lines"]) == (2001, 2003, 2003)
    head = api.get(url(artifact, "head"), {"lines": 2}).json()
    assert head["text"] == "[00001] step ok\n[00002] step ok\n"
    lines = api.get(url(artifact, "range"), {"start_line": 1000, "end_line": 1001}).json()
    assert lines["text"] == "[01000] step ok\n[01001] step ok\n"
    byte_range = api.get(
        url(artifact, "range"), {"start_byte": lines["start_byte"], "end_byte": lines["end_byte"]}
    ).json()
    assert byte_range["text"] == lines["text"]
    assert byte_range["start_line"] == 1000
    for excerpt in (tail, head, lines, byte_range):
        resolve(stored_bytes(artifact), artifact.sha256, excerpt)


def test_operational_1_a_new_client_with_only_the_pointer_recovers_a_detail(
    api_for, members, workspace
):
    """After a context reset, a replacement run holds just the pointer id and finds the
    upstream that failed, using the cost first and then a bounded search."""
    writer = api_for("editor", run_id="run-42")
    pointer = writer.post(
        "/api/v1/artifacts/",
        data=LOG,
        content_type="text/plain",
        HTTP_X_RUN_ID="run-42",
        HTTP_X_TOOL_CALL_ID="call-3",
        HTTP_X_COMMAND="pytest -q",
        HTTP_X_EXIT_STATUS="1",
    ).json()
    pointer_id = pointer["id"]
    del writer, pointer  # the old context is gone

    fresh = APIClient()
    issued = api_token_create(workspace=workspace, user=members["viewer"], run_id="run-42")
    fresh.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    meta = fresh.get(f"/api/v1/artifacts/{pointer_id}/").json()
    assert meta["estimated_tokens"] > 8000  # too costly to load whole
    found = fresh.get(f"/api/v1/artifacts/{pointer_id}/search/", {"q": "upstream="}).json()
    assert found["match_count"] == 1
    match = found["matches"][0]
    assert match["line"] == 2001
    assert "upstream=billing" in match["excerpt"]["text"]
    read = ArtifactRead.objects.get(mode="search")
    assert read.token_id == issued.token.pk and read.bytes_returned == match["excerpt"]["bytes"]


SECRET = b"AKIAIOSFODNN7EXAMPLE"
CHUNK = 64 * 1024


def test_operational_2_concurrent_outputs_of_one_run_stay_apart(api_for, workspace, members):
    """Six outputs of one run stream at the same time: six writers, each fed 64 KiB chunks
    by its own thread in lockstep (a barrier after every chunk), so their bytes interleave
    in the staging folder; then they publish in reverse order. Two are different outputs
    under the same tool-call id. Each keeps its own bytes, sha256, lines and redactions.
    (Concurrent HTTP requests racing on row locks: test_concurrency.py, run on PostgreSQL.)"""
    calls = ["call-0", "call-1", "call-2", "call-3", "call-4", "call-4"]
    bodies = []
    for i in range(len(calls)):
        body = b"".join(b"output %d line %06d\n" % (i, n) for n in range(20_000 + 3_000 * i))
        # A secret across the first chunk boundary: each writer's redactor carries its own.
        bodies.append(body[: CHUNK - 10] + b" " + SECRET + b" " + body[CHUNK - 10 :])
    expected = [body.replace(SECRET, b"[REDACTED:aws_access_key_id]") for body in bodies]
    chunks = [[body[at : at + CHUNK] for at in range(0, len(body), CHUNK)] for body in bodies]
    rounds = max(len(c) for c in chunks)
    assert min(len(c) for c in chunks) >= 6 and len({len(c) for c in chunks}) > 1

    writers = [services.ArtifactWriter(workspace=workspace) for _ in calls]
    staged_during: list[int] = []
    published_during: list[int] = []

    def between_rounds():  # runs once per round, while every feeder waits
        files = artifact_files()
        staged_during.append(len([f for f in files if f.suffix == ".part"]))
        published_during.append(len([f for f in files if f.suffix != ".part"]))

    barrier = threading.Barrier(len(writers), action=between_rounds, timeout=60)

    def feed(i: int) -> None:
        for k in range(rounds):
            if k < len(chunks[i]):
                writers[i].write(chunks[i][k])
            barrier.wait()

    with ThreadPoolExecutor(max_workers=len(writers)) as pool:
        list(pool.map(feed, range(len(writers))))
    assert staged_during == [len(writers)] * rounds  # all six were in flight in every round
    assert published_during == [0] * rounds  # and nothing was visible yet
    assert Artifact.objects.count() == 0

    pointers = {}
    for i in reversed(range(len(writers))):
        stored = services.artifact_store(
            workspace=workspace, source=None, staged=writers[i], run_id="run-c",
            tool_call_id=calls[i], command=f"job {i}", actor=members["editor"],
        )  # fmt: skip
        assert stored.created
        pointers[i] = stored.artifact

    assert (
        len({a.pk for a in pointers.values()})
        == len({a.storage_name for a in pointers.values()})
        == 6
    )
    assert [f for f in artifact_files() if f.suffix == ".part"] == []
    api = api_for("viewer")
    for i, artifact in pointers.items():
        meta = api.get(url(artifact)).json()
        assert (meta["run_id"], meta["tool_call_id"], meta["command"]) == (
            "run-c",
            calls[i],
            f"job {i}",
        )
        assert meta["bytes"] == len(expected[i])
        assert meta["lines"] == 20_000 + 3_000 * i
        assert meta["sha256"] == hashlib.sha256(expected[i]).hexdigest()
        assert meta["redactions"] == 1
        assert stored_bytes(artifact) == expected[i]
        content = api.get(url(artifact, "content"))
        assert b"".join(content.streaming_content) == expected[i]
        head = api.get(url(artifact, "head"), {"lines": 1}).json()
        assert head["text"] == f"output {i} line 000000\n"


def test_operational_3_every_search_excerpt_resolves_to_its_source(api_for, store):
    body = LOG + b"".join(b"retry %d: upstream=billing timeout\n" % i for i in range(40))
    artifact = store(body)
    result = (
        api_for("viewer")
        .get(
            url(artifact, "search"),
            {"q": r"upstream=\w+", "regex": "1", "context": "2", "max_matches": "50"},
        )
        .json()
    )
    assert result["match_count"] == 41 and not result["truncated"]
    data = stored_bytes(artifact)
    for match in result["matches"]:
        resolve(data, artifact.sha256, match["excerpt"])
        assert data[match["start_byte"] : match["end_byte"]].startswith(b"upstream=")
        assert data[: match["start_byte"]].count(b"\n") + 1 == match["line"]


def test_operational_4_truncation_and_failed_writes_are_visible(api_for, workspace):
    api = api_for("editor")
    truncated = api.post(
        "/api/v1/artifacts/", data=b"first half\n", content_type="text/plain",
        HTTP_X_RUN_ID="run-t", HTTP_X_COMMAND="rg TODO", HTTP_X_COMPLETE="false",
        HTTP_X_DROPPED_BYTES="4096", HTTP_X_DROPPED_LINES="100",
    ).json()  # fmt: skip
    assert (truncated["complete"], truncated["status"], truncated["dropped_bytes"]) == (
        False,
        "truncated",
        4096,
    )
    listed = api.get("/api/v1/artifacts/", {"status": "truncated"}).json()
    assert [row["id"] for row in listed["results"]] == [truncated["id"]]
    failed = api.post(
        "/api/v1/artifacts/", data=b"x", content_type="text/plain",
        HTTP_X_RUN_ID="run-t", HTTP_X_COMMAND="rg TODO", HTTP_X_EXIT_STATUS="nope",
    )  # fmt: skip
    assert failed.status_code == 400
    failures = api.get("/api/v1/artifact-write-failures/", {"run_id": "run-t"}).json()["results"]
    assert len(failures) == 1 and "X-Exit-Status" in failures[0]["reason"]
    page = api_for("viewer")  # the page shows both to people
    from django.test import Client

    client = Client()
    client.force_login(page.token.token.user)
    html = client.get(f"/w/{workspace.slug}/artifacts/").content.decode()
    assert "truncated" in html and "Recent failed writes" in html


def test_operational_5_expiry_and_deletion_invalidate_pointers_with_410(api_for, store):
    expiring, deleted = store(b"old\n", tool_call_id="a"), store(b"gone\n", tool_call_id="b")
    Artifact.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    api = api_for("editor")
    response = api.delete(url(deleted) + "?reason=contains+customer+data")
    assert response.status_code == 200 and response.json()["state"] == "deleted"
    for artifact, reason in ((expiring, "expired"), (deleted, "deleted")):
        for action, params in (("", {}), ("tail", {}), ("head", {}), ("content", {}),
                               ("search", {"q": "o"}), ("range", {"start_line": 1, "end_line": 1})):  # fmt: skip
            response = api.get(url(artifact, action), params)
            assert response.status_code == 410, (action, response.status_code)
            body = response.json()
            assert body["reason"] == reason
            assert body["gone_at"]
            assert body["artifact"]["id"] == str(artifact.pk)  # the tombstone stays
            assert body["artifact"]["sha256"] == artifact.sha256
    assert "customer data" in api.get(url(deleted)).json()["detail"]
    assert api.delete(url(deleted)).status_code == 410


@pytest.mark.parametrize(
    ("action", "params", "limit", "allowed"),
    [
        ("tail", {"lines": 101}, "max_read_lines", 100),
        ("head", {"lines": 101}, "max_read_lines", 100),
        ("range", {"start_line": 1, "end_line": 500}, "max_read_lines", 100),
        ("range", {"start_byte": 0, "end_byte": 5000}, "max_read_bytes", 1024),
        ("tail", {"lines": 100}, "max_read_bytes", 1024),
        ("search", {"q": "step", "max_matches": 11}, "max_search_matches", 10),
        ("search", {"q": "step", "context": 4}, "max_search_context", 3),
        ("content", {}, "max_content_bytes", 1000),
    ],
)
def test_over_a_limit_answers_400_naming_it(
    api_for, store, workspace, action, params, limit, allowed
):
    services.artifact_policy_update(
        workspace=workspace, actor=None, max_read_lines=100, max_read_bytes=1024,
        max_search_matches=10, max_search_context=3, max_content_bytes=1000,
    )  # fmt: skip
    artifact = store(LOG)
    response = api_for("viewer").get(url(artifact, action), params)
    assert response.status_code == 400
    body = json.loads(response.content)  # the wire form, not a parsed-back Python value
    assert body["limit"] == limit
    assert limit in body["detail"]
    assert type(body["allowed"]) is int and body["allowed"] == allowed
    assert ArtifactRead.objects.count() == 0  # nothing was loaded


def test_the_documented_limit_error_is_what_the_api_answers(api_for, store):
    """docs/artifacts.md shows this body for lines=5000 under the default policy."""
    artifact = store(LOG)
    response = api_for("viewer").get(url(artifact, "tail"), {"lines": 5000})
    assert response.status_code == 400
    assert json.loads(response.content) == {
        "detail": "lines=5,000 is over this workspace's max_read_lines limit (2,000)",
        "limit": "max_read_lines",
        "allowed": 2000,
    }


def test_search_that_fills_the_byte_budget_says_where_it_stopped(api_for, store, workspace):
    services.artifact_policy_update(workspace=workspace, actor=None, max_read_bytes=1024)
    artifact = store(LOG)
    result = api_for("viewer").get(url(artifact, "search"), {"q": "step"}).json()
    assert result["truncated"] and result["stopped_by"] == "max_read_bytes"
    assert result["bytes_returned"] <= 1024


@pytest.mark.parametrize(
    ("action", "params", "message"),
    [
        ("tail", {"lines": "ten"}, "lines"),
        ("tail", {"lines": 0}, "lines: must be at least 1"),
        ("range", {"start_line": 5}, "start_line and end_line: give both"),
        ("range", {"start_line": 1, "end_line": 2, "start_byte": 0}, "not both"),
        ("range", {"start_line": 99999, "end_line": 100000}, "past the last line"),
        ("range", {"start_byte": -5, "end_byte": 10}, "start_byte: must be 0 or more"),
        ("range", {"start_byte": 10**12, "end_byte": 10**12 + 5}, "past the end"),
        ("range", {"start_byte": "../../etc/passwd", "end_byte": 1}, "start_byte"),
        ("search", {}, "q"),
        ("search", {"q": "(", "regex": "1"}, "not a valid regular expression"),
        ("search", {"q": "x", "max_matches": 0}, "max_matches: must be at least 1"),
    ],
)
def test_bad_read_parameters_name_the_parameter(api_for, store, action, params, message):
    artifact = store(LOG)
    response = api_for("viewer").get(url(artifact, action), params)
    assert response.status_code == 400
    assert message in str(response.json())


def test_regex_timeout_is_a_clear_400(api_for, store, workspace):
    services.artifact_policy_update(workspace=workspace, actor=None, search_timeout_ms=100)
    artifact = store((b"a" * 40 + b"!\n") * 3000)
    response = api_for("viewer").get(
        url(artifact, "search"), {"q": "(?:a|aa)+(?:a|aa)+b", "regex": "1"}
    )
    assert response.status_code == 400
    assert "0.1 s search timeout" in response.json()["detail"]


def test_every_read_is_logged_and_the_page_shows_coverage(api_for, client_for, store, workspace):
    artifact = store(LOG)
    api = api_for("viewer")
    api.get(url(artifact, "tail"), {"lines": 3})
    api.get(url(artifact, "range"), {"start_line": 1, "end_line": 10})
    api.get(url(artifact, "search"), {"q": "FAILED"})
    b"".join(api.get(url(artifact, "content")).streaming_content)
    reads = list(ArtifactRead.objects.order_by("created_at", "id"))
    assert [r.mode for r in reads] == ["tail", "range", "search", "content"]
    assert all(r.actor.username == "viewer-a" and r.via == "api" for r in reads)
    assert reads[0].bytes_returned == len(LOG.splitlines(keepends=True)[-1]) + len(
        b"".join(LOG.splitlines(keepends=True)[-3:-1])
    )
    assert (reads[1].start_line, reads[1].end_line, reads[1].start_byte) == (1, 10, 0)
    assert reads[3].bytes_returned == artifact.size_bytes
    log = api.get(url(artifact, "reads")).json()
    assert [row["mode"] for row in log["results"]] == ["content", "search", "range", "tail"]
    html = (
        client_for("viewer").get(f"/w/{workspace.slug}/artifacts/{artifact.pk}/").content.decode()
    )
    assert "(100.0%) has been loaded" in html  # the full load covered everything


def test_another_workspace_is_404_everywhere(api_for, store, other_workspace, outsider, members):
    theirs = store(b"their output\n", target_workspace=other_workspace, actor=outsider)
    api = api_for("admin")
    for action in ("", "tail", "head", "search", "range", "content", "reads"):
        assert api.get(url(theirs, action), {"q": "x"}).status_code == 404
    assert api.delete(url(theirs)).status_code == 404
    assert api.get("/api/v1/artifacts/").json()["count"] == 0
    from django.test import Client

    client = Client()
    client.force_login(members["admin"])
    assert client.get(f"/w/team-a/artifacts/{theirs.pk}/").status_code == 404
    assert client.get(f"/w/team-b/artifacts/{theirs.pk}/").status_code == 404


@pytest.mark.parametrize(
    "bad_id",
    ["..%2F..%2Fetc%2Fpasswd", "not-a-uuid", "00000000-0000-0000-0000-000000000000", "%00"],
)
def test_ids_that_are_not_ours_are_404(api_for, store, bad_id):
    store(LOG)
    response = api_for("viewer").get(f"/api/v1/artifacts/{bad_id}/tail/")
    assert response.status_code == 404


def test_run_scoped_token_reads_only_its_run(api_for, store):
    mine, other = store(b"mine\n", run_id="run-a"), store(b"other\n", run_id="run-b")
    api = api_for("viewer", run_id="run-a")
    assert api.get(url(mine, "tail")).status_code == 200
    for action in ("", "tail", "content", "search"):
        assert api.get(url(other, action), {"q": "o"}).status_code == 404
    listed = api.get("/api/v1/artifacts/").json()
    assert [row["id"] for row in listed["results"]] == [str(mine.pk)]
    assert api.get("/api/v1/artifacts/", {"run_id": "run-b"}).json()["count"] == 0


def test_viewer_cannot_delete_and_editor_deletes_with_audit(api_for, store, run_on_commit):
    from governance.models import AuditEvent

    artifact = store(b"x\n")
    path = Path(default_storage.path(artifact.storage_name))
    assert api_for("viewer").delete(url(artifact)).status_code == 403
    with run_on_commit():
        assert api_for("editor").delete(url(artifact)).status_code == 200
    assert not path.exists()
    assert AuditEvent.objects.filter(action="artifact.delete", object_id=str(artifact.pk)).exists()
    artifact.refresh_from_db()
    assert artifact.purged_at is not None  # content removed after commit


def test_content_streams_the_stored_bytes_with_their_fingerprint(api_for, store):
    artifact = store(LOG)
    response = api_for("viewer").get(url(artifact, "content"))
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Artifact-Sha256"] == artifact.sha256
    assert response["ETag"] == f'"{artifact.sha256}"'
    assert b"".join(response.streaming_content) == LOG


def test_list_filters_by_run_command_and_status(api_for, store):
    store(b"a\n", run_id="run-1", command="pytest -q")
    store(b"b\n", run_id="run-2", command="make build")
    store(b"c\n", run_id="run-2", command="pytest -x", complete=False)
    api = api_for("viewer")

    def commands(**params):
        return sorted(
            row["command"] for row in api.get("/api/v1/artifacts/", params).json()["results"]
        )

    assert commands(run_id="run-2") == ["make build", "pytest -x"]
    assert commands(command="pytest") == ["pytest -q", "pytest -x"]
    assert commands(status="truncated") == ["pytest -x"]
    assert commands(status="available") == ["make build", "pytest -q"]
