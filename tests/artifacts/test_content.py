"""The pure byte machinery: redaction across chunks, the line index, bounded reads, search."""

import io
import random
import time

import pytest

from artifacts.content import reads
from artifacts.content.coverage import merge_ranges
from artifacts.content.lines import LimitExceeded, LineIndex, LineIndexBuilder
from artifacts.content.redaction import (
    DEFAULT_RULES,
    OVERLAP,
    RedactionPatternError,
    RedactionRule,
    Redactor,
    validate_custom_rule,
)
from artifacts.content.rendering import rows
from artifacts.content.search import Matcher, SearchError, SearchTimeout, scan
from artifacts.content.tokens import TokenEstimator, estimate_tokens

SECRETS = {
    "aws_access_key_id": b"AKIAIOSFODNN7EXAMPLE",
    "github_token": b"ghp_" + b"a1B2" * 9,
    "llm_api_key": b"sk-ant-" + b"x9" * 20,
    "slack_token": b"xoxb-1234567890-abcdefABCDEF",
    "google_api_key": b"AIza" + b"Sy" * 17 + b"Q",
    "stripe_key": b"sk_live_" + b"4eC39HqLyjWDarjtT1zdp7dc",
    "jwt": b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "context_governance_token": b"cg_0a1b2c3d_" + b"Zz" * 20,
}


def redact_in_chunks(redactor: Redactor, data: bytes, sizes) -> tuple[bytes, dict]:
    stream = redactor.stream()
    out, position, sizes = [], 0, iter(sizes)
    while position < len(data):
        step = next(sizes)
        out.append(stream.feed(data[position : position + step]))
        position += step
    out.append(stream.finish())
    return b"".join(out), dict(stream.counts)


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_token_shape_is_replaced_whole(name):
    secret = SECRETS[name]
    out, counts = Redactor(DEFAULT_RULES).redact(b"before " + secret + b" after\n")
    assert out == f"before [REDACTED:{name}] after\n".encode()
    assert counts == {name: 1}


@pytest.mark.parametrize(
    ("text", "expected", "rule"),
    [
        (
            b"git clone https://bob:hunter22@git.example/x.git",
            b"git clone https://bob:[REDACTED:password_in_url]@git.example/x.git",
            "password_in_url",
        ),
        (
            b"Authorization: Bearer abcdefghijklmnop123456",
            b"Authorization: Bearer [REDACTED:bearer_token]",
            "bearer_token",
        ),
        (
            b'DB_PASSWORD="pa55word!"',
            b'DB_PASSWORD="[REDACTED:secret_assignment]"',
            "secret_assignment",
        ),
        (b"api_key: 0123456789", b"api_key: [REDACTED:secret_assignment]", "secret_assignment"),
        (
            b"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            b"AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]",
            "aws_secret_access_key",
        ),
    ],
)
def test_assignment_rules_keep_the_name_and_replace_the_value(text, expected, rule):
    out, counts = Redactor(DEFAULT_RULES).redact(text)
    assert out == expected
    assert counts == {rule: 1}


def test_ordinary_output_is_untouched():
    text = b"tests/test_tokens.py::test_secret_rotation PASSED\nbearer of news\npassword reset ok\n"
    out, counts = Redactor(DEFAULT_RULES).redact(text)
    assert out == text
    assert counts == {}


PEM = (
    b"-----BEGIN RSA PRIVATE KEY-----\n"
    + b"\n".join(b"MIIEowIBAAKCAQEA" + bytes([65 + i % 26]) * 48 for i in range(25))
    + b"\n-----END RSA PRIVATE KEY-----"
)


def test_private_key_block_is_replaced_from_begin_to_end():
    out, counts = Redactor(DEFAULT_RULES).redact(b"key:\n" + PEM + b"\nnext line\n")
    assert out == b"key:\n[REDACTED:private_key]\nnext line\n"
    assert counts == {"private_key": 1}


