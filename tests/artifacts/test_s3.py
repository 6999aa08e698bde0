"""The object-storage path (django-storages S3) against moto's in-process S3: staged upload,
reads that fetch only the byte ranges they need, and purge."""

import hashlib

import pytest

from artifacts import services

pytestmark = pytest.mark.django_db

BUCKET = "artifacts-test"


@pytest.fixture
def s3(settings, monkeypatch):
    moto = pytest.importorskip("moto")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with moto.mock_aws():
        import boto3

        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        settings.STORAGES = {
            **settings.STORAGES,
            "artifacts": {
                "BACKEND": "storages.backends.s3.S3Storage",
                "OPTIONS": {"bucket_name": BUCKET, "file_overwrite": False, "default_acl": None},
            },
        }
        from artifacts.storage import artifact_storage

        fetched = []
        storage = artifact_storage()
        storage.connection.meta.client.meta.events.register(
            "after-call.s3.GetObject",
            lambda http_response, **_: fetched.append(int(http_response.headers["content-length"])),
        )
        yield client, fetched


def test_write_and_bounded_reads_on_s3(s3, workspace):
    client, fetched = s3
    body = b"".join(b"line %06d of the build\n" % i for i in range(200_000))  # ~4.6 MB
    artifact = services.artifact_write(workspace=workspace, source=body, run_id="r", command="make")
    stored = client.get_object(Bucket=BUCKET, Key=artifact.storage_name)["Body"].read()
    assert hashlib.sha256(stored).hexdigest() == artifact.sha256 == hashlib.sha256(body).hexdigest()
    fetched.clear()

    reader = services.Reader()
    tail = services.artifact_read_tail(artifact=artifact, lines=3, reader=reader)
    assert (
        tail.data
        == b"line 199997 of the build\nline 199998 of the build\nline 199999 of the build\n"
    )
    middle = services.artifact_read_range(
        artifact=artifact, reader=reader, start_line=100_001, end_line=100_002
    )
    assert middle.data == b"line 100000 of the build\nline 100001 of the build\n"
    assert sum(fetched) < len(body) / 4  # ranged GETs, not the whole object
    found = services.artifact_search(artifact=artifact, reader=reader, q="line 123456 ", context=1)
    assert [m.line for m in found.matches] == [123_457]
    handle = services.artifact_open_content(artifact=artifact, reader=reader)
    assert handle.read() == body
    handle.close()


def test_delete_and_purge_remove_the_object(s3, workspace, run_on_commit):
    client, _ = s3
    artifact = services.artifact_write(workspace=workspace, source=b"x\n", run_id="r", command="c")
    with run_on_commit():
        services.artifact_delete(artifact=artifact, actor=None)
    listing = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    assert listing == []
    artifact.refresh_from_db()
    assert artifact.purged_at is not None
