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
    ],
)
def test_task_is_routed_to_its_queue(task, queue):
    assert task in app.tasks
    route = app.amqp.router.route({}, task, (), {}, app.tasks[task])
    assert route["queue"].name == queue