def test_truncated_private_key_body_is_still_replaced():
    truncated = PEM[: len(PEM) // 2]
    out, _ = Redactor(DEFAULT_RULES).redact(truncated + b"\n$ echo done\n")
    assert b"MIIEowIBAAKCAQEA" not in out
    assert out.endswith(b"[REDACTED:private_key]\n$ echo done\n")


def test_secrets_split_across_any_chunk_boundary_are_caught():
    rng = random.Random(11)
    filler = b"".join(b"line %d ok\n" % i for i in range(30000))
    pieces, expected = [], {}
    for name, secret in SECRETS.items():
        pieces.append(filler[: rng.randint(1000, 90000)])
        pieces.append(b" " + secret + b" \n")
        expected[name] = 1
    pieces.append(PEM + b"\n")
    expected["private_key"] = 1
    data = b"".join(pieces)
    redactor = Redactor(DEFAULT_RULES)
    whole, whole_counts = redactor.redact(data)
    assert whole_counts == expected
    for sizes in ([1] * len(data), [7] * len(data), [OVERLAP - 1] * 100, [1 << 20] * 10):
        if sizes[0] == 1:
            # Byte-at-a-time over the whole corpus is slow; the region around each secret is
            # what matters, so feed a short prefix one byte at a time, then large chunks.
            sizes = [1] * 5000 + [65537] * 100
        out, counts = redact_in_chunks(redactor, data, sizes)
        assert out == whole
        assert counts == expected
    for secret in SECRETS.values():
        assert secret not in whole


def test_random_chunkings_agree_with_one_pass():
    rng = random.Random(5)
    data = b"".join(
        rng.choice([b"ok ", b"password=hunter22 ", b"AKIAIOSFODNN7EXAMPLE ", b"\n", b"x" * 500])
        for _ in range(4000)
    )
    redactor = Redactor(DEFAULT_RULES)
    whole, counts = redactor.redact(data)
    for _ in range(5):
        sizes = [rng.choice([1, 3, 1000, 70000, 200000]) for _ in range(len(data))]
        assert redact_in_chunks(redactor, data, sizes) == (whole, dict(counts))


def test_custom_rule_with_secret_group():
    rule = RedactionRule("ticket", r"ticket=(?P<secret>T-[0-9]{1,8})")
    validate_custom_rule(rule.name, rule.pattern)
    out, counts = Redactor([rule]).redact(b"see ticket=T-12345 now")
    assert out == b"see ticket=[REDACTED:ticket] now"
    assert counts == {"ticket": 1}


@pytest.mark.parametrize(
    ("name", "pattern", "reason"),
    [
        ("Bad Name", "x{1,3}", "lowercase letters"),
        ("jwt", "x{1,3}", "built-in"),
        ("unbounded", "TICKET-[0-9]+", "unboundedly long"),
        ("empty", "a{0,3}", "matches empty text"),
        ("lookbehind", "(?<=a)b", "not a valid RE2 pattern"),
        ("broken", "(abc", "not a valid RE2 pattern"),
        ("two", "(?P<secret>a)(?P<secret>b)", "at most one"),
    ],
)
def test_custom_rules_that_cannot_stream_safely_are_refused(name, pattern, reason):
    with pytest.raises(RedactionPatternError, match=reason):
        validate_custom_rule(name, pattern)


def test_no_rules_passes_bytes_through():
    stream = Redactor([]).stream()
    assert stream.feed(b"password=x1234") + stream.finish() == b"password=x1234"


# --- line index and bounded reads --------------------------------------------


def build(data: bytes, stride: int = 64, chunk: int = 333) -> LineIndex:
    builder = LineIndexBuilder(stride=stride)
    for start in range(0, len(data), chunk):
        builder.update(data[start : start + chunk])
    return LineIndex.from_bytes(builder.finish().to_bytes())


def random_text(rng: random.Random) -> bytes:
    lengths = [0, 1, 5, 40, 300, 5000]
    lines = [b"x" * rng.choice(lengths) for _ in range(rng.randint(0, 300))]
    body = b"\n".join(lines)
    return body + (b"\n" if rng.random() < 0.5 else b"")


@pytest.mark.parametrize("seed", range(12))
def test_line_index_and_reads_agree_with_splitlines(seed):
    rng = random.Random(seed)
    data = random_text(rng)
    index = build(data, stride=rng.choice([16, 100, 4096]))
    lines = data.splitlines(keepends=True)
    handle = io.BytesIO(data)
    assert index.lines == len(lines)
    assert index.size == len(data)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    for number in range(1, len(lines) + 2):
        assert index.line_start(handle, number) == starts[min(number - 1, len(lines))]
    if not lines:
        return
    for n in (1, 2, 17):
        tail = reads.tail(handle, index, lines=n, max_lines=100, max_bytes=10**9)
        assert tail.data == b"".join(lines[-n:])
        assert (tail.start_line, tail.end_line) == (max(1, len(lines) - n + 1), len(lines))
        head = reads.head(handle, index, lines=n, max_lines=100, max_bytes=10**9)
        assert head.data == b"".join(lines[:n])
        assert (head.start_line, head.end_line) == (1, min(n, len(lines)))
    first = rng.randint(1, len(lines))
    last = rng.randint(first, len(lines) + 5)
    excerpt = reads.line_range(
        handle, index, start_line=first, end_line=last, max_lines=10**6, max_bytes=10**9
    )
    assert excerpt.data == b"".join(lines[first - 1 : last])
    assert (excerpt.start_line, excerpt.end_line) == (first, min(last, len(lines)))
    start = rng.randrange(len(data))
    end = rng.randint(start + 1, len(data) + 10)
    excerpt = reads.byte_range(handle, index, start_byte=start, end_byte=end, max_bytes=10**9)
    assert excerpt.data == data[start:end]
    assert excerpt.start_line == data[:start].count(b"\n") + 1


def test_tail_without_trailing_newline_and_empty_file():
    data = b"a\nb\nc"
    handle, index = io.BytesIO(data), build(data)
    excerpt = reads.tail(handle, index, lines=2, max_lines=10, max_bytes=100)
    assert (excerpt.data, excerpt.start_line, excerpt.end_line) == (b"b\nc", 2, 3)
    empty = build(b"")
    assert empty.lines == 0
    excerpt = reads.tail(io.BytesIO(b""), empty, lines=5, max_lines=10, max_bytes=100)
    assert excerpt.data == b"" and excerpt.bytes == 0


def test_limits_name_themselves():
    data = b"".join(b"%05d\n" % i for i in range(1000))
    handle, index = io.BytesIO(data), build(data)
    with pytest.raises(LimitExceeded) as exc:
        reads.tail(handle, index, lines=500, max_lines=100, max_bytes=10**6)
    assert exc.value.limit == "max_read_lines"
    with pytest.raises(LimitExceeded) as exc:
        reads.tail(handle, index, lines=100, max_lines=1000, max_bytes=50)
    assert exc.value.limit == "max_read_bytes"
    assert "50" in str(exc.value)
    with pytest.raises(LimitExceeded):
        reads.byte_range(handle, index, start_byte=0, end_byte=600, max_bytes=500)
    with pytest.raises(LimitExceeded):
        reads.line_range(handle, index, start_line=1, end_line=200, max_lines=1000, max_bytes=100)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start_line": 0, "end_line": 3}, "start_line: lines are numbered from 1"),
        ({"start_line": 5, "end_line": 3}, "end_line: 3 is before start_line 5"),
        ({"start_line": 99, "end_line": 100}, "start_line: 99 is past the last line"),
    ],
)
def test_bad_line_ranges_name_the_parameter(kwargs, message):
    data = b"a\nb\nc\n"
    with pytest.raises(reads.RangeError, match=message):
        reads.line_range(io.BytesIO(data), build(data), max_lines=10, max_bytes=100, **kwargs)


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [(-1, 3, "start_byte: must be 0 or more"), (3, 3, "end_byte"), (50, 60, "past the end")],
)
def test_bad_byte_ranges_name_the_parameter(start, end, message):
    data = b"a\nb\nc\n"
    with pytest.raises(reads.RangeError, match=message):
        reads.byte_range(
            io.BytesIO(data), build(data), start_byte=start, end_byte=end, max_bytes=100
        )


