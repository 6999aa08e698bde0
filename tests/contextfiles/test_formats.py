"""Repository listings (file lists, tarballs, bombs, weird names) and trial files. No database."""

import gzip
import io
import tarfile

import pytest

from qualification.contextfiles.formats.listing import ListingError, read_listing, read_tarball
from qualification.contextfiles.formats.trials import TrialFormatError, check_batch, read_trials


def tarball(names, *, compress="gz", sizes=None, kinds=None):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compress}" if compress else "w") as archive:
        for index, name in enumerate(names):
            info = tarfile.TarInfo(name)
            data = b"x" * (sizes[index] if sizes else 1)
            info.size = len(data)
            if kinds and kinds[index] == "symlink":
                info.type, info.linkname, info.size = tarfile.SYMTYPE, "/etc/passwd", 0
                archive.addfile(info)
            elif kinds and kinds[index] == "fifo":
                info.type, info.size = tarfile.FIFOTYPE, 0
                archive.addfile(info)
            else:
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("compress", ["gz", "bz2", "xz", ""])
def test_tarball_member_names_with_the_common_root_stripped(compress):
    data = tarball(
        ["shop-1.2/api/app.py", "shop-1.2/docs/api.md", "shop-1.2/Makefile"], compress=compress
    )
    listing = read_listing(data)
    assert listing.paths == {"api/app.py", "docs/api.md", "Makefile"}
    assert listing.stripped_root == "shop-1.2/"
    assert listing.exists("api") and listing.exists("api/app.py") and not listing.exists("worker")


