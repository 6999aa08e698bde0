"""The restart-package builder's repeated rows are Django formsets: the rows the page sends
are numbered 0, 1, … whatever gaps removing rows left, an empty row is dropped, and each
row's rules are the same validators as the model's."""

from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import QueryDict
from django.utils.datastructures import MultiValueDict

from specs.forms import PackageForm, VerificationFormSet, row_formset
from specs.validators import COMMIT_MESSAGE, MAX_OUTPUT_BYTES


def post(rows: dict[str, str]) -> QueryDict:
    data = QueryDict(mutable=True)
    data.update(rows)
    return data


def verification(index: int, command="", exit_status="", commit="", output="") -> dict:
    prefix = f"verifications-{index}-"
    return {
        prefix + "command": command,
        prefix + "exit_status": exit_status,
        prefix + "commit": commit,
        prefix + "output": output,
    }


def test_rows_sent_with_gaps_are_numbered_in_order_and_empty_ones_dropped():
    data = post(
        verification(2, "pytest", "1", "abcdef1", "1 failed\n")
        | verification(5, commit="abcdef1")  # the page fills the commit in: not a row yet
        | verification(9, "make lint", "0", "ABCDEF12", "ok\n")
    )
    formset = row_formset(VerificationFormSet, data, MultiValueDict(), "verifications", "command")
    assert formset.management_form.cleaned_data["TOTAL_FORMS"] == 3
    assert [form.prefix for form in formset] == [f"verifications-{i}" for i in range(3)]
    form = PackageForm(data, MultiValueDict())
    assert form.rows_ok
    assert [(r["index"], r["command"], r["exit_status_value"]) for r in form.verification_rows] == [
        (0, "pytest", 1),
        (2, "make lint", 0),
    ]
    assert [(v.command, v.exit_status, v.commit, v.output) for v in form.verifications()] == [
        ("pytest", 1, "abcdef1", "1 failed\n"),
        ("make lint", 0, "ABCDEF12", "ok\n"),
    ]


def test_each_row_names_its_errors_with_the_model_rules():
    data = post(verification(0, "", "one", "main", "x") | {"discrepancies-0-claim": "done"})
    form = PackageForm(data, MultiValueDict())
    assert not form.rows_ok
    (row,) = form.verification_rows
    assert row["errors"] == {
        "command": ["Give the command that ran."],
        "exit_status": ["Give the exit status as a whole number, e.g. 0 or 1."],
        "commit": [f"{COMMIT_MESSAGE} The commit the command ran against."],
    }
    assert row["exit_status"] == "one" and row["commit"] == "main"  # shown again as typed
    (discrepancy,) = form.discrepancy_rows
    assert discrepancy["errors"] == {
        "repository_state": ["What does the repository show? It wins."]
    }


def test_an_uploaded_output_replaces_the_typed_one_and_is_checked():
    def with_upload(content: bytes):
        data = post(verification(0, "pytest", "0", "abcdef1", "typed"))
        files = MultiValueDict(
            {"verifications-0-output_file": [SimpleUploadedFile("out.txt", content)]}
        )
        return PackageForm(data, files)

    good = with_upload("résumé\n".encode())
    assert good.rows_ok and good.verifications()[0].output == "résumé\n"
    binary = with_upload(b"\xff\xfe")
    assert binary.verification_rows[0]["errors"] == {"output": ["The file is not UTF-8 text."]}
    assert binary.verification_rows[0]["output"] == "typed"
    large = with_upload(b"y" * (MAX_OUTPUT_BYTES + 1))
    assert large.verification_rows[0]["errors"] == {
        "output": [f"Raw output is over the limit of {MAX_OUTPUT_BYTES:,} bytes."]
    }
