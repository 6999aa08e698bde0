"""Pages without JavaScript: lists, editor, review decisions, diff, import, builder, isolation."""

import pytest

from governance.models import AuditEvent
from specs import services
from specs.analysis.content import Item
from specs.models import RestartPackage, Spec, SpecVersion, VersionStatus
from tests.specs.conftest import BASE_ITEMS, resolved
from traces.models import Session

pytestmark = pytest.mark.django_db

W = "/w/team-a/specs"


def submitted_resolution(spec, v1, members, author="editor"):
    version = services.spec_version_create(
        spec=spec, author=members[author], supersedes=v1, items=resolved(BASE_ITEMS)
    )
    services.spec_version_submit(version=version, actor=members[author])
    return version


def test_list_empty_state_and_role_aware_actions(client_for, workspace):
    editor_page = client_for("editor").get(f"{W}/").content.decode()
    assert "No specifications yet" in editor_page
    assert "Create the first specification" in editor_page
    viewer_page = client_for("viewer").get(f"{W}/").content.decode()
    assert "An editor creates specifications" in viewer_page
    assert "New specification" not in viewer_page


def test_list_filters_and_htmx_partial(client_for, authoritative, make_spec):
    authoritative()
    make_spec("low", slug="conventions", title="Conventions")
    client = client_for("viewer")
    page = client.get(f"{W}/?consequence=low").content.decode()
    assert "Conventions" in page and "Payments API" not in page
    partial = client.get(f"{W}/?q=pay", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="results">')
    assert "Payments API" in partial and "<html" not in partial


def test_create_spec_validates_inline_and_checks_role(client_for, workspace):
    client = client_for("editor")
    bad = client.post(f"{W}/new/", {"title": "", "slug": "review", "consequence": "high"})
    assert bad.status_code == 400
    assert "This field is required." in bad.content.decode()
    reserved = client.post(
        f"{W}/new/", {"title": "Review", "slug": "review", "consequence": "high"}
    )
    assert reserved.status_code == 400 and "is reserved for a page" in reserved.content.decode()
    good = client.post(
        f"{W}/new/", {"title": "Payments API", "consequence": "high", "summary": "x"}
    )
    assert good.status_code == 302 and good["Location"] == f"{W}/payments-api/"
    assert (
        client_for("viewer").post(f"{W}/new/", {"title": "X", "consequence": "low"}).status_code
        == 403
    )
    assert client_for("viewer").get(f"{W}/new/").status_code == 403
    assert Spec.objects.count() == 1


def test_spec_page_shows_the_chain_as_a_timeline(client_for, authoritative, members):
    spec, v1 = authoritative()
    v2 = submitted_resolution(spec, v1, members)
    page = client_for("viewer").get(f"{W}/payments/").content.decode()
    assert "Authoritative: <a" in page and "Chain of authority" in page and "Proposals" in page
    assert f'href="{W}/versions/{v2.pk}/"' in page
    assert "in review" in page and "Approved" in page and "reviewer-a" in page
    assert "1 open question" in page


def test_editor_without_javascript_adds_removes_and_saves(client_for, authoritative, members):
    _spec, v1 = authoritative()
    client = client_for("editor")
    form = client.get(f"{W}/payments/versions/new/").content.decode()
    assert 'name="items-2-key" value="storage"' in form
    assert f'name="supersedes" value="{v1.pk}"' in form
    post = {
        "supersedes": v1.pk,
        "note": "settle storage",
        "items-0-key": "api-compat", "items-0-kind": "requirement", "items-0-status": "settled",
        "items-0-text": "The public API stays backward compatible.",
        "items-0-rationale": "Clients pin v1 for a year.",
        "items-5-key": "", "items-5-kind": "decision", "items-5-status": "settled",
        "items-5-text": "Raw tool output lives in the S3-compatible store.",
        "items-5-alt-0-text": "PostgreSQL large objects", "items-5-alt-0-evidence": "40 MB/s",
    }  # fmt: skip
    added = client.post(f"{W}/payments/versions/new/", {**post, "add_item": "1"})
    assert added.status_code == 200
    assert 'name="items-6-key"' in added.content.decode()
    alternative = client.post(f"{W}/payments/versions/new/", {**post, "add_alternative": "5"})
    assert 'name="items-5-alt-1-text"' in alternative.content.decode()
    removed = client.post(f"{W}/payments/versions/new/", {**post, "remove_item": "5"})
    assert 'name="items-5-key"' not in removed.content.decode()
    saved = client.post(f"{W}/payments/versions/new/", {**post, "save": "1"})
    assert saved.status_code == 302
    version = SpecVersion.objects.get(number=2)
    assert saved["Location"] == f"{W}/versions/{version.pk}/"
    items = version.as_items()
    assert [(i.key, i.kind) for i in items] == [
        ("api-compat", "requirement"),
        ("raw-tool-output-lives", "decision"),
    ]
    assert items[1].alternatives[0].evidence == "40 MB/s"
    assert version.supersedes == v1 and version.note == "settle storage"


def test_editor_errors_are_inline_and_nothing_is_saved(client_for, authoritative):
    authoritative()
    response = client_for("editor").post(
        f"{W}/payments/versions/new/",
        {
            "items-0-key": "same", "items-0-kind": "requirement", "items-0-text": "One.",
            "items-1-key": "SAME", "items-1-kind": "requirement", "items-1-text": "Two.",
            "items-2-key": "x", "items-2-kind": "requirement", "items-2-text": "",
            "sources": "ftp://nowhere",
            "save": "1",
        },
    )  # fmt: skip
    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was saved." in page
    assert "Key &#x27;SAME&#x27; is already used by item 1" in page
    assert "The item needs text." in page
    assert "Line 1: &#x27;ftp://nowhere&#x27; is not a source" in page
    assert 'value="SAME"' in page  # what was typed is kept
    assert SpecVersion.objects.count() == 1


def test_editor_row_fragments_for_htmx(client_for, workspace):
    client = client_for("editor")
    item = client.get(f"{W}/versions/row/?item=7", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="item-7"' in item and 'name="items-7-text"' in item
    assert 'hx-swap-oob="true"' in item and "?item=8" in item
    assert "?item=7&amp;alternative=0" in item
    alternative = client.get(
        f"{W}/versions/row/?item=7&alternative=2", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'name="items-7-alt-2-evidence"' in alternative and "alternative=3" in alternative
    assert client.get(f"{W}/versions/row/?item=x").status_code == 400
    assert client_for("viewer").get(f"{W}/versions/row/?item=1").status_code == 403
    key = client.get(f"{W}/suggest-key/?text=Keep raw uploads 30 days&taken=keep-raw-uploads-30")
    assert key.json() == {"key": "keep-raw-uploads-30-2"}


def test_draft_edit_submit_and_immutability(client_for, authoritative, members):
    spec, v1 = authoritative()
    client = client_for("editor")
    draft = services.spec_version_create(
        spec=spec, author=members["editor"], supersedes=v1, items=resolved(BASE_ITEMS)
    )
    edit = client.get(f"{W}/versions/{draft.pk}/edit/").content.decode()
    assert 'name="items-0-key" value="api-compat"' in edit
    page = client.get(f"{W}/versions/{draft.pk}/").content.decode()
    assert "Submit for review" in page and "the reviewer will acknowledge each" in page
    assert client.post(f"{W}/versions/{draft.pk}/submit/").status_code == 302
    draft.refresh_from_db()
    assert draft.status == VersionStatus.IN_REVIEW
    frozen = client.get(f"{W}/versions/{draft.pk}/edit/")
    assert frozen.status_code == 302 and frozen["Location"] == f"{W}/versions/{draft.pk}/"
    late = client.post(
        f"{W}/versions/{draft.pk}/edit/",
        {"items-0-key": "a", "items-0-kind": "requirement", "items-0-text": "t"},
    )
    assert late.status_code == 409 and "can no longer change" in late.content.decode()


def test_reviewer_sees_resolutions_first_and_must_acknowledge(client_for, authoritative, members):
    spec, v1 = authoritative()
    v2 = submitted_resolution(spec, v1, members)
    client = client_for("reviewer")
    page = client.get(f"{W}/versions/{v2.pk}/").content.decode()
    review = page.index('id="review"')
    assert page.index("This version resolves 1 open question", review) < page.index(
        "Approve v2", review
    )
    assert 'name="acknowledged" value="storage" form="approve-form"' in page
    refused = client.post(f"{W}/versions/{v2.pk}/approve/", {})
    assert refused.status_code == 400
    assert (
        "This version resolves open question storage; the reviewer must acknowledge each by key."
        in refused.content.decode()
    )
    v2.refresh_from_db()
    assert v2.status == VersionStatus.IN_REVIEW
    done = client.post(f"{W}/versions/{v2.pk}/approve/", {"acknowledged": ["storage"]})
    assert done.status_code == 302
    v2.refresh_from_db()
    assert v2.status == VersionStatus.AUTHORITATIVE and v2.reviewer == members["reviewer"]
    assert AuditEvent.objects.filter(
        action="spec_version.approve", actor=members["reviewer"]
    ).exists()


def test_decisions_are_checked_on_the_server(client_for, authoritative, members):
    spec, v1 = authoritative()
    mine = submitted_resolution(spec, v1, members, author="reviewer")
    assert (
        client_for("editor")
        .post(f"{W}/versions/{mine.pk}/approve/", {"acknowledged": ["storage"]})
        .status_code
        == 403
    )
    assert (
        client_for("viewer").post(f"{W}/versions/{mine.pk}/reject/", {"comment": "no"}).status_code
        == 403
    )
    self_review = client_for("reviewer").post(
        f"{W}/versions/{mine.pk}/approve/", {"acknowledged": ["storage"]}
    )
    assert self_review.status_code == 403
    page = client_for("reviewer").get(f"{W}/versions/{mine.pk}/").content.decode()
    assert "You wrote this version" in page and "Approve v2" not in page
    no_comment = client_for("admin").post(f"{W}/versions/{mine.pk}/reject/", {"comment": " "})
    assert no_comment.status_code == 400
    assert "A rejection needs a comment: say what must change." in no_comment.content.decode()
    rejected = client_for("admin").post(
        f"{W}/versions/{mine.pk}/reject/", {"comment": "Keep it open."}
    )
    assert rejected.status_code == 302
    mine.refresh_from_db()
    assert (mine.status, mine.review_comment) == ("rejected", "Keep it open.")


def test_stale_base_on_the_page_is_409_with_the_current_version(client_for, authoritative, members):
    spec, v1 = authoritative()
    a = submitted_resolution(spec, v1, members)
    b = services.spec_version_create(
        spec=spec,
        author=members["admin"],
        supersedes=v1,
        items=[*BASE_ITEMS, Item("b", "requirement", "B")],
    )
    services.spec_version_submit(version=b, actor=members["admin"])
    services.spec_version_approve(
        version=a, reviewer=members["reviewer"], acknowledged_resolutions=["storage"]
    )
    page = client_for("reviewer").get(f"{W}/versions/{b.pk}/").content.decode()
    assert "Stale base." in page and "v2</a> is now authoritative" in page
    response = client_for("reviewer").post(f"{W}/versions/{b.pk}/approve/", {})
    assert response.status_code == 409
    assert "v2 (sha256:" in response.content.decode()


def test_review_queue(client_for, authoritative, members):
    spec, v1 = authoritative()
    v2 = submitted_resolution(spec, v1, members)
    assert client_for("editor").get(f"{W}/review/").status_code == 403
    page = client_for("reviewer").get(f"{W}/review/").content.decode()
    assert (
        "Payments API v2" in page
        and "It resolves 1 open question. Acknowledge each to approve." in page
    )
    assert f'form="approve-{v2.pk}"' in page and "Rejection comment" in page
    approve = client_for("reviewer").post(
        f"{W}/versions/{v2.pk}/approve/", {"acknowledged": ["storage"], "next": f"{W}/review/"}
    )
    assert approve["Location"] == f"{W}/review/"
    assert "Nothing waits for review" in client_for("reviewer").get(f"{W}/review/").content.decode()


def test_diff_page_colours_categories_and_hides_retained_by_default(
    client_for, authoritative, members
):
    spec, v1 = authoritative()
    v2 = services.spec_version_create(
        spec=spec,
        author=members["editor"],
        supersedes=v1,
        items=[Item("api-compat", "requirement", "The public API stays backward compatible until 2027.", rationale="Clients pin v1 for a year."),
               BASE_ITEMS[1], Item("new", "definition", "New.")],
    )  # fmt: skip
    client = client_for("viewer")
    page = client.get(f"{W}/versions/{v2.pk}/diff/").content.decode()
    for category in ("changed", "added", "resolved"):
        assert f'class="diff-row diff-{category}"' in page
    assert 'class="diff-row diff-retained"' not in page
    assert "compatible<ins> until 2027</ins>." in page
    assert "Dropping an open question counts as resolving it." in page
    everything = client.get(f"{W}/versions/{v2.pk}/diff/?show=all").content.decode()
    assert 'class="diff-row diff-retained"' in everything
    partial = client.get(
        f"{W}/versions/{v2.pk}/diff/?show=added", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert partial.lstrip().startswith('<div id="comparison">') and "<html" not in partial
    assert "diff-row diff-added" in partial and "diff-row diff-changed" not in partial


def test_import_page_reports_lines_and_creates_a_draft(client_for, authoritative):
    _spec, v1 = authoritative()
    client = client_for("editor")
    bad = client.post(
        f"{W}/payments/import/", {"markdown": "intro\n## Requirements\n- [a] ok\n  - Foo: x\n"}
    )
    assert bad.status_code == 400
    page = bad.content.decode()
    assert "line 1: text before the first section" in page and "line 4: a nested bullet" in page
    from specs.selectors import version_markdown

    good = client.post(
        f"{W}/payments/import/", {"markdown": version_markdown(version=v1), "note": "copy"}
    )
    assert good.status_code == 302
    copy = SpecVersion.objects.get(number=2)
    assert copy.fingerprint == v1.fingerprint and copy.supersedes == v1
    follow = client.get(good["Location"]).content.decode()
    assert "unchanged since its export" in follow


def test_exports_download(client_for, authoritative):
    _spec, v1 = authoritative()
    client = client_for("viewer")
    markdown = client.get(f"{W}/versions/{v1.pk}/export/md/")
    assert markdown["Content-Disposition"] == 'attachment; filename="payments-v1.md"'
    assert markdown.content.decode().startswith("# Payments API\n")
    assert client.get(f"{W}/versions/{v1.pk}/export/json/").json()["number"] == 1
    assert client.get(f"{W}/versions/{v1.pk}/export/pdf/").status_code == 404


def test_builder_prefill_from_query_parameters(
    client_for, authoritative, workspace, other_workspace
):
    _spec, v1 = authoritative()
    session = Session.objects.create(
        workspace=workspace,
        harness="claude-code",
        external_id="abc",
        git_branch="fix/retry",
        title="Refunds loop",
    )
    foreign = Session.objects.create(
        workspace=other_workspace, harness="claude-code", external_id="zzz"
    )
    client = client_for("editor")
    page = client.get(
        f"{W}/restart-packages/new/?session={session.pk}&indicators=superseded-assumption,conflicting-summaries,nope&spec_version={v1.pk}"
    ).content.decode()
    assert f'<option value="{v1.pk}" selected>' in page
    assert 'name="trace_session" value="abc"' in page
    assert 'name="branch" value="fix/retry"' in page
    assert 'value="superseded-assumption" id="id_indicators_2" checked' in page
    assert 'value="conflicting-summaries" id="id_indicators_3" checked' in page
    assert "Unknown indicator ignored: nope." in page
    assert "Specification &#x27;Payments API&#x27; v1" in page
    other = client.get(f"{W}/restart-packages/new/?session={foreign.pk}").content.decode()
    assert f"Trace session {foreign.pk} is not in this workspace" in other
    assert client_for("viewer").get(f"{W}/restart-packages/new/").status_code == 403


def test_builder_creates_a_package_and_reports_errors_inline(client_for, authoritative, workspace):
    _spec, v1 = authoritative()
    client = client_for("editor")
    post = {
        "spec_version": v1.pk, "commit": "abcdef1", "branch": "main", "next_action": "Fix it.",
        "changed_files": "a.py\n\nb.py\n", "indicators": ["other"], "other_indicator": "",
        "verifications-0-command": "pytest", "verifications-0-exit_status": "one",
        "verifications-0-commit": "xyz", "verifications-0-output": "1 failed\n",
        "discrepancies-0-claim": "done", "discrepancies-0-repository_state": "",
    }  # fmt: skip
    bad = client.post(f"{W}/restart-packages/new/", post)
    assert bad.status_code == 400
    page = bad.content.decode()
    assert "Describe what you observed for &#x27;Other&#x27;." in page
    assert "Give the exit status as a whole number" in page
    assert "The commit the command ran against." in page
    assert "What does the repository show? It wins." in page
    assert 'value="pytest"' in page and "1 failed" in page
    post.update(
        {
            "other_indicator": "loops",
            "verifications-0-exit_status": "1",
            "verifications-0-commit": "abcdef1",
            "discrepancies-0-repository_state": "not done",
        }
    )
    good = client.post(f"{W}/restart-packages/new/", post)
    assert good.status_code == 302, good.content.decode()[:3000]
    package = RestartPackage.objects.get()
    assert good["Location"] == f"{W}/restart-packages/{package.pk}/"
    assert package.changed_files == ["a.py", "b.py"] and package.commit == "abcdef1"
    assert package.indicators == [{"slug": "other", "note": "loops"}]
    assert package.verifications.get().output.content == "1 failed\n"
    assert package.discrepancies == [
        {"claim": "done", "source": "", "repository_state": "not done"}
    ]


def test_package_page_warns_when_its_spec_was_superseded(
    client_for, authoritative, members, make_package
):
    spec, v1 = authoritative()
    package = make_package(v1)
    client = client_for("viewer")
    fresh = client.get(f"{W}/restart-packages/{package.pk}/").content.decode()
    assert "was superseded" not in fresh
    v2 = submitted_resolution(spec, v1, members)
    services.spec_version_approve(
        version=v2, reviewer=members["reviewer"], acknowledged_resolutions=["storage"]
    )
    page = client.get(f"{W}/restart-packages/{package.pk}/").content.decode()
    assert "The pinned specification was superseded." in page
    assert f"{W}/versions/{v2.pk}/" in page
    assert "Rebuild with v2" not in page  # viewers cannot rebuild
    editor_page = client_for("editor").get(f"{W}/restart-packages/{package.pk}/").content.decode()
    assert f"?from_package={package.pk}" in editor_page
    rebuild = (
        client_for("editor")
        .get(f"{W}/restart-packages/new/?from_package={package.pk}")
        .content.decode()
    )
    assert (
        f'<option value="{v2.pk}" selected>' in rebuild
        and "pytest -q tests/test_refunds.py" in rebuild
    )
    listing = client.get(f"{W}/restart-packages/").content.decode()
    assert "spec superseded" in listing
    markdown = client.get(f"{W}/restart-packages/{package.pk}/export/md/").content.decode()
    assert "**⚠ SUPERSEDED SPECIFICATION" in markdown
    raw = client.get(f"{W}/restart-packages/{package.pk}/verifications/0/output/")
    assert raw.content.decode().endswith("FAILED tests/test_refunds.py::test_refund_idempotent\n")


def test_other_workspace_pages_are_404(
    client_for, authoritative, make_package, other_workspace, outsider
):
    from django.test import Client

    _spec, v1 = authoritative()
    package = make_package(v1)
    stranger = Client()
    stranger.force_login(outsider)
    own = client_for("viewer")
    paths = [
        f"{W}/payments/",
        f"{W}/versions/{v1.pk}/",
        f"{W}/versions/{v1.pk}/diff/",
        f"{W}/versions/{v1.pk}/export/md/",
        f"{W}/restart-packages/{package.pk}/",
        f"{W}/restart-packages/{package.pk}/export/json/",
    ]
    for path in paths:
        assert own.get(path).status_code == 200, path
        assert stranger.get(path).status_code == 404, path
        # Their own workspace URL with our ids: still not found.
        assert stranger.get(path.replace("/w/team-a/", "/w/team-b/")).status_code == 404, path


def test_user_text_is_escaped_everywhere(client_for, make_spec, members):
    spec = make_spec(title="<script>alert('t')</script>", slug="xss")
    evil = '<img src=x onerror="alert(1)">'
    version = services.spec_version_create(
        spec=spec,
        author=members["editor"],
        supersedes=None,
        items=[Item("x", "requirement", evil, rationale=evil)],
        note=evil,
    )
    client = client_for("viewer")
    for path in [
        f"{W}/",
        f"{W}/xss/",
        f"{W}/versions/{version.pk}/",
        f"{W}/versions/{version.pk}/diff/",
    ]:
        page = client.get(path).content.decode()
        assert "<script>alert(" not in page and "<img src=x" not in page, path
    assert (
        "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
        in client.get(f"{W}/versions/{version.pk}/").content.decode()
    )


def test_dashboard_card(client_for, workspace, authoritative):
    empty = client_for("editor").get("/w/team-a/").content.decode()
    assert "No specifications yet." in empty and "Create a specification" in empty
    authoritative()
    page = client_for("editor").get("/w/team-a/").content.decode()
    assert "Waiting for review" in page and "Restart packages" in page


def test_decision_redirects_stay_inside_the_workspace(client_for, authoritative, members):
    spec, v1 = authoritative()
    v2 = submitted_resolution(spec, v1, members)
    response = client_for("reviewer").post(
        f"{W}/versions/{v2.pk}/reject/", {"comment": "no", "next": "https://evil.example/"}
    )
    assert response["Location"] == f"{W}/versions/{v2.pk}/"
