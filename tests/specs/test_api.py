"""The REST API: shapes, field-level errors, roles, workspace isolation, 409s and exports."""

import hashlib

import pytest
from rest_framework.test import APIClient

from governance.models import AuditEvent
from governance.services import api_token_create
from specs.analysis.content import fingerprint
from specs.models import RestartPackage, SpecVersion
from tests.specs.conftest import BASE_ITEMS, resolved
from traces.models import Session

pytestmark = pytest.mark.django_db

ITEMS = [item.as_dict() for item in BASE_ITEMS]
RESOLVED = [item.as_dict() for item in resolved(BASE_ITEMS)]


def create_spec(api, **overrides):
    body = {"title": "Payments API", "slug": "payments", "consequence": "high"} | overrides
    response = api.post("/api/v1/specs/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def create_version(api, spec_id, supersedes=None, items=ITEMS, **extra):
    return api.post(
        f"/api/v1/specs/{spec_id}/versions/",
        {"supersedes": supersedes, "note": "n", "items": items, **extra},
        format="json",
    )


@pytest.fixture
def approved(api_for):
    """A high-consequence spec whose v1 was written by the editor and approved by the reviewer."""
    editor, reviewer = api_for("editor"), api_for("reviewer")
    spec = create_spec(editor)
    v1 = create_version(editor, spec["id"]).json()
    assert editor.post(f"/api/v1/spec-versions/{v1['id']}/submit/").status_code == 200
    approval = reviewer.post(
        f"/api/v1/spec-versions/{v1['id']}/approve/",
        {"acknowledged_resolutions": []},
        format="json",
    )
    assert approval.status_code == 200, approval.json()
    return spec, v1


def test_spec_create_and_retrieve_with_authoritative_version(api_for, approved):
    spec, v1 = approved
    body = api_for("viewer").get(f"/api/v1/specs/{spec['id']}/").json()
    assert body["authoritative_version"]["id"] == v1["id"]
    assert body["authoritative_version"]["number"] == 1
    assert body["authoritative_version"]["fingerprint"] == fingerprint(BASE_ITEMS)
    assert (body["slug"], body["consequence"], body["owner"]) == ("payments", "high", "editor-a")
    assert body["url"].endswith("/w/team-a/specs/payments/")


def test_spec_create_errors_name_the_field(api_for):
    api = api_for("editor")
    response = api.post(
        "/api/v1/specs/", {"slug": "Not a slug!", "consequence": "huge"}, format="json"
    )
    assert response.status_code == 400
    assert set(response.json()) == {"title", "slug", "consequence"}
    assert response.json()["consequence"] == ['"huge" is not a valid choice.']
    create_spec(api)
    again = api.post(
        "/api/v1/specs/",
        {"title": "Payments", "slug": "payments", "consequence": "low"},
        format="json",
    )
    assert again.status_code == 400
    assert again.json() == {"slug": ["A specification with the slug 'payments' already exists."]}
    reserved = api.post("/api/v1/specs/", {"title": "Review", "consequence": "low"}, format="json")
    assert reserved.status_code == 400 and "reserved" in reserved.json()["slug"][0]
    stranger = api.post(
        "/api/v1/specs/", {"title": "X", "consequence": "low", "owner": "nobody"}, format="json"
    )
    assert stranger.json() == {"owner": ["'nobody' is not a member of this workspace."]}


def test_version_item_errors_are_field_level(api_for):
    api = api_for("editor")
    spec = create_spec(api)
    response = create_version(
        api,
        spec["id"],
        items=[
            {"key": "a", "kind": "requirement", "text": "ok"},
            {"key": "A", "kind": "wish", "text": "dup"},
            {"key": "bad key", "kind": "decision", "text": "x", "status": "maybe"},
            {"key": "q", "kind": "open_question", "text": "which?", "alternatives": [{"text": ""}]},
            {"kind": "requirement"},
        ],
    )
    assert response.status_code == 400
    items = response.json()["items"]
    assert set(items) == {"1", "2", "3", "4"}
    assert items["1"] == {"kind": ['"wish" is not a valid choice.']}
    assert items["2"]["status"] == ['"maybe" is not a valid choice.']
    assert items["3"] == {"alternatives": {"0": {"text": ["This field may not be blank."]}}}
    assert set(items["4"]) == {"key", "text"}
    # Once the shapes are right, the content rules answer per item and field.
    response = create_version(
        api,
        spec["id"],
        items=[
            {"key": "a", "kind": "requirement", "text": "ok"},
            {"key": "A", "kind": "decision", "text": "dup"},
            {"key": "bad key", "kind": "decision", "text": "x"},
            {"key": "q", "kind": "open_question", "text": "?", "alternatives": [{"text": "  "}]},
        ],
    )
    assert response.json()["items"] == {
        "1": {"key": ["Key 'A' is already used by item 1; keys are unique within a version (ignoring case)."]},
        "2": {"key": ["'bad key' is not a valid key: Letters, digits and . _ : - (starting with a letter or digit), at most 80 characters."]},
        "3": {"alternatives": {"0": {"text": ["Describe the alternative."]}}},
    }  # fmt: skip
    assert not SpecVersion.objects.exists()


def test_version_sources_link_trace_objects_of_this_workspace_only(
    api_for, workspace, other_workspace
):
    api = api_for("editor")
    spec = create_spec(api)
    own = Session.objects.create(workspace=workspace, harness="claude-code", external_id="own-1")
    foreign = Session.objects.create(
        workspace=other_workspace, harness="claude-code", external_id="x"
    )
    bad = create_version(
        api,
        spec["id"],
        sources=[
            {"trace_session": foreign.pk},
            {"url": "https://a.org/1", "trace_session": own.pk},
        ],
    )
    assert bad.status_code == 400
    assert bad.json()["sources"]["0"] == {
        "trace_session": [f'Invalid pk "{foreign.pk}" - object does not exist.']
    }
    assert bad.json()["sources"]["1"] == {
        "non_field_errors": [
            "Give exactly one of trace_session, run, divergence or url for each source."
        ]
    }
    good = create_version(
        api,
        spec["id"],
        sources=[
            {"trace_session": own.pk},
            {"url": "https://tracker.example.org/1", "label": "PAY-1"},
        ],
    )
    assert good.status_code == 201
    assert [(s["kind"], s["trace_session"], s["url"]) for s in good.json()["sources"]] == [
        ("trace_session", own.pk, ""),
        ("reference", None, "https://tracker.example.org/1"),
    ]


@pytest.mark.parametrize(
    ("role", "create", "submit", "approve"),
    [
        ("viewer", 403, 403, 403),
        ("editor", 201, 200, 403),
        ("reviewer", 201, 200, 200),
        ("admin", 201, 200, 200),
    ],
)
def test_roles_for_every_action(role, create, submit, approve, api_for, approved, members):
    spec, v1 = approved
    api = api_for(role)
    assert api.get(f"/api/v1/specs/{spec['id']}/versions/").status_code == 200
    assert api.get(f"/api/v1/spec-versions/{v1['id']}/").status_code == 200
    # Drafts written by someone else, so self-review never masks the role check.
    author = api_for("admin" if role != "admin" else "editor")
    draft = create_version(author, spec["id"], supersedes=v1["id"], items=RESOLVED).json()
    assert create_version(api, spec["id"], supersedes=v1["id"]).status_code == create
    assert api.post(f"/api/v1/spec-versions/{draft['id']}/submit/").status_code == submit
    if submit != 200:
        author.post(f"/api/v1/spec-versions/{draft['id']}/submit/")
    response = api.post(
        f"/api/v1/spec-versions/{draft['id']}/approve/",
        {"acknowledged_resolutions": ["storage"]},
        format="json",
    )
    assert response.status_code == approve
    expected_reject = 403 if approve == 403 else 409
    reject = api.post(
        f"/api/v1/spec-versions/{draft['id']}/reject/", {"comment": "late"}, format="json"
    )
    assert reject.status_code == expected_reject
    assert api.patch(
        f"/api/v1/specs/{spec['id']}/", {"consequence": "low"}, format="json"
    ).status_code == (200 if role in ("reviewer", "admin") else 403)


def test_self_approval_is_403_and_recorded_nowhere(api_for, approved):
    spec, v1 = approved
    reviewer = api_for("reviewer")
    mine = create_version(reviewer, spec["id"], supersedes=v1["id"], items=RESOLVED).json()
    reviewer.post(f"/api/v1/spec-versions/{mine['id']}/submit/")
    response = reviewer.post(
        f"/api/v1/spec-versions/{mine['id']}/approve/",
        {"acknowledged_resolutions": ["storage"]},
        format="json",
    )
    assert response.status_code == 403
    assert response.json() == {
        "detail": "You wrote v2; a reviewer who is not its author must decide it.",
        "code": "self_review",
    }
    assert SpecVersion.objects.get(pk=mine["id"]).status == "in_review"
    assert not AuditEvent.objects.filter(
        action="spec_version.approve", object_id=str(mine["id"])
    ).exists()


def test_acknowledgements_rejection_comment_and_audit(api_for, approved, members):
    spec, v1 = approved
    editor, reviewer = api_for("editor"), api_for("reviewer")
    v2 = create_version(editor, spec["id"], supersedes=v1["id"], items=RESOLVED).json()
    editor.post(f"/api/v1/spec-versions/{v2['id']}/submit/")
    missing = reviewer.post(f"/api/v1/spec-versions/{v2['id']}/approve/", {}, format="json")
    assert missing.status_code == 400
    assert missing.json() == {
        "acknowledged_resolutions": [
            "This version resolves open question storage; the reviewer must acknowledge each by key."
        ]
    }
    no_comment = reviewer.post(f"/api/v1/spec-versions/{v2['id']}/reject/", {}, format="json")
    assert no_comment.status_code == 400
    assert no_comment.json() == {"comment": ["A rejection needs a comment: say what must change."]}
    approved_v2 = reviewer.post(
        f"/api/v1/spec-versions/{v2['id']}/approve/",
        {"acknowledged_resolutions": ["storage"], "comment": "Checked the cost model."},
        format="json",
    )
    assert approved_v2.status_code == 200
    body = approved_v2.json()
    assert (body["status"], body["reviewer"], body["acknowledged_resolutions"]) == (
        "authoritative", "reviewer-a", ["storage"]
    )  # fmt: skip
    assert (
        api_for("viewer").get(f"/api/v1/spec-versions/{v1['id']}/").json()["status"] == "superseded"
    )
    event = AuditEvent.objects.filter(action="spec_version.approve", object_id=str(v2["id"])).get()
    assert event.actor == members["reviewer"]
    assert event.data["acknowledged_resolutions"] == ["storage"]
    assert event.data["comment"] == "Checked the cost model."


def test_stale_base_is_409_naming_the_current_version(api_for, approved):
    spec, v1 = approved
    editor, admin, reviewer = api_for("editor"), api_for("admin"), api_for("reviewer")
    a = create_version(editor, spec["id"], supersedes=v1["id"], items=RESOLVED).json()
    b = create_version(admin, spec["id"], supersedes=v1["id"], items=ITEMS[:2]).json()
    editor.post(f"/api/v1/spec-versions/{a['id']}/submit/")
    admin.post(f"/api/v1/spec-versions/{b['id']}/submit/")
    reviewer.post(
        f"/api/v1/spec-versions/{a['id']}/approve/",
        {"acknowledged_resolutions": ["storage"]},
        format="json",
    )
    response = reviewer.post(
        f"/api/v1/spec-versions/{b['id']}/approve/",
        {"acknowledged_resolutions": ["storage"]},
        format="json",
    )
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "stale_base"
    assert body["current_version"] == {"id": a["id"], "number": 2, "fingerprint": a["fingerprint"]}
    assert "v2 (sha256:" in body["detail"] and "is now authoritative" in body["detail"]
    late = create_version(editor, spec["id"], supersedes=v1["id"])
    assert late.status_code == 409 and late.json()["current_version"]["id"] == a["id"]
    again = reviewer.post(
        f"/api/v1/spec-versions/{a['id']}/approve/", {"acknowledged_resolutions": []}, format="json"
    )
    assert again.status_code == 409
    assert again.json()["detail"].startswith("v2 was already approved by reviewer-a")


def test_wrong_spec_base_is_a_field_error(api_for, approved):
    _spec, v1 = approved
    api = api_for("editor")
    other = create_spec(api, slug="other", title="Other")
    response = create_version(api, other["id"], supersedes=v1["id"])
    assert response.status_code == 400
    assert response.json() == {"supersedes": [f'Invalid pk "{v1["id"]}" - object does not exist.']}


def test_drafts_are_editable_and_submitted_versions_are_not(api_for, approved):
    spec, v1 = approved
    api = api_for("editor")
    draft = create_version(api, spec["id"], supersedes=v1["id"]).json()
    updated = api.put(
        f"/api/v1/spec-versions/{draft['id']}/",
        {"note": "resolves storage", "items": RESOLVED},
        format="json",
    )
    assert updated.status_code == 200
    assert updated.json()["fingerprint"] == fingerprint(resolved(BASE_ITEMS))
    assert api.post(f"/api/v1/spec-versions/{draft['id']}/submit/").json()["status"] == "in_review"
    frozen = api.put(f"/api/v1/spec-versions/{draft['id']}/", {"items": ITEMS}, format="json")
    assert frozen.status_code == 409 and "immutable" in frozen.json()["detail"]
    assert api.delete(f"/api/v1/spec-versions/{draft['id']}/").status_code == 409
    other = create_version(api, spec["id"], supersedes=v1["id"]).json()
    assert api.delete(f"/api/v1/spec-versions/{other['id']}/").status_code == 204
    assert not SpecVersion.objects.filter(pk=other["id"]).exists()


def test_diff_lists_keys_per_category(api_for, approved):
    spec, v1 = approved
    api = api_for("editor")
    items = [
        {**ITEMS[0], "text": "The public API stays backward compatible until 2027."},
        {"key": "new-one", "kind": "definition", "text": "New."},
        RESOLVED[2],
    ]
    v2 = create_version(api, spec["id"], supersedes=v1["id"], items=items).json()
    diff = api.get(f"/api/v1/spec-versions/{v2['id']}/diff/").json()
    assert diff["version"] == v2["id"] and diff["against"] == v1["id"]
    assert diff["retained"] == [] and diff["omitted"] == ["retention"]
    assert diff["added"] == ["new-one"] and diff["resolved"] == ["storage"]
    assert diff["marked_unresolved"] == []
    assert [c["key"] for c in diff["changed"]] == ["api-compat"]
    assert diff["changed"][0]["before"]["text"] == "The public API stays backward compatible."
    assert diff["changed"][0]["after"]["text"].endswith("until 2027.")
    reverse = api.get(f"/api/v1/spec-versions/{v1['id']}/diff/?against={v2['id']}").json()
    assert reverse["added"] == ["retention"] and reverse["omitted"] == ["new-one"]
    assert reverse["marked_unresolved"] == ["storage"]
    first = api.get(f"/api/v1/spec-versions/{v1['id']}/diff/").json()
    assert first["against"] is None and first["added"] == ["api-compat", "retention", "storage"]
    assert api.get(f"/api/v1/spec-versions/{v2['id']}/diff/?against=999999").status_code == 404
    assert api.get(f"/api/v1/spec-versions/{v2['id']}/diff/?against=abc").status_code == 400


def test_markdown_export_round_trips_through_the_import_endpoint(api_for, approved):
    spec, v1 = approved
    api = api_for("editor")
    markdown = api.get(f"/api/v1/spec-versions/{v1['id']}/export/?format=md")
    assert markdown.status_code == 200
    assert markdown["Content-Type"].startswith("text/markdown")
    assert markdown["Content-Disposition"] == 'attachment; filename="payments-v1.md"'
    text = markdown.content.decode()
    assert f"> Fingerprint: sha256:{v1['fingerprint']}" in text
    imported = api.post(
        f"/api/v1/specs/{spec['id']}/import/",
        {"markdown": text, "supersedes": v1["id"], "note": "round trip"},
        format="json",
    )
    assert imported.status_code == 201
    body = imported.json()
    assert body["fingerprint"] == v1["fingerprint"]
    assert body["import"] == {
        "declared_fingerprint": v1["fingerprint"],
        "matches_declared_fingerprint": True,
        "notices": [],
    }
    assert body["items"] == api.get(f"/api/v1/spec-versions/{v1['id']}/").json()["items"]
    as_json = api.get(f"/api/v1/spec-versions/{v1['id']}/export/?format=json").json()
    assert as_json["fingerprint"] == f"sha256:{v1['fingerprint']}"
    assert [i["key"] for i in as_json["items"]] == ["api-compat", "retention", "storage"]
    bad_format = api.get(f"/api/v1/spec-versions/{v1['id']}/export/?format=xml")
    assert bad_format.status_code == 400
    assert bad_format.json() == {"format": ["Use one of: json, md."]}
    broken = api.post(
        f"/api/v1/specs/{spec['id']}/import/",
        {"markdown": "## Requirements\n- [x] ok\n  - Wrong: label\n", "supersedes": v1["id"]},
        format="json",
    )
    assert broken.status_code == 400
    assert broken.json()["markdown"][0].startswith("line 3: a nested bullet here must be")


def test_other_workspace_objects_are_404(
    api_for, approved, other_workspace, outsider, make_package, workspace
):
    spec, v1 = approved
    package = make_package(SpecVersion.objects.get(pk=v1["id"]))
    own = api_for("admin")
    issued = api_token_create(workspace=other_workspace, user=outsider)
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    for path in [
        f"/api/v1/specs/{spec['id']}/",
        f"/api/v1/specs/{spec['id']}/versions/",
        f"/api/v1/spec-versions/{v1['id']}/",
        f"/api/v1/spec-versions/{v1['id']}/diff/",
        f"/api/v1/spec-versions/{v1['id']}/export/?format=md",
        f"/api/v1/restart-packages/{package.pk}/",
        f"/api/v1/restart-packages/{package.pk}/export/?format=json",
        f"/api/v1/restart-packages/{package.pk}/verifications/0/output/",
    ]:
        assert stranger.get(path).status_code == 404, path
        assert own.get(path).status_code == 200, path
    for path in [
        f"/api/v1/spec-versions/{v1['id']}/approve/",
        f"/api/v1/spec-versions/{v1['id']}/submit/",
    ]:
        assert stranger.post(path, {}, format="json").status_code == 404
    assert stranger.get("/api/v1/specs/").json()["results"] == []
    assert stranger.get("/api/v1/restart-packages/").json()["results"] == []


# --- restart packages ----------------------------------------------------------

OUTPUT = (
    "collected 3 items\n\ntests/test_refunds.py F..\nE   assert 409 == 200\n1 failed, 2 passed\n"
)


def package_body(version_id, **overrides):
    body = {
        "title": "Restart refunds",
        "spec_version": version_id,
        "handoff": {
            "repository": {
                "remote": "git@example.org:team/pay.git",
                "branch": "fix/retry",
                "commit": "ABCDEF1234567",
            },
            "completed_changes": ["Idempotency keys on POST /refunds"],
            "changed_files": ["payments/api.py"],
            "current_failures": ["test_refund_idempotent: 409 != 200"],
            "verifications": [
                {
                    "command": "pytest -q",
                    "exit_status": 1,
                    "commit": "abcdef1234567",
                    "output": OUTPUT,
                },
                {"command": "ruff check", "exit_status": 0, "commit": "0000000aaaa", "output": ""},
            ],
            "discrepancies": [
                {
                    "claim": "refunds.py migrated",
                    "source": "summary",
                    "repository_state": "still v1 client",
                }
            ],
        },
        "instruction": {
            "authoritative_sources": ["Spec payments v1"],
            "next_action": "Fix the 409.",
        },
        "indicators": ["superseded-assumption", {"slug": "other", "note": "Loops on lint"}],
        "trace_session": None,
    }
    body.update(overrides)
    return body


def test_package_export_contains_everything_that_was_put_in(api_for, approved, workspace):
    _spec, v1 = approved
    session = Session.objects.create(
        workspace=workspace, harness="codex", external_id="rollout-9", title="refunds"
    )
    api = api_for("editor")
    response = api.post(
        "/api/v1/restart-packages/", package_body(v1["id"], trace_session=session.pk), format="json"
    )
    assert response.status_code == 201, response.json()
    created = response.json()
    exported = api.get(f"/api/v1/restart-packages/{created['id']}/export/?format=json")
    assert (
        exported["Content-Disposition"]
        == f'attachment; filename="restart-package-{created["id"]}.json"'
    )
    data = exported.json()
    assert data == created
    assert data["format"] == "context-governance/restart-package@1"
    assert data["warning"] is None
    assert data["spec"]["fingerprint"] == f"sha256:{v1['fingerprint']}"
    assert data["spec"]["items"] == [item.as_dict() for item in BASE_ITEMS]
    assert (data["spec"]["version"], data["spec"]["status"], data["spec"]["superseded"]) == (
        1,
        "authoritative",
        False,
    )
    handoff = data["handoff"]
    assert handoff["repository"] == {
        "commit": "abcdef1234567",
        "remote": "git@example.org:team/pay.git",
        "branch": "fix/retry",
    }
    assert handoff["completed_changes"] == ["Idempotency keys on POST /refunds"]
    assert handoff["changed_files"] == ["payments/api.py"]
    assert handoff["current_failures"] == ["test_refund_idempotent: 409 != 200"]
    first, second = handoff["verifications"]
    assert (
        first["command"],
        first["exit_status"],
        first["commit"],
        first["matches_handoff_commit"],
    ) == ("pytest -q", 1, "abcdef1234567", True)
    assert second["matches_handoff_commit"] is False
    assert first["output"]["sha256"] == hashlib.sha256(OUTPUT.encode()).hexdigest()
    assert (first["output"]["bytes"], first["output"]["lines"]) == (len(OUTPUT.encode()), 5)
    assert first["output"]["tail"] == OUTPUT.rstrip("\n")
    assert "content" not in first["output"]
    assert handoff["discrepancies"] == [
        {
            "claim": "refunds.py migrated",
            "source": "summary",
            "repository_state": "still v1 client",
            "governs": "repository",
        }
    ]
    assert data["instruction"] == {
        "authoritative_sources": ["Spec payments v1"],
        "next_action": "Fix the 409.",
    }
    assert data["indicators"] == [
        {
            "slug": "superseded-assumption",
            "label": "Explains failures with a superseded assumption",
            "note": "",
        },
        {"slug": "other", "label": "Other", "note": "Loops on lint"},
    ]
    assert data["trace_session"]["id"] == session.pk
    raw = api.get(first["output"]["url"])
    assert raw.status_code == 200 and raw.content == OUTPUT.encode()
    assert raw["X-Content-SHA256"] == first["output"]["sha256"]
    inline = api.get(
        f"/api/v1/restart-packages/{created['id']}/export/?format=json&inline_output=true"
    ).json()
    assert inline["handoff"]["verifications"][0]["output"]["content"] == OUTPUT
    markdown = api.get(
        f"/api/v1/restart-packages/{created['id']}/export/?format=md"
    ).content.decode()
    for expected in [
        "# Restart package: Restart refunds",
        f"Fingerprint: sha256:{v1['fingerprint']}",
        "- [api-compat] The public API stays backward compatible.",
        "- [storage] (unresolved) Where does raw tool output live?",
        "- Commit: `abcdef1234567`",
        "- Idempotency keys on POST /refunds",
        "- `payments/api.py`",
        "- test_refund_idempotent: 409 != 200",
        "1. `pytest -q` exited 1; ran against `abcdef1234567`.",
        "2. `ruff check` exited 0; ran against `0000000aaaa` (**not** the handoff commit `abcdef1234567`).",
        f"sha256:{first['output']['sha256']}",
        "E   assert 409 == 200",
        "- Claim (claimed by summary): refunds.py migrated",
        "  Repository: still v1 client",
        "**Next action:** Fix the 409.",
        "- Spec payments v1",
        "- Explains failures with a superseded assumption",
        "- Other: Loops on lint",
        "restarts trace session refunds",
    ]:
        assert expected in markdown, expected
    assert "SUPERSEDED" not in markdown


def test_superseded_spec_warning_in_every_export(api_for, approved):
    spec, v1 = approved
    editor, reviewer = api_for("editor"), api_for("reviewer")
    package = editor.post("/api/v1/restart-packages/", package_body(v1["id"]), format="json").json()
    v2 = create_version(editor, spec["id"], supersedes=v1["id"], items=RESOLVED).json()
    editor.post(f"/api/v1/spec-versions/{v2['id']}/submit/")
    reviewer.post(
        f"/api/v1/spec-versions/{v2['id']}/approve/",
        {"acknowledged_resolutions": ["storage"]},
        format="json",
    )
    data = editor.get(f"/api/v1/restart-packages/{package['id']}/export/?format=json").json()
    assert data["spec"]["superseded"] is True and data["spec"]["status"] == "superseded"
    assert data["spec"]["current_version"] == {
        "version_id": v2["id"], "version": 2, "fingerprint": f"sha256:{v2['fingerprint']}"
    }  # fmt: skip
    assert data["warning"].startswith("SUPERSEDED SPECIFICATION: this package pins version 1")
    markdown = editor.get(
        f"/api/v1/restart-packages/{package['id']}/export/?format=md"
    ).content.decode()
    lines = markdown.splitlines()
    assert lines[0] == "# Restart package: Restart refunds"
    assert lines[2].startswith("> **⚠ SUPERSEDED SPECIFICATION: this package pins version 1")
    assert "version 2 (sha256:" in lines[2]
    listed = editor.get("/api/v1/restart-packages/?superseded=yes").json()["results"]
    assert [p["id"] for p in listed] == [package["id"]] and listed[0]["superseded"] is True
    # A new package cannot pin the superseded version: 409 names the current one.
    stale = editor.post("/api/v1/restart-packages/", package_body(v1["id"]), format="json")
    assert stale.status_code == 409
    assert stale.json()["current_version"]["id"] == v2["id"]


def test_package_input_errors_name_the_field(api_for, approved, workspace, other_workspace):
    spec, v1 = approved
    api = api_for("editor")
    draft = create_version(api, spec["id"], supersedes=v1["id"], items=RESOLVED).json()
    not_authoritative = api.post(
        "/api/v1/restart-packages/", package_body(draft["id"]), format="json"
    )
    assert not_authoritative.status_code == 400
    assert not_authoritative.json() == {
        "spec_version": [
            "v2 of 'Payments API' is draft; a restart package pins an authoritative version."
        ]
    }
    foreign_session = Session.objects.create(
        workspace=other_workspace, harness="codex", external_id="x"
    )
    body = package_body(
        v1["id"], trace_session=foreign_session.pk, indicators=["made-up", {"slug": "other"}]
    )
    body["handoff"]["repository"]["commit"] = "not-a-sha"
    body["handoff"]["verifications"][0]["exit_status"] = "one"
    del body["handoff"]["verifications"][1]["output"]
    body["instruction"]["next_action"] = ""
    response = api.post("/api/v1/restart-packages/", body, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert errors["trace_session"] == [
        f'Invalid pk "{foreign_session.pk}" - object does not exist.'
    ]
    assert errors["handoff"]["repository"] == {
        "commit": ["Give a git commit hash: 7 to 64 hexadecimal digits."]
    }
    assert errors["handoff"]["verifications"]["0"] == {
        "exit_status": ["A valid integer is required."]
    }
    assert errors["handoff"]["verifications"]["1"] == {"output": ["This field is required."]}
    assert errors["instruction"] == {"next_action": ["This field may not be blank."]}
    assert errors["indicators"]["0"][0].startswith(
        "'made-up' is not an indicator; use one of reproposed-rejected-interface"
    )
    assert errors["indicators"]["1"] == [
        "An 'other' indicator needs a note saying what was observed."
    ]
    assert not RestartPackage.objects.exists()
    assert (
        api_for("viewer")
        .post("/api/v1/restart-packages/", package_body(v1["id"]), format="json")
        .status_code
        == 403
    )


def test_openapi_schema_documents_the_specs_endpoints(api_for):
    schema = api_for("viewer").get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in [
        "/api/v1/specs/",
        "/api/v1/specs/{id}/",
        "/api/v1/specs/{id}/versions/",
        "/api/v1/specs/{id}/import/",
        "/api/v1/spec-versions/{id}/submit/",
        "/api/v1/spec-versions/{id}/approve/",
        "/api/v1/spec-versions/{id}/reject/",
        "/api/v1/spec-versions/{id}/diff/",
        "/api/v1/spec-versions/{id}/export/",
        "/api/v1/restart-packages/",
        "/api/v1/restart-packages/{id}/export/",
    ]:
        assert path in paths, path
    approve = paths["/api/v1/spec-versions/{id}/approve/"]["post"]
    assert approve["summary"] == "Approve a version in review (reviewers; not its author)"
    assert "409" in approve["responses"]


def test_specs_sort_by_the_page_names_on_the_page_and_the_api(api_for, client_for, workspace):
    api = api_for("editor")
    for title, slug in (("Beta", "beta"), ("Alpha", "alpha"), ("Gamma", "gamma")):
        create_spec(api, title=title, slug=slug)
    titles = [s["title"] for s in api.get("/api/v1/specs/?sort=-title").json()["results"]]
    assert titles == ["Gamma", "Beta", "Alpha"]
    titles = [s["title"] for s in api.get("/api/v1/specs/?sort=title").json()["results"]]
    assert titles == ["Alpha", "Beta", "Gamma"]
    page = client_for("viewer").get(f"/w/{workspace.slug}/specs/?sort=-title").content.decode()
    assert page.index("Gamma") < page.index("Beta") < page.index("Alpha")


def test_a_dropped_settled_item_needs_acknowledging_through_the_api(api_for, approved):
    spec, v1 = approved
    editor, reviewer = api_for("editor"), api_for("reviewer")
    dropped = [item for item in RESOLVED if item["key"] != "api-compat"]
    v2 = create_version(editor, spec["id"], supersedes=v1["id"], items=dropped).json()
    editor.post(f"/api/v1/spec-versions/{v2['id']}/submit/")
    only_question = reviewer.post(
        f"/api/v1/spec-versions/{v2['id']}/approve/",
        {"acknowledged_resolutions": ["storage"]},
        format="json",
    )
    assert only_question.status_code == 400
    assert only_question.json() == {
        "acknowledged_resolutions": [
            "This version drops settled item api-compat; the reviewer must acknowledge each by key."
        ]
    }
    both = reviewer.post(
        f"/api/v1/spec-versions/{v2['id']}/approve/",
        {"acknowledged_resolutions": ["storage", "api-compat"]},
        format="json",
    )
    assert both.status_code == 200
    assert both.json()["acknowledged_resolutions"] == ["storage", "api-compat"]
