"""Services send tasks by name (`task_named`, `job_enqueue(task=...)`); with a broker a name
not yet imported is sent as it is (`TaskByName`), so a misspelt one would wait in the queue
forever. Every name the code sends must be a registered task."""

import re
from pathlib import Path

from governance.celery import app
from governance.services.jobs import TaskByName, task_named

ROOT = Path(__file__).resolve().parents[2]
SENT = re.compile(r"""(?:task_named\(|job_enqueue\(job=\w+, task=)["']([\w.]+)["']""")
CONSTANT = re.compile(r"""^TASK = ["']([\w.]+)["']""", re.M)


def _names_sent() -> set[str]:
    names = set()
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        text = path.read_text()
        names |= set(SENT.findall(text))
        if "job_enqueue(job=job, task=TASK)" in text or "task_named(TASK)" in text:
            names |= set(CONSTANT.findall(text))
    return names


def test_every_task_the_code_sends_by_name_is_registered():
    names = _names_sent()
    assert {"traces.ingest_uploads", "traces.derive_pending",
            "analytics.instruction_visibility_extract", "analytics.instruction_visibility",
            "specs.survival_audit"} <= names  # fmt: skip
    app.loader.import_default_modules()
    assert sorted(names - set(app.tasks)) == []


def test_with_a_broker_an_unimported_task_is_sent_by_name(monkeypatch):
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    name = "governance.not_imported_here"
    task = task_named(name)
    assert isinstance(task, TaskByName) and task.name == name
    sent = []
    monkeypatch.setattr(app, "send_task", lambda *a, **k: sent.append((a, k)))
    task.apply_async(args=[3], countdown=2)
    task.delay(4, 5)
    assert sent == [
        ((name,), {"args": [3], "kwargs": {}, "countdown": 2}),
        ((name,), {"args": [4, 5], "kwargs": {}}),
    ]