def test_a_huge_line_becomes_a_clipped_window_around_the_match():
    data = b"short\n" + b"x" * 100_000 + b"NEEDLE" + b"y" * 100_000 + b"\nend\n"
    handle, index = io.BytesIO(data), build(data, stride=4096)
    result = scan(
        handle,
        size=len(data),
        matcher=Matcher("NEEDLE", is_regex=False, ignore_case=False, timeout=5),
        max_hits=5,
    )
    (hit,) = result.hits
    excerpt = reads.context_excerpt(
        handle, index, line=hit.line, line_start=hit.line_start, line_end=hit.line_end,
        context=1, max_bytes=4096, match_start=hit.start_byte, match_end=hit.end_byte,
    )  # fmt: skip
    assert excerpt.clipped
    assert excerpt.bytes <= 4096
    assert b"NEEDLE" in excerpt.data
    assert data[excerpt.start_byte : excerpt.end_byte] == excerpt.data
    assert (excerpt.start_line, excerpt.end_line) == (2, 2)


# --- search ------------------------------------------------------------------


def naive_hits(data: bytes, needle: bytes):
    hits, line_no, position = [], 1, 0
    for line in data.splitlines(keepends=True):
        index = line.find(needle)
        while index != -1:
            hits.append((line_no, position + index))
            index = line.find(needle, index + len(needle))
        position += len(line)
        line_no += 1
    return hits


