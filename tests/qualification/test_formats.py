"""The trial parser: every bad field is reported with its line; valid rows are typed."""

from decimal import Decimal

from qualification.formats.trials import detect_format, parse_items, parse_trials

HEADER = "task_id,family,stratum_tokens,repeat,task_correct,input_tokens,output_tokens"


def errors(parsed):
    return [(e.line, e.field, e.error) for e in parsed.errors]


def test_csv_rows_are_typed_and_extra_columns_kept():
    parsed = parse_trials(
        (HEADER + ",retrieval_correct,cost_usd,failure_class,notes\n"
         "T1,Retrieval,8000,0,pass,7900,300,yes,0.0123,Forgotten constraint,first run\n").encode()
    )  # fmt: skip
    assert parsed.errors == []
    row = parsed.rows[0]
    assert (row.task_id, row.family, row.stratum_tokens, row.repeat) == ("T1", "retrieval", 8000, 0)
    assert row.task_correct is True and row.retrieval_correct is True
    assert row.cost_usd == Decimal("0.012300")
    assert row.failure_class == "forgotten_constraint"
    assert row.extra == {"notes": "first run"}
    assert parsed.unknown_fields == ["notes"]


def test_every_problem_on_a_line_is_reported_with_the_line():
    parsed = parse_trials(
        (HEADER + "\n"
         "T1,retrieval,8000,0,true,7900,300\n"
         "T1,retrieval,8000,1,maybe,-3,300\n"
         "\n"
         "T2,retrieval,0,0,true,1,1\n"
         "T3,retrieval,8000,1.5,true,1,1,extra\n"
         ",retrieval,8000,0,true,1,\n").encode()
    )  # fmt: skip
    assert errors(parsed) == [
        (3, "task_correct", "task_correct must be true or false, got 'maybe'"),
        (3, "input_tokens", "input_tokens must not be negative, got -3"),
        (5, "stratum_tokens", "stratum_tokens must be a positive number of tokens, got 0"),
        (6, "", "expected 7 columns, found 8"),
        (7, "task_id", "task_id is required"),
        (7, "output_tokens", "output_tokens is required"),
    ]
    assert [r.line for r in parsed.rows] == [2]
    assert parsed.records == 5


def test_csv_header_problems_are_on_line_one():
    missing = parse_trials(b"task_id,family\nT1,retrieval\n")
    assert errors(missing)[0][0] == 1 and "stratum_tokens" in errors(missing)[0][2]
    repeated = parse_trials((HEADER + ",repeat\n").encode())
    assert errors(repeated) == [(1, "", "repeated columns: repeat")]


def test_unknown_failure_class_lists_the_known_ones():
    parsed = parse_trials((HEADER + ",failure_class\nT1,r,8000,0,false,1,1,gremlins\n").encode())
    assert errors(parsed)[0][:2] == (2, "failure_class")
    assert "harness_truncation" in errors(parsed)[0][2]


def test_jsonl_lines_and_json_items_are_numbered():
    jsonl = parse_trials(
        b'{"task_id":"T1","family":"r","stratum_tokens":8000,"repeat":0,"task_correct":true,'
        b'"input_tokens":1,"output_tokens":1}\nnot json\n{"task_id":"T1"}\n',
        filename="t.jsonl",
    )
    assert jsonl.format == "jsonl"
    assert [e.line for e in jsonl.errors][:2] == [2, 3] and "not valid JSON" in jsonl.errors[
        0
    ].error
    items = parse_items([{"task_id": "T1"}, "nope"])
    assert {e.line for e in items.errors} == {1, 2}
    assert parse_items({"trials": []}).errors[0].error == "the list of trials is empty"
    assert parse_items({"x": 1}).errors[0].error == "expected a JSON array of trial objects"


def test_whole_file_problems_have_no_line():
    assert errors(parse_trials(b"")) == [(None, "", "the file is empty")]
    assert "not UTF-8" in parse_trials(b"\xff\xfe\x00bad", filename="x.csv").errors[0].error
    assert "not valid JSON" in parse_trials(b"[{", filename="x.json").errors[0].error


def test_format_detection():
    assert detect_format(b"[]", "x.txt") == "json"
    assert detect_format(b'{"a":1}', "x.txt") == "jsonl"
    assert detect_format(b'{"trials": []}', "x.json") == "json"
    assert detect_format(b"task_id,family", "") == "csv"
    assert detect_format(b"[]", "x.csv") == "csv"


def test_booleans_and_numbers_accept_common_spellings():
    parsed = parse_items(
        [{"task_id": 7, "family": "R", "stratum_tokens": "8000", "repeat": 2.0,
          "task_correct": 0, "input_tokens": 10, "output_tokens": 5, "retrieval_correct": "FAIL"}]
    )  # fmt: skip
    row = parsed.rows[0]
    assert (row.task_id, row.family, row.repeat, row.task_correct, row.retrieval_correct) == (
        "7", "r", 2, False, False,
    )  # fmt: skip
    bad = parse_items([{"task_id": "T", "family": "r", "stratum_tokens": True, "repeat": 0,
                        "task_correct": True, "input_tokens": 10**12, "output_tokens": 1}])  # fmt: skip
    assert [e.field for e in bad.errors] == ["stratum_tokens", "input_tokens"]


def test_annotation_class_slug_is_accepted_for_trials():
    parsed = parse_trials(
        (HEADER + ",failure_class\n"
         "T1,r,8000,0,false,1,1,incorrect_symbol_relationship\n"
         "T2,r,8000,0,false,1,1,Incorrect symbol relationships\n").encode()
    )  # fmt: skip
    assert parsed.errors == []
    assert [r.failure_class for r in parsed.rows] == ["incorrect_symbol_relationships"] * 2
