"""Shared fixtures: workspaces, one member per role, signed-in clients, API clients, Chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from governance.celery import app as celery_app
from governance.models import Role, Workspace
from governance.services import (
    api_token_create,
    membership_set,
    user_get_or_create,
    workspace_create,
)

SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
ROLES = ["viewer", "editor", "reviewer", "admin"]
PASSWORD = "correct-horse-battery-staple"
CHROMIUM = "/usr/bin/chromium"


def pytest_collection_modifyitems(config, items):
    """Skip tests whose real services are absent, unless CI said they are required."""
    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    has_broker = bool(os.environ.get("CELERY_BROKER_URL"))
    has_chromium = Path(CHROMIUM).exists()
    require = set(filter(None, os.environ.get("GOVERNANCE_REQUIRE", "").split(",")))
    for item in items:
        if "postgres" in item.keywords and not on_postgres:
            if "postgres" in require:
                raise pytest.UsageError(
                    "PostgreSQL tests are required but DATABASE_URL is not PostgreSQL"
                )
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL)"))
        if "celery_worker" in item.keywords and not has_broker:
            if "celery" in require:
                raise pytest.UsageError(
                    "Celery worker tests are required but CELERY_BROKER_URL is unset"
                )
            item.add_marker(pytest.mark.skip(reason="needs a broker (set CELERY_BROKER_URL)"))
        if "browser" in item.keywords and not has_chromium:
            if "browser" in require:
                raise pytest.UsageError(f"browser tests are required but {CHROMIUM} is missing")
            item.add_marker(pytest.mark.skip(reason=f"needs Debian's Chromium at {CHROMIUM}"))


@pytest.fixture(autouse=True)
def _tasks_in_process(request):
    """Run tasks in-process unless the test asks for a real worker."""
    if "celery_worker" in request.keywords:
        yield
        return
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture(autouse=True)
def _test_settings(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    # Password hashing is deliberately slow; tests only need it to be correct.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    from django.core.cache import cache

    cache.clear()  # debounce locks and cached values must not leak between tests
    yield


@pytest.fixture
def shared_fixtures() -> Path:
    """The real third-party samples in ../shared/fixtures; skip when absent (a user's clone)."""
    if not SHARED_FIXTURES.is_dir():
        pytest.skip("../shared/fixtures is not present on this machine")
    return SHARED_FIXTURES


@pytest.fixture
def workspace(db) -> Workspace:
    return workspace_create(slug="team-a", name="Team A")


@pytest.fixture
def other_workspace(db) -> Workspace:
    return workspace_create(slug="team-b", name="Team B")


@pytest.fixture
def members(workspace):
    """One user per role in `workspace`: {'viewer': user, …}."""
    users = {}
    for role in ROLES:
        user = user_get_or_create(username=f"{role}-a", password=PASSWORD)
        membership_set(workspace=workspace, user=user, role=Role.from_name(role))
        users[role] = user
    return users


@pytest.fixture
def outsider(other_workspace):
    """An admin of the other workspace, and a member of nothing else."""
    user = user_get_or_create(username="outsider", password=PASSWORD)
    membership_set(workspace=other_workspace, user=user, role=Role.ADMIN)
    return user


@pytest.fixture
def client_for(members):
    def make(role: str) -> Client:
        client = Client()
        client.force_login(members[role])
        return client

    return make


@pytest.fixture
def api_for(members, workspace):
    """An APIClient authenticated with a fresh bearer token for the given role."""

    def make(
        role: str, *, target_workspace: Workspace | None = None, run_id: str = ""
    ) -> APIClient:
        issued = api_token_create(
            workspace=target_workspace or workspace,
            user=members[role],
            name=f"{role} test",
            run_id=run_id,
        )
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
        client.token = issued
        return client

    return make


@pytest.fixture
def run_on_commit(django_capture_on_commit_callbacks):
    """Run on_commit callbacks (task enqueues) inside a test transaction."""

    def wrap():
        return django_capture_on_commit_callbacks(execute=True)

    return wrap


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


# --- browser -----------------------------------------------------------------

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(15000)
    page = context.new_page()
    page.base_url = live_server.url
    yield page
    context.close()


@pytest.fixture
def login(page):
    def do(username: str, password: str = PASSWORD):
        page.goto(f"{page.base_url}/accounts/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_load_state("networkidle")

    return do


@pytest.fixture
def screenshot(page):
    """Save a screenshot when GOVERNANCE_SCREENSHOTS names a folder (for looking at pages)."""

    def shoot(name: str, full_page: bool = True):
        folder = os.environ.get("GOVERNANCE_SCREENSHOTS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)

    return shoot


def copy_fixture(src: Path, dest_dir: Path) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / src.name
    shutil.copyfile(src, target)
    return target


@pytest.fixture
def celery_worker(transactional_db):
    """A real Celery worker thread consuming from the configured broker (Redis in CI)."""
    from celery.contrib.testing.worker import start_worker

    celery_app.conf.task_always_eager = False
    with start_worker(
        celery_app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        loglevel=os.environ.get("GOVERNANCE_WORKER_LOGLEVEL", "WARNING"),
        queues=["default", "ingest", "analysis", "maintenance"],
    ):
        yield


@pytest.fixture
def worker_process(transactional_db, settings, tmp_path):
    """Start real `celery worker` processes (prefork) on the test database and broker.

    `start(name, **env)` returns the Popen of a worker that runs in a process group of its
    own, so that a test can kill the whole worker (main process and pool) with
    `os.killpg(process.pid, signal.SIGKILL)`. Workers still running at the end are stopped
    warmly; `process.log` is the path of the worker's output."""
    import signal
    import subprocess
    import sys
    from urllib.parse import quote

    database = settings.DATABASES["default"]
    url = (
        f"postgres://{quote(database['USER'] or '')}:{quote(database['PASSWORD'] or '')}@"
        f"{database['HOST'] or 'localhost'}:{database['PORT'] or 5432}/{quote(database['NAME'])}"
    )
    command = [sys.executable, "-m", "celery", "-A", "governance", "worker", "--pool=prefork",
               "--concurrency=1", "--queues=default,ingest,analysis,maintenance",
               "--without-mingle", "--without-gossip", "--loglevel=INFO"]  # fmt: skip
    started = []

    def start(name: str, **env: str):
        log = tmp_path / f"worker-{name}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [*command, f"--hostname={name}@%h"],
                cwd=settings.BASE_DIR,
                env={
                    **os.environ,
                    "DATABASE_URL": url,
                    "GOVERNANCE_MEDIA_ROOT": str(settings.MEDIA_ROOT),
                    **env,
                },
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process.log = log
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    # A killed worker's message stays unacknowledged in Redis until the visibility timeout,
    # then comes back: by then its job id may name another test's job.
    with celery_app.connection_for_write() as broker:
        channel = broker.default_channel
        channel.client.delete(channel.unacked_key, channel.unacked_index_key)


# --- text filters ---------------------------------------------------------------

# Projects and models whose names hold what LIKE treats specially (%, _ and the escape
# character \) and mixed case, for the filters shared by the sessions list and analytics.
FILTER_PROJECTS = (
    "/home/dev/Web_App",
    "/home/dev/web-app",
    "/srv/100%-done",
    "C:\\Users\\dev\\100x-done",
)
FILTER_MODELS = ("claude-Opus-4-1", "claude-sonnet-4-5")


@pytest.fixture
def named_sessions(workspace, run_on_commit):
    """Four ingested sessions: project FILTER_PROJECTS[i], model FILTER_MODELS[i % 2].
    Returns the Session rows in that order."""
    from traces.models import Session
    from traces.services import ingest_bytes
    from traces.synthetic import CorpusParams, generate_corpus

    params = CorpusParams(
        sessions=4, seed=3, steps_per_session=(20, 30), subagents_per_session=(1, 1),
        projects=FILTER_PROJECTS, models=FILTER_MODELS,
    )  # fmt: skip
    with run_on_commit():
        for generated in generate_corpus(params):
            ingest_bytes(
                workspace=workspace,
                name=f"{generated.session_id}.jsonl",
                data=b"\n".join(generated.lines) + b"\n",
                source="demo",
                refresh_analytics=False,
            )
    by_project = {s.project: s for s in Session.objects.filter(workspace=workspace)}
    return [by_project[project] for project in FILTER_PROJECTS]
