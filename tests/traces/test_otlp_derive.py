"""OTLP requests and the deferred derive step running at the same time (PostgreSQL).

Each interleaving is forced with a real table lock held by a third connection: a request
or a derive run waits on it at a chosen statement while the other side goes ahead.
"""

import json
import threading
import time
import uuid

import pytest
from django.core.cache import cache
from django.db import connections

from traces.models import Call, Session
from traces.services import derive_pending_queue_all, derive_pending_run, otlp_receive

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BASE_NS = 1_767_225_600_000_000_000


def otlp_body(spans: list[tuple[str, str, int]]) -> bytes:
    """OTLP/JSON with one LLM span per (conversation, response id, input tokens)."""
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{
        "scope": {"name": "gateway"},
        "spans": [{
            "traceId": uuid.uuid4().hex, "spanId": uuid.uuid4().hex[:16], "name": "chat",
            "startTimeUnixNano": str(BASE_NS + n * 10**9),
            "attributes": [
                {"key": "gen_ai.conversation.id", "value": {"stringValue": conversation}},
                {"key": "gen_ai.response.id", "value": {"stringValue": response_id}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(tokens)}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "7"}},
            ],
        } for n, (conversation, response_id, tokens) in enumerate(spans)],
    }]}]}).encode()  # fmt: skip


class TableLock:
    """`LOCK TABLE … IN SHARE MODE` on its own connection: readers go on, writers wait."""

    def __init__(self, table: str):
        self.table = table
        self.connection = connections.create_connection("default")

    def __enter__(self):
        self.connection.set_autocommit(False)
        with self.connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {self.table} IN SHARE MODE")
        return self

    def __exit__(self, *exc):
        self.release()

    def release(self) -> None:
        if not self.connection.get_autocommit():
            self.connection.rollback()
            self.connection.set_autocommit(True)
        self.connection.close()

    def wait_for_waiter(self, timeout: float = 30) -> int:
        """The backend pid of the first connection waiting for this lock."""
        deadline = time.monotonic() + timeout
        with self.connection.cursor() as cursor:
            while time.monotonic() < deadline:
                cursor.execute(
                    "SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                    "WHERE c.relname = %s AND NOT l.granted",
                    [self.table],
                )
                row = cursor.fetchone()
                if row:
                    return row[0]
                time.sleep(0.02)
        raise AssertionError(f"nothing waited for the lock on {self.table}")


def in_thread(target, errors: list) -> threading.Thread:
    def run():
        try:
            target()
        except Exception as exc:  # asserted by the test
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def drain(workspace) -> None:
    while derive_pending_run(workspace_id=workspace.pk):
        pass


def assert_sessions_match_their_calls(workspace) -> None:
    for session in Session.objects.filter(workspace=workspace):
        calls = Call.objects.filter(session=session)
        tokens = sum(c.input_tokens for c in calls)
        assert (session.call_count, session.input_tokens, session.needs_derive) == (
            calls.count(),
            tokens,
            False,
        ), session.external_id


def test_a_derive_run_between_a_session_and_its_calls_leaves_it_marked(workspace, members):
    """The request creates the session (committed, marked) before its calls commit; a derive
    run meanwhile derives it with no calls and clears the mark. The calls must mark it again."""
    body = otlp_body([("conv-race", f"msg_{n}", 1000 + n) for n in range(5)])
    errors: list = []
    with TableLock("traces_calltext") as lock:  # the request's calls wait to commit
        request = in_thread(
            lambda: otlp_receive(
                workspace=workspace, user=members["editor"], body=body,
                content_type="application/json",
            ),
            errors,
        )  # fmt: skip
        lock.wait_for_waiter()
        assert Session.objects.filter(external_id="conv-race", needs_derive=True).exists()
        assert derive_pending_run(workspace_id=workspace.pk) == 1  # derived with no calls
        lock.release()
        request.join()
    assert errors == []
    drain(workspace)
    session = Session.objects.get(external_id="conv-race")
    assert Call.objects.filter(session=session).count() == 5
    assert (session.call_count, session.input_tokens) == (5, 5010)
    assert_sessions_match_their_calls(workspace)


