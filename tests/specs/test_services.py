"""The version state machine, review rules, the chain's database guarantees and audit records."""

import pytest
from django.db import IntegrityError, transaction

from governance.errors import Forbidden, InputError
from governance.models import AuditEvent
from specs import selectors, services
from specs.analysis.content import Item, fingerprint
from specs.models import SpecVersion, VersionStatus
from tests.specs.conftest import BASE_ITEMS, resolved

pytestmark = pytest.mark.django_db


def audit_actions(workspace):
    return list(
        AuditEvent.objects.filter(workspace=workspace)
        .order_by("id")
        .values_list("action", "actor__username")
    )


def draft(spec, base, author, items):
    return services.spec_version_create(spec=spec, author=author, supersedes=base, items=items)


def test_high_consequence_lifecycle_is_audited(authoritative, members, workspace):
    spec, v1 = authoritative()
    assert v1.status == VersionStatus.AUTHORITATIVE and v1.reviewer == members["reviewer"]
    assert v1.fingerprint == fingerprint(BASE_ITEMS)
    v2 = draft(spec, v1, members["editor"], resolved(BASE_ITEMS))
    assert (v2.number, v2.status, v2.supersedes_id) == (2, "draft", v1.pk)
    services.spec_version_submit(version=v2, actor=members["editor"])
    v2.refresh_from_db()
    assert v2.status == VersionStatus.IN_REVIEW and v2.submitted_by == members["editor"]
    services.spec_version_approve(
        version=v2, reviewer=members["reviewer"], acknowledged_resolutions=["storage"]
    )
    v1.refresh_from_db()
    v2.refresh_from_db()
    assert (v1.status, v2.status) == ("superseded", "authoritative")
    assert v2.acknowledged_resolutions == ["storage"] and v1.superseded_at is not None
    assert selectors.successor_of(version=v1) == v2
    actions = audit_actions(workspace)
    assert actions[-3:] == [
        ("spec_version.create", "editor-a"),
        ("spec_version.submit", "editor-a"),
        ("spec_version.approve", "reviewer-a"),
    ]
    approval = AuditEvent.objects.filter(action="spec_version.approve").order_by("id").last()
    assert approval.data["acknowledged_resolutions"] == ["storage"]
    assert approval.data["supersedes"] == 1 and approval.object_id == str(v2.pk)


def test_low_consequence_becomes_authoritative_on_submit_and_is_recorded(
    authoritative, members, workspace
):
    _spec, v1 = authoritative("low", slug="conventions", title="Conventions")
    assert v1.status == VersionStatus.AUTHORITATIVE and v1.reviewer is None
    assert v1.submitted_by == members["editor"]
    approval = AuditEvent.objects.filter(action="spec_version.approve").get()
    assert approval.data["mode"] == "low consequence: authoritative on submit"
    assert approval.actor == members["editor"]


def test_low_consequence_submit_still_needs_resolutions_acknowledged(authoritative, members):
    spec, v1 = authoritative("low", slug="conventions")
    v2 = draft(spec, v1, members["editor"], resolved(BASE_ITEMS))
    with pytest.raises(InputError) as caught:
        services.spec_version_submit(version=v2, actor=members["editor"])
    assert caught.value.field_errors == {
        "acknowledged_resolutions": [
            "This version resolves open question storage; the submitter must acknowledge each by key."
        ]
    }
    v2.refresh_from_db()
    assert v2.status == VersionStatus.DRAFT
    services.spec_version_submit(
        version=v2, actor=members["editor"], acknowledged_resolutions=["storage"]
    )
    v2.refresh_from_db()
    assert v2.status == VersionStatus.AUTHORITATIVE


def test_self_approval_and_self_rejection_are_refused(authoritative, members):
    spec, v1 = authoritative()
    v2 = draft(spec, v1, members["reviewer"], [*BASE_ITEMS, Item("new", "requirement", "More.")])
    services.spec_version_submit(version=v2, actor=members["reviewer"])
    with pytest.raises(Forbidden, match="a reviewer who is not its author"):
        services.spec_version_approve(
            version=v2, reviewer=members["reviewer"], acknowledged_resolutions=[]
        )
    with pytest.raises(Forbidden):
        services.spec_version_reject(version=v2, reviewer=members["reviewer"], comment="no")
    with pytest.raises(Forbidden, match="needs the reviewer role"):
        services.spec_version_approve(
            version=v2, reviewer=members["editor"], acknowledged_resolutions=[]
        )
    services.spec_version_approve(
        version=v2, reviewer=members["admin"], acknowledged_resolutions=[]
    )
    v2.refresh_from_db()
    assert v2.status == VersionStatus.AUTHORITATIVE and v2.reviewer == members["admin"]


