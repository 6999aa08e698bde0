"""Writes that insert the next row of a per-workspace sequence, raced on PostgreSQL: every
request either succeeds or gets a clear domain error, and the sequence has no duplicate."""

import threading

import pytest
from django.db import connection

from governance.celery import app as celery_app
from governance.errors import InputError
from governance.models import Invitation, InvitationStatus, Role
from governance.services import invitation_create
from traces.analytics.models import CorrectionPhraseList
from traces.analytics.post_compaction_services import correction_phrases_save

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def race(count, work) -> list[Exception]:
    barrier = threading.Barrier(count)
    errors: list[Exception] = []

    def target(number):
        try:
            celery_app.set_current()  # Celery's current app is per thread
            barrier.wait(timeout=30)
            work(number)
        except Exception as exc:  # collected for the caller's assertions
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def test_simultaneous_phrase_list_saves_take_consecutive_versions(workspace, members):
    errors = race(
        6,
        lambda n: correction_phrases_save(
            workspace=workspace, phrases=[f"phrase {n}", "no, that"], actor=members["admin"]
        ),
    )
    assert errors == []
    versions = sorted(
        CorrectionPhraseList.objects.filter(workspace=workspace).values_list("version", flat=True)
    )
    assert versions == list(range(versions[0], versions[0] + 6))


def test_simultaneous_first_invitations_of_one_person_leave_one_open(workspace, members):
    errors = race(
        6,
        lambda n: invitation_create(
            workspace=workspace, invitee="newcomer", role=Role.EDITOR, actor=members["admin"]
        ),
    )
    assert [e for e in errors if not isinstance(e, InputError)] == []
    assert (
        Invitation.objects.filter(
            workspace=workspace, invitee="newcomer", status=InvitationStatus.PENDING
        ).count()
        == 1
    )
