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
import json
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from placement import errors
from tests import db_servers
from tests.fixtures import ops

ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}
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
class Answer:
    method: str
    path: str
    started: float
    ended: float
    status: int
    retry_after: str | None
    error: dict | None


@dataclasses.dataclass
class Timeline:
    """When the test did what (time.monotonic())."""
    kills: list[float] = dataclasses.field(default_factory=list)
    stopping: float = 0.0
    stopped: float = 0.0
    starting: float = 0.0
    back: float = 0.0


class Load:
    """Writers claiming one VCPU for new consumers on random providers and
    deleting half of their claims, readers reading usages and allocation
    candidates, recording every answer; and a load balancer probing
    /healthcheck."""

    def __init__(self, url: str, providers: list[str]):
        self.url = url
        self.providers = providers
        self.answers: list[Answer] = []
        # (sent, answered, status) of every /healthcheck probe.
        self.probes: list[tuple[float, float, int]] = []
        # consumer -> provider of every claim sent, and the status of the
        # claim and of its delete (when one was sent).
        self.claims: dict[str, str] = {}
        self.claim_status: dict[str, int] = {}
        self.delete_status: dict[str, int] = {}
        # What made a client stop (an exception): none may.
        self.failures: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        clients = [(self._writer, number) for number in range(WRITERS)]
        clients += [(self._reader, number) for number in range(READERS)]
        clients.append((self._probe, 0))
        self._threads = [threading.Thread(target=self._until_stopped, args=client)
                         for client in clients]

    def _until_stopped(self, step: Callable[[random.Random], None], number: int) -> None:
        chance = random.Random(number)
        try:
            while not self._stop.is_set():
                step(chance)
        except BaseException as error:  # reported by the test
            self.failures.append(error)

    def _send(self, method: str, path: str, body: dict | None = None) -> Answer:
        started = time.monotonic()
        status, headers, raw = ops.request(self.url + path, method=method, headers=ADMIN,
                                           body=body)
        error = json.loads(raw)["errors"][0] if status >= 400 and raw else None
        answer = Answer(method, path, started, time.monotonic(), status,
                        headers.get("retry-after"), error)
        with self._lock:
            self.answers.append(answer)
        return answer

    def _writer(self, chance: random.Random) -> None:
        provider, consumer = chance.choice(self.providers), str(uuid.uuid4())
        self.claims[consumer] = provider
        self.claim_status[consumer] = self._send("PUT", f"/allocations/{consumer}", {
            "allocations": {provider: {"resources": {"VCPU": 1}}},
            "project_id": "project", "user_id": "user", "consumer_generation": None,
            "consumer_type": "INSTANCE"}).status
        if self.claim_status[consumer] == 204 and chance.random() < 0.5:
            self.delete_status[consumer] = self._send(
                "DELETE", f"/allocations/{consumer}").status

    def _reader(self, chance: random.Random) -> None:
        self._send("GET", f"/resource_providers/{chance.choice(self.providers)}/usages")
        self._send("GET", "/allocation_candidates?resources=VCPU:1&limit=5")

    def _probe(self, _chance: random.Random) -> None:
        sent = time.monotonic()
        status, _, _ = ops.request(self.url + "/healthcheck")
        with self._lock:
            self.probes.append((sent, time.monotonic(), status))
        time.sleep(0.1)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def _uwsgi(url: str, tmp_path) -> ops.Server:
    assert ops.UWSGI, "uwsgi is part of the test extra: pip install -e '.[test]'"
    port = ops.free_port()
    # Two processes of the recipe's four threads: a thread is free for the
    # health check while every client waits on a write being retried.
    command = [ops.UWSGI, "--ini", ops.UWSGI_RECIPE, "--http-socket", f"127.0.0.1:{port}",
               "--processes", "2", "--virtualenv", sys.prefix, "--pythonpath", ops.REPO_ROOT]
    return ops.Server(command, port, env=_service_env(url, str(tmp_path)), cwd=ops.REPO_ROOT)


def _seed(url: str) -> list[str]:
    providers = []
    for number in range(PROVIDERS):
        provider = str(uuid.uuid4())
        status, _, body = ops.request(url + "/resource_providers", method="POST", headers=ADMIN,
                                      body={"name": f"outage-{number}", "uuid": provider})
        assert status == 200, body
        status, _, body = ops.request(
            f"{url}/resource_providers/{provider}/inventories", method="PUT", headers=ADMIN,
            body={"resource_provider_generation": 0,
                  "inventories": {"VCPU": {"total": VCPU_PER_PROVIDER}}})
        assert status == 200, body
        providers.append(provider)
    return providers