def test_approval_requires_each_resolution_acknowledged_exactly(authoritative, members):
    spec, v1 = authoritative()
    v2 = draft(spec, v1, members["editor"], resolved(BASE_ITEMS))
    services.spec_version_submit(version=v2, actor=members["editor"])
    for given, expected in [
        ([], ["This version resolves open question storage; the reviewer must acknowledge each by key."]),
        (["storage", "retention"], ["retention is neither resolved nor dropped by this version; acknowledge only the listed keys."]),
    ]:  # fmt: skip
        with pytest.raises(InputError) as caught:
            services.spec_version_approve(
                version=v2, reviewer=members["reviewer"], acknowledged_resolutions=given
            )
        assert caught.value.field_errors["acknowledged_resolutions"] == expected
    v2.refresh_from_db()
    assert v2.status == VersionStatus.IN_REVIEW


def test_removing_an_open_question_counts_as_resolving_it(authoritative, members):
    spec, v1 = authoritative()
    v2 = draft(spec, v1, members["editor"], BASE_ITEMS[:2])
    assert [r["key"] for r in selectors.pending_resolutions(version=v2)] == ["storage"]
    assert selectors.pending_resolutions(version=v2)[0]["after"] is None


def test_stale_base_names_the_current_version(authoritative, members):
    spec, v1 = authoritative()
    a = draft(spec, v1, members["editor"], [*BASE_ITEMS, Item("a", "requirement", "A.")])
    b = draft(spec, v1, members["admin"], [*BASE_ITEMS, Item("b", "requirement", "B.")])
    services.spec_version_submit(version=a, actor=members["editor"])
    services.spec_version_submit(version=b, actor=members["admin"])
    services.spec_version_approve(
        version=a, reviewer=members["reviewer"], acknowledged_resolutions=[]
    )
    with pytest.raises(services.StaleBase) as caught:
        services.spec_version_approve(
            version=b, reviewer=members["reviewer"], acknowledged_resolutions=[]
        )
    assert caught.value.current.pk == a.pk
    assert f"v{a.number}" in caught.value.message and "is now authoritative" in caught.value.message
    b.refresh_from_db()
    assert b.status == VersionStatus.IN_REVIEW
    assert selectors.is_stale(version=b, current=selectors.current_of(version=b))
    # A new draft must also start from the current version, never from an old one.
    with pytest.raises(services.StaleBase):
        draft(spec, v1, members["editor"], BASE_ITEMS)
    with pytest.raises(services.StaleBase):
        draft(spec, None, members["editor"], BASE_ITEMS)


def test_submitted_versions_are_immutable_and_states_only_move_forward(authoritative, members):
    spec, v1 = authoritative()
    v2 = draft(spec, v1, members["editor"], resolved(BASE_ITEMS))
    services.spec_version_submit(version=v2, actor=members["editor"])
    with pytest.raises(services.SpecConflict, match="immutable"):
        services.spec_version_update(version=v2, actor=members["editor"], items=BASE_ITEMS)
    with pytest.raises(services.SpecConflict, match="only a draft can be submitted"):
        services.spec_version_submit(version=v2, actor=members["editor"])
    with pytest.raises(services.SpecConflict, match="only drafts can be discarded"):
        services.spec_version_discard(version=v2, actor=members["editor"])
    with pytest.raises(InputError) as caught:
        services.spec_version_reject(version=v2, reviewer=members["reviewer"], comment="  ")
    assert caught.value.field_errors == {
        "comment": ["A rejection needs a comment: say what must change."]
    }
    services.spec_version_reject(
        version=v2, reviewer=members["reviewer"], comment="Keep the question open until the bench."
    )
    v2.refresh_from_db()
    assert v2.status == VersionStatus.REJECTED and v2.reviewer == members["reviewer"]
    with pytest.raises(services.SpecConflict, match="only a version in review"):
        services.spec_version_approve(
            version=v2, reviewer=members["admin"], acknowledged_resolutions=["storage"]
        )
    with pytest.raises(services.SpecConflict, match="already approved by reviewer-a"):
        services.spec_version_approve(
            version=v1, reviewer=members["admin"], acknowledged_resolutions=[]
        )
    reject = AuditEvent.objects.get(action="spec_version.reject")
    assert reject.data["comment"] == "Keep the question open until the bench."


