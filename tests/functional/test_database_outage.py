"""Database servers that go away and come back, on private MariaDB and
PostgreSQL servers of the test's own (tests/db_servers.py; the machine's
servers are never stopped):

- the service started before its database server waits for it, saying so,
  and gives up after the configured attempts;
- two uwsgi worker processes under concurrent claims, deletes and reads
  while the server's connections are killed, and while the server is
  stopped for a few seconds and started again: no 500, only 503s with
  Retry-After while it is down, the health check 503 meanwhile, every
  request sent after its return served, and no allocation lost,
  duplicated or over capacity.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import uuid

import pytest

from placement import errors
from tests import db_servers
from tests.fixtures import ops, storm
from tests.fixtures.storm import ADMIN

pytestmark = pytest.mark.slow

PROVIDERS = 2
VCPU_PER_PROVIDER = 24
WRITERS = 4
READERS = 2
# The load's timeline, in seconds: steady, connections killed, the server
# stopped (longer than a write's retries last: see placement.db.api), back,
# connections killed again.
STEADY = 1.5
BETWEEN_KILLS = 0.7
DOWN = 5.0
AFTER_RETURN = 3.0


@pytest.fixture(scope="module", params=[
    pytest.param(backend, marks=pytest.mark.backend(backend)) for backend in db_servers.SERVERS])
def server(request):
    server = db_servers.SERVERS[request.param]()
    try:
        server.start()
        yield server
    finally:
        server.close()


def _service_env(url: str, config_dir: str, **options: str) -> dict:
    return {"OS_PLACEMENT_CONFIG_DIR": config_dir,
            "OS_PLACEMENT_DATABASE__CONNECTION": url,
            "OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP": "True",
            "OS_API__AUTH_STRATEGY": "noauth2",
            **{f"OS_PLACEMENT_DATABASE__{name.upper()}": value
               for name, value in options.items()}}


def _api_process(url: str, tmp_path, **options: str) -> ops.Server:
    return ops.api_server(ops.free_port(), _service_env(url, str(tmp_path), **options))


WAITING = "cannot be reached (attempt {} of {})"


def test_start_up_waits_for_the_database_server(server, tmp_path):
    url = server.create_database(f"startup_{uuid.uuid4().hex[:8]}")
    server.stop()
    try:
        # Gives up after its attempts, and says so.
        gives_up = _api_process(url, tmp_path, max_retries="2", retry_interval="0")
        assert gives_up.process.wait(timeout=60) != 0
        assert WAITING.format(1, 2) in gives_up.output()
        assert "gave up after 2 attempts" in gives_up.output()

        waiting = _api_process(url, tmp_path, max_retries="60", retry_interval="1")
        try:
            waiting.wait_for_output(WAITING.format(1, 60))
            server.start()
            waiting.wait_until_serving()
            status, _, body = ops.request(waiting.url + "/resource_providers", method="POST",
                                          headers=ADMIN, body={"name": "after-the-wait"})
            assert status == 200, body
        finally:
            waiting.stop()
    finally:
        server.start()
    assert "Traceback" not in waiting.output(), waiting.output()


@dataclasses.dataclass
class Timeline:
    """When the test did what (time.monotonic())."""
    # (from, to) of each killing of the connections: a request it cut off
    # overlaps it, but may have started after its start (killing the
    # connections one by one takes a while, longer on a busy machine)
    kills: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    stopping: float = 0.0
    stopped: float = 0.0
    starting: float = 0.0
    back: float = 0.0


def _uwsgi(url: str, tmp_path) -> ops.Server:
    assert ops.UWSGI, "uwsgi is part of the test extra: pip install -e '.[test]'"
    port = ops.free_port()
    # Two processes of the recipe's four threads: a thread is free for the
    # health check while every client waits on a write being retried.
    command = [ops.UWSGI, "--ini", ops.UWSGI_RECIPE, "--http-socket", f"127.0.0.1:{port}",
               "--processes", "2", "--virtualenv", sys.prefix, "--pythonpath", ops.REPO_ROOT]
    return ops.Server(command, port, env=_service_env(url, str(tmp_path)), cwd=ops.REPO_ROOT)


def _run_outage(server: db_servers.PrivateServer, url: str, load: storm.Load) -> Timeline:
    timeline = Timeline()

    def kill_twice() -> None:
        for _ in range(2):
            time.sleep(BETWEEN_KILLS)
            killing = time.monotonic()
            server.kill_connections(url)
            timeline.kills.append((killing, time.monotonic()))

    with load:
        time.sleep(STEADY)
        kill_twice()
        time.sleep(BETWEEN_KILLS)
        timeline.stopping = time.monotonic()
        server.stop()
        timeline.stopped = time.monotonic()
        time.sleep(DOWN)
        timeline.starting = time.monotonic()
        server.start()
        timeline.back = time.monotonic()
        time.sleep(AFTER_RETURN)
        kill_twice()
        time.sleep(BETWEEN_KILLS)
    return timeline


def _during(answer: storm.Answer, start: float, end: float) -> bool:
    return answer.started <= end and answer.ended >= start


def _cut_by_a_kill(answer: storm.Answer, timeline: Timeline) -> bool:
    return any(_during(answer, start, end) for start, end in timeline.kills)


def test_claims_and_deletes_through_an_outage(server, tmp_path, report):
    url = server.create_database(f"outage_{uuid.uuid4().hex[:8]}")
    with _uwsgi(url, tmp_path) as uwsgi:
        uwsgi.wait_for_output("WSGI app 0 (mountpoint='') ready", count=2)
        providers = storm.seed(uwsgi.url, PROVIDERS, VCPU_PER_PROVIDER, name="outage")
        load = storm.Load([uwsgi.url], providers, WRITERS, READERS)
        timeline = _run_outage(server, url, load)
        held = storm.check_claims(load, uwsgi.url, VCPU_PER_PROVIDER)
    answers = load.answers

    statuses = {answer.status for answer in answers}
    assert statuses <= {200, 204, 409, 503}, [
        answer for answer in answers if answer.status not in (200, 204, 409, 503)]
    unavailable = [answer for answer in answers if answer.status == 503]
    for answer in unavailable:
        assert storm.is_database_unavailable(answer), answer
        # While the server was down; else a write whose commit a kill cut
        # off, which is not run again (its outcome is unknown).
        if not _during(answer, timeline.stopping, timeline.back):
            assert answer.method != "GET", answer
            assert "may or may not have been made" in answer.error["detail"], answer
            assert _cut_by_a_kill(answer, timeline), answer
    # Reads are answered at once; writes after their retries, if the server
    # is still down by then.
    down = [answer for answer in answers  # from "stopped" to "starting" at least
            if timeline.stopped < answer.started and answer.ended < timeline.starting]
    assert any(answer.status == 503 and answer.method == "GET" for answer in down)
    # Every request sent once the server was back was served: no stale
    # connection, no restart. (But for writes whose commit the later kills
    # cut off, checked above.)
    after_return = [answer for answer in answers if answer.started > timeline.back]
    assert after_return
    assert [answer for answer in after_return
            if answer.status == 503 and not _cut_by_a_kill(answer, timeline)] == []
    first_served = min(answer.ended for answer in answers
                       if answer.ended > timeline.back and answer.status < 300)

    probes_down = [probe.status for probe in load.probes
                   if timeline.stopped < probe.sent and probe.answered < timeline.starting]
    assert probes_down and set(probes_down) == {503}, load.probes
    assert [probe.status for probe in load.probes if probe.sent > timeline.back][-1] == 200

    # Some claims were refused for want of capacity, not for a race.
    assert any(answer.status == 409 and answer.error["code"] != errors.CONCURRENT_UPDATE
               for answer in answers)

    output = uwsgi.output()
    # (oslo.db logs a traceback for each write that ran out of retries.)
    for failure in ("Unexpected error serving", "Internal Server Error"):
        assert failure not in output, output
    assert len(ops.uwsgi_serving_pids(output)) == 2, output

    report(f"outage ({server.backend}): {len(answers)} requests, "
           f"{sum(a.status == 500 for a in answers)} x 500, {len(unavailable)} x 503 "
           f"({len([a for a in unavailable if _during(a, timeline.stopping, timeline.back)])} "
           f"while down), {len(after_return)} requests after the return served (but "
           f"commits the later kills cut), first "
           f"answer served {first_served - timeline.back:.3f} s after the return; health "
           f"check 503 x {len(probes_down)} while down; {load.outcomes()}, {len(held)} held")
