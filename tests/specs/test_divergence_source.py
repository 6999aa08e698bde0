"""A spec version can cite a first-divergence mark as a source: API, Markdown and page."""

import pytest

from governance.models import Role
from governance.services import membership_set, user_get_or_create
from specs.models import SourceKind, SpecSource
from tests.annotations.conftest import call_in, ingest_synthetic, main_run
from tests.specs.test_api import create_spec, create_version
from traces.annotations.services import divergence_mark
from traces.synthetic import CorpusParams

pytestmark = pytest.mark.django_db


def mark_in(workspace, annotator, seed):
    session = ingest_synthetic(
        workspace, CorpusParams(sessions=1, steps_per_session=(30, 30), seed=seed), f"s{seed}"
    )[0]
    call = call_in(main_run(session), 5)
    return divergence_mark(
        session=session,
        annotator=annotator,
        call_index=call.session_index,
        failure_class="forgotten_constraint",
        confidence="high",
        note="ignored the retention rule",
    )


@pytest.fixture
def marks(workspace, other_workspace, members):
    own = mark_in(workspace, members["editor"], 31)
    stranger = user_get_or_create(username="other-editor", password="x-Passw0rd-long")
    membership_set(workspace=other_workspace, user=stranger, role=Role.EDITOR)
    foreign = mark_in(other_workspace, stranger, 32)
    return own, foreign


def test_api_links_a_divergence_of_this_workspace_only(api_for, marks):
    own, foreign = marks
    api = api_for("editor")
    spec = create_spec(api)
    bad = create_version(
        api,
        spec["id"],
        sources=[{"divergence": foreign.pk}, {"divergence": own.pk, "run": own.run_id}],
    )
    assert bad.status_code == 400
    assert bad.json()["sources"]["0"] == {
        "divergence": [f'Invalid pk "{foreign.pk}" - object does not exist.']
    }
    assert bad.json()["sources"]["1"] == {
        "non_field_errors": [
            "Give exactly one of trace_session, run, divergence or url for each source."
        ]
    }
    good = create_version(api, spec["id"], sources=[{"divergence": own.pk, "label": "why v2"}])
    assert good.status_code == 201, good.json()
    assert [(s["kind"], s["divergence"], s["label"]) for s in good.json()["sources"]] == [
        ("divergence", own.pk, "why v2")
    ]
    markdown = api.get(f"/api/v1/spec-versions/{good.json()['id']}/export/?format=md")
    assert f"- trace-divergence:{own.pk} — why v2\n" in markdown.content.decode()


def test_markdown_import_resolves_divergence_tokens_in_the_workspace(api_for, marks):
    own, foreign = marks
    api = api_for("editor")
    spec = create_spec(api)
    text = "# Payments\n\n## Requirements\n- [r1] Keep raw uploads.\n\n## Sources\n"
    imported = api.post(
        f"/api/v1/specs/{spec['id']}/import/",
        {"markdown": text + f"- trace-divergence:{own.pk} — where it forgot\n", "supersedes": None},
        format="json",
    )
    assert imported.status_code == 201, imported.json()
    source = SpecSource.objects.get(version_id=imported.json()["id"])
    assert (source.kind, source.divergence_id, source.label) == (
        SourceKind.DIVERGENCE,
        own.pk,
        "where it forgot",
    )
    refused = api.post(
        f"/api/v1/specs/{spec['id']}/import/",
        {"markdown": text + f"- trace-divergence:{foreign.pk}\n", "supersedes": None},
        format="json",
    )
    assert refused.status_code == 400
    assert refused.json() == {
        "sources": [f"trace-divergence:{foreign.pk}: no such divergence mark in this workspace."]
    }


def test_version_page_links_the_mark_in_the_viewer(api_for, client_for, workspace, marks):
    own, _ = marks
    api = api_for("editor")
    spec = create_spec(api)
    version = create_version(api, spec["id"], sources=[{"divergence": own.pk}]).json()
    page = client_for("viewer").get(f"/w/{workspace.slug}/specs/versions/{version['id']}/")
    html = page.content.decode()
    viewer = (
        f"/w/{workspace.slug}/annotations/sessions/{own.session_id}/runs/{own.run_id}/"
        f"?at={own.call_index}#step-{own.call_index}"
    )
    assert f'href="{viewer}"' in html
    assert f"Forgotten constraint at call {own.call_index}" in html
    # The viewer shows the token to cite.
    run_page = client_for("editor").get(
        f"/w/{workspace.slug}/annotations/sessions/{own.session_id}/runs/{own.run_id}/"
    )
    assert f"trace-divergence:{own.pk}" in run_page.content.decode()


def test_labels_of_trace_sources_survive_export_and_import(api_for, marks):
    own, _ = marks
    api = api_for("editor")
    spec = create_spec(api)
    version = create_version(
        api,
        spec["id"],
        sources=[
            {"run": own.run_id, "label": "the run that drifted"},
            {"divergence": own.pk, "label": "where it forgot"},
            {"trace_session": own.session_id},
        ],
    ).json()
    text = api.get(f"/api/v1/spec-versions/{version['id']}/export/?format=md").content.decode()
    assert f"- trace-run:{own.run_id} — the run that drifted\n" in text
    assert f"- trace-divergence:{own.pk} — where it forgot\n" in text
    # A source given no label exports none (its stored name is only a fallback).
    assert f"- trace-session:{own.session_id}\n" in text
    imported = api.post(
        f"/api/v1/specs/{spec['id']}/import/",
        {"markdown": text, "supersedes": None, "note": "round trip"},
        format="json",
    )
    assert imported.status_code == 201, imported.json()
    labels = [(s["kind"], s["label"]) for s in imported.json()["sources"]]
    assert labels[:2] == [("trace_run", "the run that drifted"), ("divergence", "where it forgot")]