def test_drafts_can_be_edited_and_discarded(authoritative, members, workspace):
    spec, v1 = authoritative()
    v2 = draft(spec, v1, members["editor"], BASE_ITEMS)
    edited = [*BASE_ITEMS, Item("extra", "definition", "Extra means more.")]
    services.spec_version_update(version=v2, actor=members["editor"], items=edited, note="why")
    v2.refresh_from_db()
    assert v2.fingerprint == fingerprint(edited) and v2.note == "why"
    assert [i.key for i in selectors.version_items(version=v2)] == [
        "api-compat", "retention", "extra", "storage"
    ]  # fmt: skip
    services.spec_version_discard(version=v2, actor=members["editor"])
    assert not SpecVersion.objects.filter(pk=v2.pk).exists()
    assert audit_actions(workspace)[-1] == ("spec_version.discard", "editor-a")


def test_submission_rules(authoritative, make_spec, members):
    spec, v1 = authoritative()
    same = draft(spec, v1, members["editor"], BASE_ITEMS)
    with pytest.raises(InputError, match="same content as the authoritative v1"):
        services.spec_version_submit(version=same, actor=members["editor"])
    services.spec_version_discard(version=same, actor=members["editor"])
    no_evidence = draft(
        spec,
        v1,
        members["editor"],
        [
            *BASE_ITEMS[:2],
            Item("q2", "open_question", "Which queue?", status="unresolved",
                 alternatives=(services_alternative("Redis"),)),
        ],
    )  # fmt: skip
    with pytest.raises(InputError) as caught:
        services.spec_version_submit(version=no_evidence, actor=members["editor"])
    assert "item q2, alternative 1 (evidence)" in caught.value.field_errors["items"][0]
    empty_spec = make_spec(slug="empty")
    empty = draft(empty_spec, None, members["editor"], [])
    with pytest.raises(InputError, match="at least one item"):
        services.spec_version_submit(version=empty, actor=members["editor"])


def services_alternative(text):
    from specs.analysis.content import Alternative

    return Alternative(text, "")


def test_invalid_items_are_refused_with_the_reason(make_spec, members):
    spec = make_spec()
    with pytest.raises(InputError) as caught:
        draft(
            spec,
            None,
            members["editor"],
            [Item("a", "requirement", "x"), Item("A", "wish", ""), Item("b c", "decision", "y")],
        )
    assert caught.value.field_errors["items"] == [
        "item A (key): Key 'A' is already used by item 1; keys are unique within a version (ignoring case).",
        "item A (kind): 'wish' is not a kind; use one of requirement, constraint, definition, interface, decision, open_question.",
        "item A (text): The item needs text.",
        "item b c (key): 'b c' is not a valid key: Letters, digits and . _ : - (starting with a letter or digit), at most 80 characters.",
    ]


def test_spec_slugs_are_unique_and_pages_are_reserved(make_spec, workspace, members):
    make_spec()
    with pytest.raises(InputError) as caught:
        make_spec()
    assert caught.value.field_errors == {
        "slug": ["A specification with the slug 'payments' already exists."]
    }
    with pytest.raises(InputError, match="reserved"):
        make_spec(slug="review")
    spec = services.spec_create(
        workspace=workspace, title="Trace  Retention ✓", consequence="low", actor=members["editor"]
    )
    assert (spec.slug, spec.title, spec.owner) == (
        "trace-retention",
        "Trace Retention ✓",
        members["editor"],
    )