@pytest.mark.parametrize("block", [5, 64, 4096])
def test_plain_search_finds_every_match_with_its_line(block):
    rng = random.Random(block)
    words = [b"ok", b"ERROR", b"warn", b"ERRORERROR", b"\n", b" "]
    data = b"".join(rng.choice(words) for _ in range(20000)) + b"ERROR"
    matcher = Matcher("ERROR", is_regex=False, ignore_case=False, timeout=5)
    result = scan(
        io.BytesIO(data), size=len(data), matcher=matcher, max_hits=10**6, block_size=block
    )
    assert [(h.line, h.start_byte) for h in result.hits] == naive_hits(data, b"ERROR")
    assert not result.more
    for hit in result.hits:
        line = data[hit.line_start : hit.line_end]
        assert b"ERROR" in line
        assert line.count(b"\n") <= 1


def test_search_across_a_forced_cut_inside_a_giant_line(monkeypatch):
    from artifacts.content import search

    monkeypatch.setattr(search, "MAX_LINE", 1000)
    data = b"a" * 997 + b"NEEDLE" + b"b" * 3000 + b"\nNEEDLE\n"
    matcher = Matcher("NEEDLE", is_regex=False, ignore_case=False, timeout=5)
    result = scan(io.BytesIO(data), size=len(data), matcher=matcher, max_hits=10, block_size=100)
    assert [(h.line, h.start_byte) for h in result.hits] == [(1, 997), (2, 4004)]


def test_search_stops_at_max_hits_and_says_so():
    data = b"hit\n" * 50
    matcher = Matcher("hit", is_regex=False, ignore_case=False, timeout=5)
    result = scan(io.BytesIO(data), size=len(data), matcher=matcher, max_hits=10)
    assert len(result.hits) == 10 and result.more


def test_regex_and_ignore_case():
    data = b"Error 42\nerror 7\nfine\nERROR x\n"
    regex = Matcher(r"error \d+", is_regex=True, ignore_case=True, timeout=5)
    result = scan(io.BytesIO(data), size=len(data), matcher=regex, max_hits=10)
    assert [(h.line, data[h.start_byte : h.end_byte]) for h in result.hits] == [
        (1, b"Error 42"),
        (2, b"error 7"),
    ]
    plain = Matcher("error", is_regex=False, ignore_case=True, timeout=5)
    result = scan(io.BytesIO(data), size=len(data), matcher=plain, max_hits=10)
    assert [h.line for h in result.hits] == [1, 2, 4]


@pytest.mark.parametrize(
    ("query", "is_regex", "message"),
    [
        ("", False, "q: give the text"),
        ("(unclosed", True, "q: not a valid regular expression"),
        ("x*", True, "matches empty text"),
        ("a" * 1001, False, "at most 1000"),
    ],
)
def test_bad_queries_name_the_parameter(query, is_regex, message):
    with pytest.raises(SearchError, match=message):
        Matcher(query, is_regex=is_regex, ignore_case=False, timeout=1)


def test_catastrophic_regex_is_stopped_by_the_timeout():
    data = (b"a" * 40 + b"!\n") * 2000
    matcher = Matcher(r"(?:a|aa)+(?:a|aa)+b", is_regex=True, ignore_case=False, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(SearchTimeout, match="search timeout"):
        scan(io.BytesIO(data), size=len(data), matcher=matcher, max_hits=10)
    assert time.monotonic() - started < 10


# --- estimator, coverage, rendering -------------------------------------------


def test_token_estimate_is_documented_byte_arithmetic():
    assert estimate_tokens(b"a" * 400) == 100
    assert estimate_tokens("é".encode() * 30) == 20  # 60 non-ASCII bytes / 3
    estimator = TokenEstimator()
    for chunk in (b"abcd" * 10, "日本".encode(), b""):
        estimator.update(chunk)
    assert (estimator.ascii_bytes, estimator.non_ascii_bytes, estimator.tokens) == (40, 6, 12)


def test_coverage_merges_overlapping_ranges():
    coverage = merge_ranges([(0, 10), (5, 20), (30, 40), (39, 41), (90, 200)], size=100)
    assert coverage.ranges == [(0, 20), (30, 41), (90, 100)]
    assert coverage.loaded_bytes == 41
    assert coverage.fraction == pytest.approx(0.41)
    assert [seg["left"] for seg in coverage.segments()] == [0.0, 30.0, 90.0]


def test_rendering_marks_spans_and_keeps_text_plain():
    data = b"<b>x</b> FAIL\nok FAIL FAIL\n"
    result = rows(data, first_line=7, start_byte=100, spans=[(109, 113), (117, 121), (122, 126)])
    assert [row.number for row in result] == [7, 8]
    assert [(s.text, s.match) for s in result[0].segments] == [("<b>x</b> ", False), ("FAIL", True)]
    assert [(s.text, s.match) for s in result[1].segments] == [
        ("ok ", False),
        ("FAIL", True),
        (" ", False),
        ("FAIL", True),
    ]
