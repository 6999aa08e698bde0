"""seed_demo's artifacts: a long pytest log, a build log with secrets redacted, a truncated
search, an expired and a deleted artifact, some reads and one failed write. Idempotent.
"""

from __future__ import annotations

import random
from datetime import timedelta

from django.utils import timezone

from artifacts import services
from artifacts.models import Artifact, ArtifactWriteFailure

RUN = "demo-run-7f3a"
OLD_RUN = "demo-run-51c0"


def _pytest_log(rng: random.Random) -> bytes:
    modules = ["api", "billing", "ingest", "limits", "specs", "traces", "budget", "auth"]
    lines = ["============================= test session starts =============================",
             "platform linux -- Python 3.11.7, pytest-8.3.4, pluggy-1.5.0",
             "rootdir: /srv/app, configfile: pyproject.toml",
             "collected 18432 items", ""]  # fmt: skip
    failures = []
    for i in range(18432):
        module = modules[i % len(modules)]
        name = f"tests/{module}/test_{module}_{i // 40:03d}.py::test_case_{i % 40:02d}"
        outcome = "PASSED"
        if i in (4117, 12950, 17001):
            outcome = "FAILED"
            failures.append(name)
        elif rng.random() < 0.004:
            outcome = "SKIPPED"
        lines.append(f"{name} {outcome} [{100 * (i + 1) // 18432:3d}%]")
    lines += [
        "",
        "=================================== FAILURES ===================================",
    ]
    for name in failures:
        lines += [
            f"_____________________________ {name.split('::')[1]} _____________________________",
            "",
            "    def test_case():",
            "        limit = OperatingLimit.objects.get(model='claude-sonnet', workload='code')",
            ">       assert limit.production_tokens <= limit.knee_tokens - limit.margin_tokens",
            "E       AssertionError: assert 131072 <= (118000 - 8000)",
            "E        +  where 131072 = <OperatingLimit: claude-sonnet/code>.production_tokens",
            "",
            f"{name.split('::')[0]}:88: AssertionError",
        ]
    lines += [
        "=========================== short test summary info ============================",
        *[f"FAILED {name} - AssertionError: assert 131072 <= (118000 - 8000)" for name in failures],
        f"=========== {len(failures)} failed, 18353 passed, 76 skipped in 412.37s (0:06:52) ===========",
    ]
    return ("\n".join(lines) + "\n").encode()


def _build_log() -> bytes:
    return b"""$ make release
Step 1/9 : FROM python:3.11-slim
Step 2/9 : ARG PIP_INDEX_URL=https://deploy:s3cr3t-Index-Pass@pypi.internal.example/simple
Step 3/9 : ENV AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE
Step 4/9 : ENV AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
Step 5/9 : RUN pip install -r requirements.txt
Collecting django~=5.2 (from -r requirements.txt (line 1))
Collecting celery[redis]~=5.5 (from -r requirements.txt (line 2))
Successfully installed celery-5.5.2 django-5.2.1 kombu-5.5.3 redis-5.2.1
Step 6/9 : COPY . /srv/app
Step 7/9 : RUN python manage.py collectstatic --noinput
312 static files copied to '/srv/app/var/staticfiles'.
Step 8/9 : RUN curl -H "Authorization: Bearer ghp_0123456789abcdefghijABCDEFGHIJ0123456789" https://api.github.com/repos/acme/app/releases
Step 9/9 : CMD ["gunicorn", "governance.wsgi"]
Successfully built 4c1d2e9f7a60
Successfully tagged registry.example/app:2025.06.1
"""


def _search_output(rng: random.Random) -> bytes:
    words = ["context", "budget", "limit", "compaction", "restart", "spec", "trace"]
    lines = []
    for i in range(4000):
        path = f"src/{rng.choice(words)}/{rng.choice(words)}_{i % 97}.py"
        lines.append(
            f"{path}:{rng.randint(1, 900)}:    # TODO: revisit the {rng.choice(words)} {rng.choice(words)}"
        )
    return ("\n".join(lines) + "\n").encode()


def seed(*, workspace, users, stdout) -> None:
    editor, admin = users["editor"], users["admin"]
    rng = random.Random(7)
    now = timezone.now()
    created = 0

    def exists(run_id: str, tool_call_id: str) -> bool:
        return Artifact.objects.filter(
            workspace=workspace, run_id=run_id, tool_call_id=tool_call_id
        ).exists()

    if not exists(RUN, "call-pytest-1"):
        log = services.artifact_write(
            workspace=workspace,
            source=_pytest_log(rng),
            run_id=RUN,
            tool_call_id="call-pytest-1",
            command="pytest -q tests/ --maxfail=0",
            exit_status=1,
            started_at=now - timedelta(minutes=47),
            finished_at=now - timedelta(minutes=40),
            actor=editor,
        )
        agent = services.Reader(actor=editor, via="api")
        services.artifact_read_tail(artifact=log, lines=12, reader=agent)
        services.artifact_search(artifact=log, reader=agent, q="AssertionError", context=3)
        created += 1
    if not exists(RUN, "call-build-2"):
        services.artifact_write(
            workspace=workspace,
            source=_build_log(),
            run_id=RUN,
            tool_call_id="call-build-2",
            command="make release",
            exit_status=0,
            started_at=now - timedelta(minutes=39),
            finished_at=now - timedelta(minutes=35),
            actor=editor,
        )
        created += 1
    if not exists(RUN, "call-rg-3"):
        full = _search_output(rng)
        kept = full[: len(full) // 2]
        kept = kept[: kept.rfind(b"\n") + 1]
        services.artifact_write(
            workspace=workspace,
            source=kept,
            run_id=RUN,
            tool_call_id="call-rg-3",
            command='rg -n "TODO" src/',
            exit_status=0,
            complete=False,
            dropped_bytes=len(full) - len(kept),
            dropped_lines=full.count(b"\n") - kept.count(b"\n"),
            started_at=now - timedelta(minutes=34),
            finished_at=now - timedelta(minutes=34),
            actor=editor,
        )
        created += 1
    if not exists(OLD_RUN, "call-pytest-1"):
        old = services.artifact_write(
            workspace=workspace,
            source=b"collected 212 items\n\n212 passed in 31.02s\n",
            run_id=OLD_RUN,
            tool_call_id="call-pytest-1",
            command="pytest -q tests/",
            exit_status=0,
            actor=editor,
        )
        # Seed an old run whose retention ran out: the purge turns it into a tombstone.
        Artifact.objects.filter(pk=old.pk).update(expires_at=now - timedelta(days=2))
        services.artifacts_purge(now=now)
        created += 1
    if not exists(OLD_RUN, "call-env-2"):
        env = services.artifact_write(
            workspace=workspace,
            source=b"HOME=/home/agent\nPATH=/usr/bin\nLANG=C.UTF-8\n",
            run_id=OLD_RUN,
            tool_call_id="call-env-2",
            command="env",
            exit_status=0,
            actor=editor,
        )
        services.artifact_delete(
            artifact=env, actor=admin, reason="Environment dumps are not kept."
        )
        created += 1
    if not ArtifactWriteFailure.objects.filter(workspace=workspace, run_id=RUN).exists():
        services.artifact_write_failure_record(
            workspace=workspace,
            run_id=RUN,
            tool_call_id="call-lint-4",
            command="ruff check .",
            reason="the body ended after 65,536 of 1,048,576 bytes (Content-Length); "
            "nothing was stored",
            bytes_received=65536,
            actor=editor,
        )
    stdout.write(f"  artifacts: {created} added" if created else "  artifacts: already there")