def test_the_database_refuses_a_second_authoritative_version_or_a_fork(authoritative, members):
    spec, v1 = authoritative()
    rogue = SpecVersion.objects.create(
        workspace=spec.workspace, spec=spec, number=9, supersedes=v1, fingerprint="0" * 64
    )
    rogue.status = VersionStatus.AUTHORITATIVE
    with pytest.raises(IntegrityError), transaction.atomic():
        rogue.save()
    v1.status = VersionStatus.SUPERSEDED
    v1.save()
    rogue.save()  # v1 superseded by rogue: fine, one line
    fork = SpecVersion.objects.create(
        workspace=spec.workspace, spec=spec, number=10, supersedes=v1, fingerprint="1" * 64
    )
    fork.status = VersionStatus.SUPERSEDED
    with pytest.raises(IntegrityError), transaction.atomic():
        fork.save()
    second_root = SpecVersion.objects.create(
        workspace=spec.workspace, spec=spec, number=11, fingerprint="2" * 64
    )
    second_root.status = VersionStatus.SUPERSEDED
    with pytest.raises(IntegrityError), transaction.atomic():
        second_root.save()
    self_review = SpecVersion.objects.create(
        workspace=spec.workspace,
        spec=spec,
        number=12,
        fingerprint="3" * 64,
        author=members["editor"],
    )
    self_review.reviewer = members["editor"]
    with pytest.raises(IntegrityError), transaction.atomic():
        self_review.save()
    self_review.reviewer = None
    self_review.status = VersionStatus.REJECTED
    with pytest.raises(IntegrityError), transaction.atomic():
        self_review.save()


def test_chain_numbers_only_grow_so_supersession_cannot_cycle(authoritative, members):
    spec, v1 = authoritative()
    previous = v1
    for index in range(3):
        version = draft(
            spec, previous, members["editor"], [*BASE_ITEMS, Item(f"k{index}", "requirement", "x")]
        )
        services.spec_version_submit(version=version, actor=members["editor"])
        services.spec_version_approve(  # each version drops the settled k item before it
            version=version,
            reviewer=members["reviewer"],
            acknowledged_resolutions=[f"k{index - 1}"] if index else [],
        )
        assert version.supersedes.number < version.number
        previous = version
    chain = list(
        spec.versions.order_by("number").values_list("number", "supersedes__number", "status")
    )
    assert chain == [
        (1, None, "superseded"), (2, 1, "superseded"), (3, 2, "superseded"), (4, 3, "authoritative")
    ]  # fmt: skip


def test_markdown_import_creates_a_draft_and_reports_every_bad_line(authoritative, members):
    spec, v1 = authoritative()
    exported = selectors.version_markdown(version=v1)
    v2, result = services.spec_version_import(
        spec=spec, author=members["editor"], markdown=exported, supersedes=v1
    )
    assert result.matches_declared and v2.fingerprint == v1.fingerprint
    with pytest.raises(InputError) as caught:
        services.spec_version_import(
            spec=spec,
            author=members["editor"],
            markdown="## Requirements\n- [x] fine\n  - Nope: bad\n## Sources\n- trace-session:999999\n",
            supersedes=v1,
        )
    assert caught.value.field_errors["markdown"][0].startswith("line 3: a nested bullet")
    with pytest.raises(InputError) as caught:
        services.spec_version_import(
            spec=spec,
            author=members["editor"],
            markdown="## Requirements\n- [x] fine\n## Sources\n- trace-session:999999\n",
            supersedes=v1,
        )
    assert caught.value.field_errors == {
        "sources": ["trace-session:999999: no such trace session in this workspace."]
    }


def test_a_dropped_settled_item_must_be_acknowledged_too(authoritative, members):
    spec, v1 = authoritative()
    without_retention = [item for item in BASE_ITEMS if item.key != "retention"]
    v2 = draft(spec, v1, members["editor"], without_retention)
    services.spec_version_submit(version=v2, actor=members["editor"])
    with pytest.raises(InputError) as caught:
        services.spec_version_approve(
            version=v2, reviewer=members["reviewer"], acknowledged_resolutions=[]
        )
    assert caught.value.field_errors["acknowledged_resolutions"] == [
        "This version drops settled item retention; the reviewer must acknowledge each by key."
    ]
    v2.refresh_from_db()
    assert v2.status == "in_review"
    services.spec_version_approve(
        version=v2, reviewer=members["reviewer"], acknowledged_resolutions=["retention"]
    )
    v2.refresh_from_db()
    assert (v2.status, v2.acknowledged_resolutions) == ("authoritative", ["retention"])