def test_weird_member_paths_are_skipped_with_reasons_and_nothing_is_extracted(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    data = tarball(
        [
            "README.md",
            "ok/a.py",
            "../escape.py",
            "/etc/passwd",
            "ok/../../up.py",
            "ok/bad\x01name",
            "ok/link",
            "ok/pipe",
        ],
        kinds=[None, None, None, None, None, None, "symlink", "fifo"],
    )
    listing = read_listing(data)
    assert listing.paths == {"README.md", "ok/a.py", "ok/link"}
    assert listing.skipped_count == 5
    reasons = " ".join(listing.skipped)
    assert "'..'" in reasons and "absolute path" in reasons and "control characters" in reasons
    assert "not a regular file" in reasons
    assert list(tmp_path.iterdir()) == []


def test_archive_bomb_is_refused():
    data = tarball(["big.bin"], sizes=[3 * 1024 * 1024])
    assert len(data) < 50_000
    with pytest.raises(ListingError, match="archive bomb"):
        read_tarball(io.BytesIO(data), max_bytes=1024 * 1024)


def test_corrupt_archives_and_binary_junk_are_refused():
    with pytest.raises(ListingError, match="not a readable tar"):
        read_listing(gzip.compress(b"this is not a tar archive" * 40))
    with pytest.raises(ListingError, match="not UTF-8"):
        read_listing(b"\xff\xfe\x00junk")
    with pytest.raises(ListingError, match="names no files"):
        read_listing(b"\n# only a comment\n")


def test_text_listings_keep_hashes():
    text = "100644 blob " + "a" * 40 + "\tsrc/x.py\n" + "b" * 64 + "  docs/y.md\n" + "README.md\n"
    listing = read_listing(text.encode())
    assert listing.paths == {"src/x.py", "docs/y.md", "README.md"}
    assert listing.hash_of("src/x.py") == "a" * 40 and listing.hash_of("docs/y.md") == "b" * 64
    assert "git ls-tree" in listing.source_format and "checksum" in listing.source_format
    assert listing.matches("src/*.py") and listing.children("src") == {"x.py"}


HEADER = "task_id,arm,repeat,success,adherence,input_tokens,output_tokens,model_calls,tool_calls\n"


def test_csv_rows_with_types_checked_per_line():
    text = HEADER + (
        "t1,baseline,1,true,,100,10,1,2\n"
        "t1,full,1,yes,0.5,120,12,1,3\n"
        "t2,full,1,maybe,,100,10,1,2\n"
        "t3,full,x,true,,-5,10,1.5,2\n"
    )
    result = read_trials(text)
    assert [r.line for r in result.rows] == [2, 3]
    assert result.rows[1].adherence == 0.5 and result.rows[1].success is True
    errors = {e["line"]: e["error"] for e in result.errors}
    assert "success must be true or false, not 'maybe'" in errors[4]
    assert "repeat must be a whole number" in errors[5]
    assert "input_tokens must be at least 0" in errors[5]
    assert "model_calls must be a whole number" in errors[5]


def test_csv_header_problems_name_the_columns():
    with pytest.raises(TrialFormatError, match=r"missing column.*success"):
        read_trials("task_id,arm\nt1,full\n")
    with pytest.raises(TrialFormatError, match=r"unknown column.*sucess"):
        read_trials("task_id,arm,success,sucess\nt1,full,true,true\n")
    with pytest.raises(TrialFormatError, match="no trials"):
        read_trials(HEADER)


def test_json_list_errors_carry_the_line_of_the_object():
    body = '[\n  {"task_id": "t1", "arm": "full", "success": true},\n  {"task_id": "t2", "arm": "full",\n   "success": "sometimes"},\n  3\n]'
    result = read_trials(body, content_type="application/json")
    assert len(result.rows) == 1 and result.rows[0].line == 2
    assert result.errors == [
        {"line": 3, "error": "item 2: success must be true or false, not 'sometimes'"},
        {"line": 5, "error": "item 3 is not an object"},
    ]
    with pytest.raises(TrialFormatError, match="line 2"):
        read_trials('[\n{"task_id": }]')
    with pytest.raises(TrialFormatError, match="JSON list"):
        read_trials('{"task_id": "t1"}', content_type="application/json")


def rows(text):
    return read_trials(HEADER + text).rows


def test_batch_checks_unknown_arms_duplicates_and_pairing():
    batch = rows(
        "t1,baseline,1,true,,1,1,1,1\n"
        "t1,full,1,true,,1,1,1,1\n"
        "t1,full,1,false,,1,1,1,1\n"  # duplicate of line 3
        "t2,full,1,true,,1,1,1,1\n"  # unpaired: no baseline
        "t3,nofile,1,true,,1,1,1,1\n"  # unknown arm
    )
    check = check_batch(batch, arms=["baseline", "full"], baseline="baseline", existing={})
    errors = {e["line"]: e["error"] for e in check.errors}
    assert "duplicate trial" in errors[4] and "line 3" in errors[4]
    assert errors[5] == "unpaired: task t2 repeat 1 has no trial in arm(s) baseline"
    assert errors[6].startswith("unknown arm 'nofile'")


def test_batch_without_any_baseline_is_refused():
    check = check_batch(
        rows("t1,full,1,true,,1,1,1,1\n"),
        arms=["baseline", "full"],
        baseline="baseline",
        existing={},
    )
    assert check.errors[0]["line"] is None and "baseline arm" in check.errors[0]["error"]


def test_batch_pairs_with_stored_trials_and_detects_changed_reuploads():
    stored_row = rows("t1,baseline,1,true,,1,1,1,1\n")[0]
    existing = {("baseline", "t1", 1): stored_row.values()}
    ok = check_batch(
        rows("t1,full,1,true,,1,1,1,1\nt1,baseline,1,true,,1,1,1,1\n"),
        arms=["baseline", "full"],
        baseline="baseline",
        existing=existing,
    )
    assert ok.errors == [] and len(ok.new) == 1 and ok.already_recorded == 1
    changed = check_batch(
        rows("t1,baseline,1,false,,1,1,1,1\nt1,full,1,true,,1,1,1,1\n"),
        arms=["baseline", "full"],
        baseline="baseline",
        existing=existing,
    )
    assert "already recorded with different values" in changed.errors[0]["error"]


def test_listing_folders_and_children():
    listing = read_listing(b"services/a/main.go\nservices/a/x.go\nservices/b/main.go\nREADME.md\n")
    assert listing.children("services") == {"a", "b"}
    assert listing.exists("services/a") and not listing.exists("services/c")
    assert listing.matches("services/*/main.go") and not listing.matches("docs/*")


def test_an_over_long_failure_class_is_refused_not_cut():
    text = "task_id,arm,success,failure_class\n" + f"t1,full,false,{'x' * 65}\nt2,full,false,ok\n"
    result = read_trials(text)
    assert [(r.line, r.failure_class) for r in result.rows] == [(3, "ok")]
    assert [e["line"] for e in result.errors] == [2]
    assert result.errors[0]["error"].endswith("failure_class is at most 64 characters, not 65")
