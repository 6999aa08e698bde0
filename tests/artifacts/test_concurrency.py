"""Concurrent writes over real HTTP and real database connections (PostgreSQL)."""

import hashlib
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from artifacts.models import Artifact
from governance.services import api_token_create
from tests.artifacts.conftest import artifact_files, stored_bytes

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def post(base: str, token: str, body: bytes, call: str):
    return requests.post(
        f"{base}/api/v1/artifacts/",
        data=body,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "text/plain",
            "X-Run-Id": "run-parallel",
            "X-Tool-Call-Id": call,
            "X-Command": f"job {call}",
        },
        timeout=60,
    )


def test_parallel_calls_of_one_run_keep_separate_outputs(live_server, members, workspace):
    token = api_token_create(workspace=workspace, user=members["editor"]).plaintext
    outputs = {f"call-{i}": (b"output %02d\n" % i) * (2000 + i) for i in range(12)}
    with ThreadPoolExecutor(max_workers=6) as pool:
        responses = dict(
            zip(
                outputs,
                pool.map(lambda c: post(live_server.url, token, outputs[c], c), outputs),
                strict=True,
            )
        )
    assert {r.status_code for r in responses.values()} == {201}
    assert Artifact.objects.filter(run_id="run-parallel").count() == 12
    for call, response in responses.items():
        artifact = Artifact.objects.get(pk=response.json()["id"])
        assert artifact.tool_call_id == call
        assert stored_bytes(artifact) == outputs[call]
        assert artifact.sha256 == hashlib.sha256(outputs[call]).hexdigest()


def test_racing_retries_publish_one_pointer(live_server, members, workspace):
    token = api_token_create(workspace=workspace, user=members["editor"]).plaintext
    body = b"identical output\n" * 5000
    with ThreadPoolExecutor(max_workers=6) as pool:
        responses = list(pool.map(lambda _: post(live_server.url, token, body, "call-r"), range(6)))
    assert sorted(r.status_code for r in responses) == [200] * 5 + [201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert Artifact.objects.count() == 1
    assert len([p for p in artifact_files() if p.suffix != ".part"]) == 1
    assert [p for p in artifact_files() if p.suffix == ".part"] == []
