"""Each task lands on the queue its work belongs to (the worker pools are sized per queue)."""

import pytest

from governance.celery import app

app.autodiscover_tasks(force=True)


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        ("traces.ingest_uploads", "ingest"),
        ("traces.derive_pending", "ingest"),
        ("traces.compute_analytics", "analysis"),
        ("qualification.load_trials", "ingest"),
        ("qualification.analyse", "analysis"),
        ("contextfiles.drift_check", "analysis"),
        ("artifacts.purge", "maintenance"),
        ("governance.requeue_stale_jobs", "maintenance"),
        ("traces.derive_pending_sweep", "maintenance"),
    ],
)
def test_task_is_routed_to_its_queue(task, queue):
    assert task in app.tasks
    route = app.amqp.router.route({}, task, (), {}, app.tasks[task])
    assert route["queue"].name == queue


def test_the_broker_gives_a_task_back_only_after_its_time_limit():
    """Redis redelivers an unacknowledged (acks_late) message after the visibility timeout:
    shorter than a task's time limit, a healthy long task would run twice at once."""
    from django.conf import settings

    timeout = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    ours = {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}
    assert "traces.ingest_uploads" in ours
    limits = {name: task.time_limit for name, task in ours.items()}
    assert all(limits.values()), limits  # every task has a time limit
    assert max(limits.values()) == 4 * 3600 < timeout


def test_beat_sweeps_stale_jobs_and_pending_derives():
    from django.conf import settings

    ours = ("governance.requeue_stale_jobs", "traces.derive_pending_sweep")
    schedule = {
        name: (entry["task"] in app.tasks, entry["schedule"], entry["options"]["expires"])
        for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
        if name in ours  # artifacts adds its purge to the same schedule
    }
    assert schedule == {
        "governance.requeue_stale_jobs": (True, 60, 55),
        "traces.derive_pending_sweep": (True, 300, 290),
    }
