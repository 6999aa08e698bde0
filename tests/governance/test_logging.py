"""Secrets never reach a log: every handler masks them, in the web process and in a Celery
worker, with DEBUG on and off (settings built from the environment in a clean subprocess)."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from governance.logging import RedactSecretsFilter, redact

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "cg_1a2b3c4d_" + "Zk9" * 15

PROBE = """
import io, json, logging, os, sys
import django
django.setup()
from django.conf import settings
from governance.logging import RedactSecretsFilter

TOKEN = os.environ["PROBE_TOKEN"]
if os.environ["PROBE_MODE"] == "celery":
    from celery.utils.log import get_task_logger
    from governance.celery import app
    # What a worker does at start-up (`celery -A governance worker`).
    app.log.setup(loglevel="INFO", redirect_stdouts=False)

handlers = set(logging.getLogger().handlers)
for logger in list(logging.Logger.manager.loggerDict.values()):
    if isinstance(logger, logging.Logger):
        handlers.update(logger.handlers)
unfiltered = sorted(
    repr(h)
    for h in handlers
    if not isinstance(h, logging.NullHandler)  # libraries' "no output" default
    and not any(isinstance(f, RedactSecretsFilter) for f in h.filters)
)
buffers = []
for handler in handlers:
    if isinstance(handler, logging.StreamHandler):
        buffers.append(io.StringIO())
        handler.setStream(buffers[-1])

logging.getLogger("django.request").warning("Unauthorized: /api/v1/jobs/ (Bearer %s)", TOKEN)
logging.getLogger().warning("root saw Authorization: Bearer %s", TOKEN)
logging.getLogger("django.server").warning('"GET /v1/traces?key=%s HTTP/1.1" 401 0', TOKEN)
try:
    raise ValueError(f"token {TOKEN} rejected")
except ValueError:
    logging.getLogger("django.request").exception("Internal Server Error: /api/v1/tokens/")
if os.environ["PROBE_MODE"] == "celery":
    get_task_logger("traces.tasks").warning("task got %s", TOKEN)
print(json.dumps({
    "debug": settings.DEBUG,
    "unfiltered": unfiltered,
    "handlers": len(handlers),
    "output": "".join(b.getvalue() for b in buffers),
}))
"""


def probe_logging(tmp_path, *, debug: str, mode: str) -> dict:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "DATABASE_", "GOVERNANCE_"))
    }
    clean.update(
        DJANGO_SETTINGS_MODULE="governance.settings",
        GOVERNANCE_VAR_DIR=str(tmp_path),
        DJANGO_DEBUG=debug,
        PROBE_TOKEN=TOKEN,
        PROBE_MODE=mode,
    )
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["web", "celery"])
@pytest.mark.parametrize("debug", ["1", "0"])
def test_every_handler_masks_tokens(tmp_path, debug, mode):
    values = probe_logging(tmp_path, debug=debug, mode=mode)
    assert values["debug"] is (debug == "1")
    assert values["unfiltered"] == []
    output = values["output"]
    # Everything was written (so the masking below is not an empty-output accident)…
    assert "Unauthorized: /api/v1/jobs/ (Bearer [redacted])" in output
    assert "root saw Authorization: Bearer [redacted]" in output
    assert '"GET /v1/traces?key=[redacted-token] HTTP/1.1" 401 0' in output
    assert "ValueError: token [redacted-token] rejected" in output
    if mode == "celery":
        assert "task got [redacted-token]" in output
    # …exactly once per record (no second, unfiltered handler on the way to the root)…
    assert output.count("Unauthorized: /api/v1/jobs/") == 1
    # …and the token itself nowhere.
    assert TOKEN not in output and TOKEN[12:] not in output


def test_filter_masks_exceptions_and_stacks():
    record = logging.LogRecord(
        "x", logging.ERROR, __file__, 1, "failed: %s", ("password=hunter2",), None
    )
    try:
        raise RuntimeError(f"postgres://app:s3cret@db/x and Bearer {TOKEN}")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    record.stack_info = f"Stack (most recent call last): {TOKEN}"
    assert RedactSecretsFilter().filter(record) is True
    text = logging.Formatter().format(record)
    assert "password=[redacted]" in text
    assert "postgres://app:[redacted]@db/x and Bearer [redacted]" in text
    assert "Stack (most recent call last): [redacted-token]" in text
    assert "hunter2" not in text and "s3cret" not in text and TOKEN not in text


def test_redact_leaves_ordinary_text_alone():
    assert redact("GET /w/team-a/jobs/12/ 200") == "GET /w/team-a/jobs/12/ 200"
