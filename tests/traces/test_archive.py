"""Archives: safe member names, bomb limits, truncation, and garbage."""

import gzip
import hashlib
import io
import tarfile
import zipfile

import pytest

from traces.formats.archive import (
    READ_ERRORS,
    ArchiveError,
    Limits,
    inventory,
    open_members,
    safe_member_name,
)


def make_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def make_tar(path, members, mode="w"):
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def make_tgz(path, members):
    make_tar(path, members, "w:gz")


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


LINE = b'{"type":"user"}\n'


def read_all(path, listing):
    """Each wanted member's bytes as the parse pass reads them, up to any damage."""
    read = {}
    names = {m.name for m in listing.members}
    for name, stream in open_members(path, listing.kind, path.name, names):
        data = b""
        try:
            while chunk := stream.read(4096):
                data += chunk
        except READ_ERRORS:
            pass
        read[name] = data
    return read


@pytest.mark.parametrize("kind", ["zip", "tgz", "tar"])
def test_a_truncated_archive_keeps_the_members_before_the_cut(tmp_path, kind):
    path = tmp_path / f"cut.{kind}"
    members = {"a.jsonl": LINE * 50, "b.jsonl": LINE * 60, "c.jsonl": bytes(range(256)) * 800}
    {"zip": make_zip, "tgz": make_tgz, "tar": make_tar}[kind](path, members)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])  # inside c.jsonl, the last and largest
    listing = inventory(path, path.name)
    assert [m.name for m in listing.members][:2] == ["a.jsonl", "b.jsonl"]
    assert listing.members[0].sha256 == hashlib.sha256(LINE * 50).hexdigest()
    assert listing.members[1].size == len(LINE * 60)
    assert "truncated" in listing.stopped or "central directory" in listing.stopped
    read = read_all(path, listing)
    assert read["a.jsonl"] == LINE * 50 and read["b.jsonl"] == LINE * 60
    if len(listing.members) == 3:  # listed with the part that could be read
        assert listing.members[2].size < len(members["c.jsonl"])
        assert members["c.jsonl"].startswith(read["c.jsonl"])


def test_a_truncated_gzip_keeps_the_bytes_before_the_cut(tmp_path):
    path = tmp_path / "cut.jsonl.gz"
    payload = b"".join(b'{"n":%d}\n' % i for i in range(40000))
    compressed = gzip.compress(payload)
    path.write_bytes(compressed[: len(compressed) // 2])
    listing = inventory(path, path.name)
    (member,) = listing.members
    assert member.name == "cut.jsonl" and 0 < member.size < len(payload)
    read = read_all(path, listing)["cut.jsonl"]
    assert len(read) > 0 and payload.startswith(read)


def test_a_zip_bomb_is_still_refused_when_read_from_local_headers(tmp_path):
    path = tmp_path / "bomb.zip"
    make_zip(path, {f"m{i}.jsonl": LINE for i in range(30)})
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"PK\x01\x02")])  # no central directory
    with pytest.raises(ArchiveError, match="more than 20 members"):
        inventory(path, path.name, Limits(max_members=20))
    make_zip(path, {"big.jsonl": LINE * 10_000})
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"PK\x01\x02")])
    with pytest.raises(ArchiveError, match="exceeds"):
        inventory(path, path.name, Limits(max_member_bytes=1000))


def test_an_escaping_member_path_is_skipped_when_read_from_local_headers(tmp_path):
    path = tmp_path / "escape.zip"
    make_zip(path, {"../evil.jsonl": LINE, "ok.jsonl": LINE})
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"PK\x01\x02")])
    listing = inventory(path, path.name)
    assert [m.name for m in listing.members] == ["ok.jsonl"]
    assert listing.errors == [("../evil.jsonl", "member path escapes the archive (skipped)")]


def test_plain_and_garbage_files_inventory_as_plain(tmp_path):
    garbage = tmp_path / "noise.jsonl"
    garbage.write_bytes(bytes(range(256)) * 10)
    listing = inventory(garbage, "noise.jsonl")
    assert listing.kind == "plain" and listing.members[0].size == 2560