def test_a_derive_run_killed_mid_work_leaves_its_sessions_marked(workspace, members):
    """A worker that dies while deriving must not leave the sessions unmarked."""
    cache.add(f"traces:derive-pending:{workspace.pk}", 1)  # no run queued by the request
    otlp_receive(
        workspace=workspace, user=members["editor"], content_type="application/json",
        body=otlp_body([("conv-killed", f"msg_{n}", 2000) for n in range(4)]),
    )  # fmt: skip
    assert Session.objects.get().needs_derive
    errors: list = []
    with TableLock("traces_run") as lock:  # the derive waits to write its runs
        run = in_thread(lambda: derive_pending_run(workspace_id=workspace.pk), errors)
        pid = lock.wait_for_waiter()
        with lock.connection.cursor() as cursor:  # the worker dies: its transaction is gone
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        run.join()
    assert len(errors) == 1  # the killed run lost its connection
    session = Session.objects.get()
    assert session.needs_derive and session.call_count == 0
    # No request comes to queue another run: the beat's sweep does (run in-process here).
    assert derive_pending_queue_all() == [workspace.pk]
    assert_sessions_match_their_calls(workspace)
    assert Session.objects.get().call_count == 4


@pytest.mark.celery_worker
def test_concurrent_requests_with_a_worker_leave_every_session_derived(
    live_server, celery_worker, workspace, members, monkeypatch
):
    """8 clients post spans at once, while a real worker derives in the background; once
    it is idle, every session's totals equal its calls. Each request names sessions new
    to all (and sent by every client at once), sessions of its client's, and sessions no
    other request names (nothing marks those again if the request's own mark is lost)."""
    import requests

    from governance.services import api_token_create
    from traces import services

    # A derive run queued by every request instead of one per 2 s: many more runs overlap
    # the requests, which is where the races are.
    monkeypatch.setattr(services.derivation, "DERIVE_DEBOUNCE_SECONDS", 0)

    token = api_token_create(workspace=workspace, user=members["editor"]).plaintext
    clients, rounds = 8, 25

    def post_all(client: int) -> None:
        with requests.Session() as http:
            http.headers.update(
                {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            )
            for step in range(rounds):
                spans = [
                    (f"shared-{step}-{n}", f"c{client}-s{step}-{n}", 100 + n) for n in range(4)
                ]
                spans += [(f"own-{client}-{step // 5}", f"c{client}-s{step}-own{n}", 50) for n in range(3)]  # fmt: skip
                spans += [(f"once-{client}-{step}-{n}", f"c{client}-s{step}-once{n}", 10) for n in range(3)]  # fmt: skip
                response = http.post(f"{live_server.url}/v1/traces", data=otlp_body(spans))
                assert response.status_code == 200, response.text

    errors: list = []
    threads = [in_thread(lambda client=client: post_all(client), errors) for client in range(clients)]  # fmt: skip
    for thread in threads:
        thread.join()
    assert errors == []
    assert Call.objects.count() == clients * rounds * 10
    wait_until_the_worker_is_idle()
    assert Session.objects.count() == rounds * 4 + clients * 5 + clients * rounds * 3
    assert_sessions_match_their_calls(workspace)


def wait_until_the_worker_is_idle(timeout: float = 120) -> None:
    """Until no task waits in the broker's ingest queue and the (in-process) worker holds
    none, twice in a row."""
    from celery.worker import state

    from governance.celery import app

    deadline = time.monotonic() + timeout
    idle_checks = 0
    while idle_checks < 2:
        assert time.monotonic() < deadline, "the derive queue did not drain"
        time.sleep(0.3)
        with app.connection_for_read() as broker:
            waiting = broker.default_channel.client.llen("ingest")
        busy = waiting or state.active_requests or state.reserved_requests
        idle_checks = 0 if busy else idle_checks + 1
