"""Queue hand-out under real concurrency (PostgreSQL row locks, SKIP LOCKED): no place is ever
given to two people, nobody holds two places of one run, and one person's simultaneous
requests get the same run."""

import threading
from collections import defaultdict

import pytest
from django.db import connection

from governance.models import Role
from governance.services import membership_set, user_get_or_create
from traces.annotations import services
from traces.annotations.models import QueueSlot
from traces.models import Run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def run_threads(count, work):
    barrier = threading.Barrier(count)
    errors = []

    def target(number):
        try:
            barrier.wait(timeout=30)
            work(number)
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors


def test_no_place_is_handed_out_twice(workspace, members, small_session):
    annotators = []
    for n in range(8):
        user = user_get_or_create(username=f"ann-{n}", password="x")
        membership_set(workspace=workspace, user=user, role=Role.EDITOR)
        annotators.append(user)
    runs = Run.objects.filter(session=small_session)
    queue = services.queue_build(
        workspace=workspace, actor=members["reviewer"], name="race", runs=runs,
        criteria={}, sample_size=min(10, runs.count()), annotators=annotators,
        annotators_per_run=2, seed=1,
    )  # fmt: skip
    places = QueueSlot.objects.filter(item__queue=queue).count()
    claims = defaultdict(list)  # slot id -> users who were given it
    lock = threading.Lock()

    def work(number):
        user = annotators[number]
        while True:
            slot = services.queue_next(queue=queue, user=user)
            if slot is None:
                return
            with lock:
                claims[slot.pk].append(user.pk)
            services.queue_no_divergence(queue=queue, user=user, run_id=slot.item.run_id)

    run_threads(len(annotators), work)
    assert len(claims) == places  # every place was handed out
    assert all(len(users) == 1 for users in claims.values()), claims
    slots = list(
        QueueSlot.objects.filter(item__queue=queue).values_list(
            "item_id", "annotator_id", "finished_at"
        )
    )
    assert all(annotator and finished for _, annotator, finished in slots)
    per_item = defaultdict(set)
    for item, annotator, _ in slots:
        assert annotator not in per_item[item]
        per_item[item].add(annotator)


def test_one_persons_simultaneous_requests_get_the_same_run(workspace, members, small_session):
    queue = services.queue_build(
        workspace=workspace, actor=members["reviewer"], name="same person",
        runs=Run.objects.filter(session=small_session), criteria={}, sample_size=5,
        annotators=[members["reviewer"], members["editor"]], annotators_per_run=2, seed=2,
    )  # fmt: skip
    results = []
    lock = threading.Lock()

    def work(number):
        slot = services.queue_next(queue=queue, user=members["editor"])
        with lock:
            results.append(slot.pk)

    run_threads(6, work)
    assert len(set(results)) == 1
    assert QueueSlot.objects.filter(item__queue=queue, annotator=members["editor"]).count() == 1