def _run_outage(server: db_servers.PrivateServer, url: str, load: Load) -> Timeline:
    timeline = Timeline()

    def kill_twice() -> None:
        for _ in range(2):
            time.sleep(BETWEEN_KILLS)
            timeline.kills.append(time.monotonic())
            server.kill_connections(url)
            timeline.kills.append(time.monotonic())

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


def _during(answer: Answer, start: float, end: float) -> bool:
    return answer.started <= end and answer.ended >= start


def _allocations_held(url: str, providers: list[str]) -> dict[str, dict[str, dict]]:
    """consumer -> provider -> resources, as every provider lists them."""
    held: dict[str, dict[str, dict]] = {}
    for provider in providers:
        status, _, body = ops.request(f"{url}/resource_providers/{provider}/allocations",
                                      headers=ADMIN)
        assert status == 200, body
        for consumer, allocation in json.loads(body)["allocations"].items():
            held.setdefault(consumer, {})[provider] = allocation["resources"]
    return held


def _usages(url: str, provider: str) -> int:
    status, _, body = ops.request(f"{url}/resource_providers/{provider}/usages", headers=ADMIN)
    assert status == 200, body
    return json.loads(body)["usages"]["VCPU"]


def test_claims_and_deletes_through_an_outage(server, tmp_path, report):
    url = server.create_database(f"outage_{uuid.uuid4().hex[:8]}")
    with _uwsgi(url, tmp_path) as uwsgi:
        uwsgi.wait_for_output("WSGI app 0 (mountpoint='') ready", count=2)
        providers = _seed(uwsgi.url)
        load = Load(uwsgi.url, providers)
        timeline = _run_outage(server, url, load)
        held = _allocations_held(uwsgi.url, providers)
        usages = {provider: _usages(uwsgi.url, provider) for provider in providers}
    answers = load.answers

    statuses = {answer.status for answer in answers}
    assert statuses <= {200, 204, 409, 503}, [
        answer for answer in answers if answer.status not in (200, 204, 409, 503)]
    unavailable = [answer for answer in answers if answer.status == 503]
    for answer in unavailable:
        assert answer.retry_after == str(errors.RETRY_AFTER_SECONDS), answer
        assert answer.error["code"] == errors.DATABASE_UNAVAILABLE, answer
        # While the server was down; else a write whose commit a kill cut
        # off, which is not run again (its outcome is unknown).
        if not _during(answer, timeline.stopping, timeline.back):
            assert answer.method != "GET", answer
            assert "may or may not have been made" in answer.error["detail"], answer
            assert any(answer.started <= kill <= answer.ended for kill in timeline.kills), answer
    # Reads are answered at once; writes after their retries, if the server
    # is still down by then.
    down = [answer for answer in answers  # from "stopped" to "starting" at least
            if timeline.stopped < answer.started and answer.ended < timeline.starting]
    assert any(answer.status == 503 and answer.method == "GET" for answer in down)
    # Every request sent once the server was back was served: no stale
    # connection, no restart.
    after_return = [answer for answer in answers if answer.started > timeline.back]
    assert after_return and all(answer.status != 503 for answer in after_return)
    first_served = min(answer.ended for answer in answers
                       if answer.ended > timeline.back and answer.status < 300)

    probes_down = [status for sent, answered, status in load.probes
                   if timeline.stopped < sent and answered < timeline.starting]
    assert probes_down and set(probes_down) == {503}, load.probes
    assert [status for sent, _, status in load.probes if sent > timeline.back][-1] == 200

    # No claim lost, none written twice, none over capacity. A claim (or
    # delete) answered 503 may have been written or not.
    assert load.failures == []
    claimed = {consumer for consumer, status in load.claim_status.items() if status == 204}
    refused = {consumer for consumer, status in load.claim_status.items() if status == 409}
    deleted = {consumer for consumer, status in load.delete_status.items() if status == 204}
    assert claimed and refused and deleted
    for consumer in claimed - set(load.delete_status):
        assert consumer in held, consumer
    for consumer in refused | deleted:
        assert consumer not in held, consumer
    for consumer, allocations in held.items():
        assert allocations == {load.claims[consumer]: {"VCPU": 1}}, consumer
    for provider in providers:
        holding = [consumer for consumer, where in held.items() if provider in where]
        assert usages[provider] == len(holding) <= VCPU_PER_PROVIDER
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
           f"while down), {len(after_return)} requests after the return all served, first "
           f"answer served {first_served - timeline.back:.3f} s after the return; health "
           f"check 503 x {len(probes_down)} while down; {len(claimed)} claims, "
           f"{len(refused)} refused, {len(deleted)} deleted, {len(held)} held")
