"""Archives: safe member names, bomb limits, truncation, and garbage."""

import gzip
import io
import tarfile
import zipfile

import pytest

from traces.formats.archive import ArchiveError, Limits, inventory, open_members, safe_member_name


def make_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def make_tgz(path, members):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("a/b.jsonl", "a/b.jsonl"),
        ("./a/../b.jsonl", "b.jsonl"),
        ("../x.jsonl", None),
        ("/etc/passwd", None),
        ("a/../../x", None),
        ("C:\\x.jsonl", None),
    ],
)
def test_member_names(name, safe):
    assert safe_member_name(name) == safe


def test_zip_inventory_meta_and_escaping_member(tmp_path):
    path = tmp_path / "projects.zip"
    make_zip(path, {
        "proj/s1.jsonl": b'{"a":1}\n', "proj/s1/subagents/agent-x.jsonl": b"{}\n",
        "proj/s1/subagents/agent-x.meta.json": b'{"agentType":"Explore"}', "../evil.jsonl": b"{}\n", "README.md": b"hi",
    })  # fmt: skip
    listing = inventory(path, "projects.zip")
    assert listing.kind == "zip"
    assert sorted(m.name for m in listing.members) == [
        "proj/s1.jsonl",
        "proj/s1/subagents/agent-x.jsonl",
    ]
    assert list(listing.meta) == ["proj/s1/subagents/agent-x.meta.json"]
    assert listing.errors == [("../evil.jsonl", "member path escapes the archive (skipped)")]
    streamed = {
        name: handle.read()
        for name, handle in open_members(path, "zip", "projects.zip", {"proj/s1.jsonl"})
    }
    assert streamed == {"proj/s1.jsonl": b'{"a":1}\n'}


def test_tar_gz_with_symlink_and_limits(tmp_path):
    path = tmp_path / "sessions.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        data = b'{"type":"session_meta"}\n'
        info = tarfile.TarInfo("2026/03/01/rollout-a.jsonl")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("link.jsonl")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        archive.addfile(link)
    listing = inventory(path, "sessions.tar.gz")
    assert listing.kind == "tar" and [m.name for m in listing.members] == [
        "2026/03/01/rollout-a.jsonl"
    ]
    assert listing.errors == [("link.jsonl", "links and special files are not read (skipped)")]


def test_archive_bombs_are_refused(tmp_path):
    many = tmp_path / "many.zip"
    make_zip(many, {f"f{i}.jsonl": b"{}" for i in range(30)})
    with pytest.raises(ArchiveError, match="more than 20 members"):
        inventory(many, "many.zip", Limits(max_members=20))
    bomb = tmp_path / "bomb.zip"
    make_zip(bomb, {"big.jsonl": b"0" * 5_000_000})  # compresses to a few KB
    assert bomb.stat().st_size < 20_000
    with pytest.raises(ArchiveError, match="exceeds"):
        inventory(bomb, "bomb.zip", Limits(max_total_bytes=1_000_000))
    gz = tmp_path / "bomb.jsonl.gz"
    gz.write_bytes(gzip.compress(b"1" * 3_000_000))
    with pytest.raises(ArchiveError, match="exceeds"):
        inventory(gz, "bomb.jsonl.gz", Limits(max_member_bytes=1_000_000))


@pytest.mark.parametrize("kind", ["zip", "tgz", "gz"])
def test_truncated_archives_are_a_clear_error(tmp_path, kind):
    path = tmp_path / f"cut.{kind}"
    payload = b'{"type":"user"}\n' * 20000
    if kind == "zip":
        make_zip(path, {"a.jsonl": payload})
    elif kind == "tgz":
        make_tgz(path, {"a.jsonl": payload})
    else:
        path.write_bytes(gzip.compress(payload))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArchiveError, match=r"truncated|corrupt|not a readable"):
        inventory(path, path.name)


def test_plain_and_garbage_files_inventory_as_plain(tmp_path):
    garbage = tmp_path / "noise.jsonl"
    garbage.write_bytes(bytes(range(256)) * 10)
    listing = inventory(garbage, "noise.jsonl")
    assert listing.kind == "plain" and listing.members[0].size == 2560
