"""The hook policy end to end: `context-governance hook …` as Claude Code runs it (a subprocess
fed the hook's stdin), against the live test server, printing the server's answer in Claude
Code's hook-output format (HARNESS_TELEMETRY.md §2)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

import numfmt
from governance.models import AuditEvent
from tests.cli.conftest import MODEL_ID, write_transcript
from tests.specs.conftest import authoritative, make_spec  # noqa: F401 (fixtures)
from traces.models import Harness, HookPolicy, Session
from traces.services import hook_policy_update

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "0f1e2d3c-aaaa-bbbb-cccc-000000000003"


def weakest_ecl(limit) -> int:
    justification = limit.justification
    family = next(
        f for f in justification["families"] if f["family"] == justification["weakest_family"]
    )
    return family["ecl_tokens"]


def hook_payload(event: str, transcript, **keys) -> dict:
    return {
        "session_id": SESSION,
        "prompt_id": "p-1",
        "transcript_path": str(transcript),
        "cwd": "/home/dev/payments",
        "hook_event_name": event,
        **keys,
    }


@pytest.fixture
def env(live_server, editor_token):
    return {
        "CONTEXT_GOVERNANCE_URL": live_server.url,
        "CONTEXT_GOVERNANCE_TOKEN": editor_token.plaintext,
    }


@pytest.fixture
def spec_v1(authoritative):  # noqa: F811
    return authoritative()


def set_policy(workspace, members, action, context=True, spec=""):
    hook_policy_update(
        workspace=workspace,
        actor=members["admin"],
        pre_compact_action=action,
        session_start_context=context,
        spec_slug=spec,
    )


def run_json(cli, name, payload, env) -> dict | None:
    result = cli("hook", name, stdin=json.dumps(payload), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b"", result.stderr
    out = result.stdout.decode()
    return json.loads(out) if out else None


def test_suggest_above_the_ecl_then_repeat_it_after_the_compaction(
    cli, env, tmp_path, approved_limit, spec_v1, workspace, members, live_server
):
    spec, version = spec_v1
    ecl = weakest_ecl(approved_limit)
    session = Session.objects.create(
        workspace=workspace, harness=Harness.CLAUDE_CODE, external_id=SESSION
    )
    transcript = write_transcript(tmp_path / "t.jsonl", context=ecl + 20_000)
    assert not HookPolicy.objects.exists()  # the defaults: suggest, context on

    start = run_json(cli, "session-start", hook_payload(
        "SessionStart", transcript, source="startup", model=MODEL_ID), env)  # fmt: skip
    assert set(start) == {"hookSpecificOutput"}
    output = start["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    context = output["additionalContext"]
    key = f"{spec.slug} v{version.number} (sha256:{version.fingerprint[:12]})"
    assert (
        f"the approved operating limit for {MODEL_ID} is "
        f"{numfmt.tokens(approved_limit.max_context_tokens)} tokens of context" in context
    )
    assert f"qualified effective context length {numfmt.tokens(ecl)}" in context
    assert f"The authoritative specification is {key}" in context

    pre = run_json(cli, "pre-compact", hook_payload(
        "PreCompact", transcript, trigger="auto", custom_instructions=""), env)  # fmt: skip
    assert set(pre) == {"systemMessage"}
    message = pre["systemMessage"]
    assert f"holds {numfmt.tokens(ecl + 20_000)} tokens" in message
    assert f"above the qualified ECL of {numfmt.tokens(ecl)} for {MODEL_ID}" in message
    assert f"restart from the authoritative specification {key} instead" in message
    url = message.rsplit(" ", 1)[-1]
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == live_server.url
    assert parts.path == f"/w/{workspace.slug}/specs/restart-packages/new/"
    assert parse_qs(parts.query) == {
        "spec_version": [str(version.pk)],
        "session": [str(session.pk)],
    }

    # The compaction happened (suggest does not block): the SessionStart that follows shows it.
    after = run_json(cli, "session-start", hook_payload(
        "SessionStart", transcript, source="compact"), env)  # fmt: skip
    assert after["systemMessage"] == message
    assert after["hookSpecificOutput"]["additionalContext"].endswith(message)
    assert context in after["hookSpecificOutput"]["additionalContext"]


def test_the_link_opens_a_package_prefilled_for_the_session(
    cli, env, tmp_path, approved_limit, spec_v1, workspace, members, client_for
):
    _spec, version = spec_v1
    Session.objects.create(
        workspace=workspace, harness=Harness.CLAUDE_CODE, external_id=SESSION, git_branch="fix/x"
    )
    transcript = write_transcript(tmp_path / "t.jsonl", context=weakest_ecl(approved_limit) + 1)
    pre = run_json(cli, "pre-compact", hook_payload(
        "PreCompact", transcript, trigger="auto", custom_instructions=""), env)  # fmt: skip
    url = urlsplit(pre["systemMessage"].rsplit(" ", 1)[-1])
    page = client_for("editor").get(f"{url.path}?{url.query}")
    assert page.status_code == 200
    form = page.context["form"]
    assert form.initial["spec_version"] == str(version.pk)
    assert form.initial["trace_session"] == SESSION
    assert form.initial["branch"] == "fix/x"
    html = page.content.decode()
    assert f'value="{SESSION}"' in html


def test_block_refuses_an_automatic_compaction_only(
    cli, env, tmp_path, approved_limit, spec_v1, workspace, members
):
    set_policy(workspace, members, "block", context=False)
    ecl = weakest_ecl(approved_limit)
    transcript = write_transcript(tmp_path / "t.jsonl", context=ecl + 1)
    auto = run_json(cli, "pre-compact", hook_payload(
        "PreCompact", transcript, trigger="auto", custom_instructions=""), env)  # fmt: skip
    assert set(auto) == {"decision", "reason"} and auto["decision"] == "block"
    assert f"above the qualified ECL of {numfmt.tokens(ecl)}" in auto["reason"]
    assert "restart-packages/new/?spec_version=" in auto["reason"]
    manual = run_json(cli, "pre-compact", hook_payload(
        "PreCompact", transcript, trigger="manual", custom_instructions="keep"), env)  # fmt: skip
    assert set(manual) == {"systemMessage"}  # a manual /compact is never blocked
    assert manual["systemMessage"] == auto["reason"]
    # At or below the ECL: nothing, whatever the policy.
    within = write_transcript(tmp_path / "w.jsonl", context=ecl)
    assert run_json(cli, "pre-compact", hook_payload(
        "PreCompact", within, trigger="auto", custom_instructions=""), env) is None  # fmt: skip
    # Context off: SessionStart prints nothing.
    assert run_json(cli, "session-start", hook_payload(
        "SessionStart", within, source="startup", model=MODEL_ID), env) is None  # fmt: skip


def test_off_prints_nothing(cli, env, tmp_path, approved_limit, spec_v1, workspace, members):
    set_policy(workspace, members, "off", context=False)
    transcript = write_transcript(tmp_path / "t.jsonl", context=weakest_ecl(approved_limit) * 3)
    for name, payload in (
        ("session-start", hook_payload("SessionStart", transcript, source="startup",
                                       model=MODEL_ID)),
        ("pre-compact", hook_payload("PreCompact", transcript, trigger="auto",
                                     custom_instructions="")),
        ("session-start", hook_payload("SessionStart", transcript, source="compact")),
        ("post-compact", hook_payload("PostCompact", transcript, trigger="auto",
                                      compact_summary="s")),
    ):  # fmt: skip
        assert run_json(cli, name, payload, env) is None, name


def test_a_named_spec_without_an_authoritative_version_links_an_empty_package(
    cli,
    env,
    tmp_path,
    approved_limit,
    spec_v1,
    make_spec,  # noqa: F811
    workspace,
    members,
):
    draft = make_spec(slug="billing", title="Billing")
    set_policy(workspace, members, "suggest", spec=draft.slug)
    transcript = write_transcript(tmp_path / "t.jsonl", context=weakest_ecl(approved_limit) + 1)
    pre = run_json(cli, "pre-compact", hook_payload(
        "PreCompact", transcript, trigger="auto", custom_instructions=""), env)  # fmt: skip
    message = pre["systemMessage"]
    assert "no authoritative specification is set for the hooks" in message
    assert message.endswith(f"/w/{workspace.slug}/specs/restart-packages/new/")
    start = run_json(cli, "session-start", hook_payload(
        "SessionStart", transcript, source="startup"), env)  # fmt: skip
    # No `model` key: the command read it from the transcript. No specification line.
    assert "The authoritative specification" not in start["hookSpecificOutput"]["additionalContext"]


def test_no_limit_for_the_model_prints_nothing(cli, env, tmp_path, spec_v1):
    transcript = write_transcript(tmp_path / "t.jsonl", context=900_000)
    assert run_json(cli, "pre-compact", hook_payload(
        "PreCompact", transcript, trigger="auto", custom_instructions=""), env) is None  # fmt: skip
    assert run_json(cli, "session-start", hook_payload(
        "SessionStart", transcript, source="startup", model=MODEL_ID), env) is None  # fmt: skip


# --- the policy API and page ------------------------------------------------------------------

POLICY = "/api/v1/hooks/policy/"


def test_policy_api_reads_for_all_changes_for_admins_audited(
    api_for, spec_v1, workspace, other_workspace
):
    spec, _ = spec_v1
    assert api_for("viewer").get(POLICY).json() == {
        "pre_compact_action": "suggest",
        "session_start_context": True,
        "spec": "",
        "updated_at": None,
    }
    change = {"pre_compact_action": "block", "session_start_context": False, "spec": spec.slug}
    for role in ("viewer", "editor", "reviewer"):
        assert api_for(role).patch(POLICY, change, format="json").status_code == 403, role
    answer = api_for("admin").patch(POLICY, change, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json() | change == answer.json()
    (event,) = AuditEvent.objects.filter(action="hook_policy.update")
    assert event.data["changed"] == {
        "pre_compact_action": {"from": "suggest", "to": "block"},
        "session_start_context": {"from": True, "to": False},
        "spec": {"from": "", "to": spec.slug},
    }
    # The same values again: no second audit entry.
    assert api_for("admin").patch(POLICY, change, format="json").status_code == 200
    assert AuditEvent.objects.filter(action="hook_policy.update").count() == 1
    bad = api_for("admin").patch(POLICY, {**change, "pre_compact_action": "warn"}, format="json")
    assert bad.status_code == 400 and "pre_compact_action" in bad.json()
    foreign = api_for("admin").patch(POLICY, {**change, "spec": "nope"}, format="json")
    assert foreign.status_code == 400
    assert foreign.json()["spec"] == ["No specification with the key “nope” in this workspace."]
    assert HookPolicy.objects.get(workspace=workspace).spec == spec
    assert not HookPolicy.objects.filter(workspace=other_workspace).exists()


def test_policy_page_admin_changes_it_viewer_reads_it(client_for, spec_v1, workspace):
    spec, version = spec_v1
    url = f"/w/{workspace.slug}/traces/hooks/settings/"
    page = client_for("viewer").get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Only admins change this." in html
    assert "suggest a restart from the authoritative specification" in html
    # The only authoritative spec is named without a choice.
    assert f"{spec.slug} v{version.number} (sha256:{version.fingerprint[:12]})" in html
    assert client_for("editor").post(url, {"pre_compact_action": "off"}).status_code == 403
    admin = client_for("admin")
    bad = admin.post(url, {"pre_compact_action": "warn"})
    assert bad.status_code == 400 and "warn is not one of the available choices" in (
        bad.content.decode()
    )
    done = admin.post(url, {"pre_compact_action": "block", "spec": spec.slug})
    assert done.status_code == 302
    policy = HookPolicy.objects.get(workspace=workspace)
    assert (policy.pre_compact_action, policy.session_start_context, policy.spec) == (
        "block",
        False,  # an unticked box
        spec,
    )
    assert "Hook policy saved." in admin.get(url).content.decode()


def test_the_spec_governing_the_sessions_project_is_the_one_suggested(
    workspace,
    members,
    authoritative,  # noqa: F811
):
    from traces.selectors import hook_policy_peek, hook_restart_spec

    payments, payments_v1 = authoritative(slug="payments", title="Payments API")
    billing, billing_v1 = authoritative(slug="billing", title="Billing")
    for spec, project in ((payments, "/home/dev/payments"), (billing, "/home/dev")):
        spec.project = project
        spec.save(update_fields=["project"])
    session = Session.objects.create(
        workspace=workspace, harness=Harness.CLAUDE_CODE, external_id=SESSION,
        project="/home/dev/payments/api",
    )  # fmt: skip
    policy = hook_policy_peek(workspace=workspace)
    # The longest governing path wins; two authoritative specs and no session: none chosen.
    assert hook_restart_spec(workspace=workspace, policy=policy, session=session) == (
        payments,
        payments_v1,
    )
    assert hook_restart_spec(workspace=workspace, policy=policy) == (None, None)
    set_policy(workspace, members, "suggest", spec="billing")
    policy = hook_policy_peek(workspace=workspace)
    assert hook_restart_spec(workspace=workspace, policy=policy, session=session) == (
        billing,
        billing_v1,
    )
