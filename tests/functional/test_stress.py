"""Racing schedulers against the real server, on every backend.

Several ``placement.cmd.api`` processes serve one database. Clients (threads
here) do what schedulers do: look up allocation candidates and claim one for
a new consumer (``PUT /allocations`` at 1.39 with ``consumer_generation:
null``); they also release claims (PUT ``{}`` with the consumer generation)
and send writes with a stale consumer generation. Providers have little
capacity, so claims collide all the time.

Every answer is recorded, then checked against the database and the API:

* for every provider and class, usage never exceeds
  ``(total - reserved) * allocation_ratio`` (watched during the run, too);
* every consumer holds exactly what its last 204 gave it: a claim answered
  204 is there, a claim answered 409 left nothing, a release left nothing;
* the allocations add up to the usages the API reports.

The racing test runs on SQLite too (the processes share one file). The
fault test kills the database server's connections while clients claim,
then checks that the same server processes answer again and that no consumer
holds part of a claim.
"""

from __future__ import annotations

import collections
import random
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa

from placement.db import tables
from tests import db as test_db
from tests.fixtures.servers import Client, Servers, servers_on

pytestmark = pytest.mark.slow

PROJECT_ID = str(uuid.uuid4())
USER_ID = str(uuid.uuid4())

SERVER_PROCESSES = 3
CLIENTS = 32
ITERATIONS_PER_CLIENT = 25
PROVIDERS = 8
# Small providers: a handful of claims fill one.
INVENTORY = {
    "VCPU": {"total": 16, "reserved": 2, "allocation_ratio": 1.5, "max_unit": 16},
    "MEMORY_MB": {"total": 4096, "reserved": 512, "allocation_ratio": 1.0, "max_unit": 4096},
}


def _create_providers(client: Client, count: int = PROVIDERS, name: str = "stress") -> list[str]:
    provider_uuids = []
    for index in range(count):
        provider_uuid = str(uuid.uuid4())
        status, body = client.request("POST", "/resource_providers",
                                      {"name": f"{name}-{index}", "uuid": provider_uuid})
        assert status == 200, body
        status, body = client.request(
            "PUT", f"/resource_providers/{provider_uuid}/inventories",
            {"resource_provider_generation": 0, "inventories": INVENTORY})
        assert status == 200, body
        provider_uuids.append(provider_uuid)
    return provider_uuids


def _capacity(resource_class: str) -> float:
    inventory = INVENTORY[resource_class]
    return (inventory["total"] - inventory["reserved"]) * inventory["allocation_ratio"]


@dataclass
class Ledger:
    """What the clients were told, to be compared with what is stored."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    # consumer uuid -> {provider uuid: {class: amount}} of its last 204 ({} when released).
    expected: dict[str, dict] = field(default_factory=dict)
    # consumer uuid -> every allocation it asked for in a claim whose answer was lost.
    uncertain: dict[str, dict] = field(default_factory=dict)
    statuses: collections.Counter = field(default_factory=collections.Counter)
    claims: int = 0
    over_commits: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    def count(self, kind: str, status: int, body: object = None) -> None:
        """Counts answers by kind, status and (for errors) error code."""
        key = f"{kind} {status}"
        if status >= 400 and isinstance(body, dict) and body.get("errors"):
            key += f" {body['errors'][0].get('code')}"
        with self.lock:
            self.statuses[key] += 1

    def answered(self, kind: str, status: int) -> int:
        return sum(count for key, count in self.statuses.items()
                   if key.startswith(f"{kind} {status}"))


def _resources(allocations: dict) -> dict:
    """{provider uuid: {class: amount}} of an ``allocations`` object of the API."""
    return {provider: dict(allocation["resources"])
            for provider, allocation in allocations.items()}


def _write_body(allocations: dict, generation: int | None) -> dict:
    return {"allocations": allocations, "consumer_generation": generation,
            "project_id": PROJECT_ID, "user_id": USER_ID, "consumer_type": "INSTANCE"}


def _outcome_unknown(status: int) -> bool:
    """A server error, or no answer (0): the write may or may not have happened."""
    return status == 0 or status >= 500


class Scheduler:
    """One client: claims, releases and stale writes, told apart by chance."""

    def __init__(self, client: Client, ledger: Ledger, seed: int,
                 tolerate_server_errors: bool = False) -> None:
        self.client = client
        self.ledger = ledger
        self.random = random.Random(seed)
        self.tolerate_server_errors = tolerate_server_errors
        # consumer uuid -> generation, for the consumers this client holds.
        self.held: dict[str, int] = {}

    def step(self) -> None:
        choice = self.random.random()
        if self.held and choice < 0.2:
            self.release()
        elif self.held and choice < 0.3:
            self.write_with_stale_generation()
        else:
            self.claim()

    def _unexpected(self, kind: str, status: int, body: object) -> None:
        if _outcome_unknown(status) and self.tolerate_server_errors:
            return
        with self.ledger.lock:
            self.ledger.unexpected.append(f"{kind}: {status} {body}")

    def claim(self) -> None:
        vcpus = self.random.randint(1, 4)
        memory = self.random.choice((256, 512, 1024))
        status, body = self.client.request(
            "GET", f"/allocation_candidates?resources=VCPU:{vcpus},MEMORY_MB:{memory}&limit=5")
        self.ledger.count("candidates", status, body)
        if status != 200:
            self._unexpected("candidates", status, body)
            return
        if not body["allocation_requests"]:
            return  # everything is full for now
        allocations = self.random.choice(body["allocation_requests"])["allocations"]
        consumer_uuid = str(uuid.uuid4())
        status, body = self.client.request(
            "PUT", f"/allocations/{consumer_uuid}", _write_body(allocations, None))
        self.ledger.count("claim", status, body)
        asked = _resources(allocations)
        with self.ledger.lock:
            if status == 204:
                self.ledger.claims += 1
                self.ledger.expected[consumer_uuid] = asked
            elif status == 409:
                self.ledger.expected[consumer_uuid] = {}
            else:
                self.ledger.uncertain[consumer_uuid] = asked
        if status == 204:
            self.held[consumer_uuid] = 1
        elif status != 409:
            self._unexpected("claim", status, body)

    def release(self) -> None:
        consumer_uuid = self.random.choice(sorted(self.held))
        status, body = self.client.request(
            "PUT", f"/allocations/{consumer_uuid}", _write_body({}, self.held[consumer_uuid]))
        self.ledger.count("release", status, body)
        if status == 204:
            del self.held[consumer_uuid]
            with self.ledger.lock:
                self.ledger.expected[consumer_uuid] = {}
        elif status == 409 and body["errors"][0]["code"] == "placement.concurrent_update":
            # Lost the provider generation race on every server-side retry
            # (allocation_conflict_retry_count): nothing changed, still held.
            return
        else:
            self._unexpected("release", status, body)
            if _outcome_unknown(status):
                # Whether it happened is unknown; stop touching this consumer.
                del self.held[consumer_uuid]
                with self.ledger.lock:
                    self.ledger.uncertain[consumer_uuid] = self.ledger.expected.pop(
                        consumer_uuid)

    def write_with_stale_generation(self) -> None:
        consumer_uuid = self.random.choice(sorted(self.held))
        stale = self.held[consumer_uuid] - 1
        status, body = self.client.request(
            "PUT", f"/allocations/{consumer_uuid}", _write_body({}, stale))
        self.ledger.count("stale write", status, body)
        if status != 409 or body["errors"][0]["code"] != "placement.concurrent_update":
            self._unexpected("stale write", status, body)


class UsageWatcher(threading.Thread):
    """Reads every provider's usages over and over while the clients run."""

    def __init__(self, client: Client, provider_uuids: list[str], ledger: Ledger) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.provider_uuids = provider_uuids
        self.ledger = ledger
        self.done = threading.Event()
        self.readings = 0

    def run(self) -> None:
        while not self.done.is_set():
            for provider_uuid in self.provider_uuids:
                try:
                    status, body = self.client.request(
                        "GET", f"/resource_providers/{provider_uuid}/usages")
                except OSError:
                    continue  # the fault test kills things; the final check still runs
                if status != 200:
                    continue
                self.readings += 1
                _record_over_commits(self.ledger, provider_uuid, body["usages"])


def _record_over_commits(ledger: Ledger, provider_uuid: str, usages: dict) -> None:
    for resource_class, used in usages.items():
        if used > _capacity(resource_class):
            with ledger.lock:
                ledger.over_commits.append(f"{provider_uuid} {resource_class} {used}")


def _run_schedulers(servers: Servers, provider_uuids: list[str], ledger: Ledger,
                    iterations: int, tolerate_server_errors: bool = False,
                    while_running=None) -> float:
    """Runs CLIENTS schedulers for ``iterations`` steps each; returns seconds."""
    schedulers = [Scheduler(servers.client(index), ledger, seed=index,
                            tolerate_server_errors=tolerate_server_errors)
                  for index in range(CLIENTS)]
    watcher = UsageWatcher(servers.client(0), provider_uuids, ledger)
    failures = []

    def run(scheduler: Scheduler) -> None:
        try:
            for _ in range(iterations):
                scheduler.step()
        except Exception as error:  # reported by the test
            failures.append(repr(error))

    threads = [threading.Thread(target=run, args=(scheduler,)) for scheduler in schedulers]
    started = time.monotonic()
    watcher.start()
    for thread in threads:
        thread.start()
    if while_running is not None:
        while_running()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    watcher.done.set()
    watcher.join()
    for scheduler in schedulers:
        scheduler.client.close()
    assert failures == []
    assert watcher.readings > 0
    return elapsed


def _stored_allocations(database_url: str) -> dict[str, dict]:
    """consumer uuid -> {provider uuid: {class: amount}}, read from the database."""
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    allocations, providers, classes = (
        tables.allocations, tables.resource_providers, tables.resource_classes)
    query = sa.select(allocations.c.consumer_id, providers.c.uuid, classes.c.name,
                      allocations.c.used).select_from(
        allocations.join(providers, providers.c.id == allocations.c.resource_provider_id)
        .join(classes, classes.c.id == allocations.c.resource_class_id))
    stored: dict[str, dict] = collections.defaultdict(dict)
    try:
        with engine.connect() as connection:
            for consumer_uuid, provider_uuid, resource_class, used in connection.execute(query):
                stored[consumer_uuid].setdefault(provider_uuid, {})[resource_class] = used
    finally:
        engine.dispose()
    return dict(stored)


def _check_consistency(client: Client, database_url: str, provider_uuids: list[str],
                       ledger: Ledger) -> str:
    """The checks of the module docstring; returns a summary of them."""
    stored = _stored_allocations(database_url)

    lost_or_phantom = []
    for consumer_uuid, expected in ledger.expected.items():
        if stored.get(consumer_uuid, {}) != expected:
            lost_or_phantom.append((consumer_uuid, expected, stored.get(consumer_uuid)))
    # A claim whose answer was lost (fault test) must be all there or not at all.
    half_written = [(consumer_uuid, asked, stored[consumer_uuid])
                    for consumer_uuid, asked in ledger.uncertain.items()
                    if consumer_uuid in stored and stored[consumer_uuid] != asked]
    unknown = set(stored) - set(ledger.expected) - set(ledger.uncertain)

    summed: dict[tuple[str, str], int] = collections.Counter()
    for allocations in stored.values():
        for provider_uuid, resources in allocations.items():
            for resource_class, used in resources.items():
                summed[(provider_uuid, resource_class)] += used
    mismatched_usages = []
    for provider_uuid in provider_uuids:
        status, body = client.request("GET", f"/resource_providers/{provider_uuid}/usages")
        assert status == 200, body
        _record_over_commits(ledger, provider_uuid, body["usages"])
        for resource_class, used in body["usages"].items():
            if used != summed[(provider_uuid, resource_class)]:
                mismatched_usages.append((provider_uuid, resource_class, used,
                                          summed[(provider_uuid, resource_class)]))
    # The API's view of the consumers matches the database's.
    for consumer_uuid in list(stored)[:20]:
        status, body = client.request("GET", f"/allocations/{consumer_uuid}")
        assert status == 200, body
        assert _resources(body["allocations"]) == stored[consumer_uuid]

    assert ledger.over_commits == []
    assert lost_or_phantom == []
    assert half_written == []
    assert unknown == set()
    assert mismatched_usages == []
    return (f"{len(ledger.over_commits)} over-commits, "
            f"{len(lost_or_phantom) + len(unknown)} lost or phantom allocations, "
            f"{len(half_written)} half-written of {len(ledger.uncertain)} unanswered writes, "
            f"{len(mismatched_usages)} usages not matching the allocations "
            f"({len(ledger.expected)} consumers, {len(stored)} holding allocations)")


def test_racing_claims_never_over_commit_nor_lose_allocations(backend, tmp_path, report):
    # On SQLite too: the server processes share one database file.
    with servers_on(backend, str(tmp_path), SERVER_PROCESSES) as (running, database_url):
        _race(running, database_url, backend, report)


def _race(running: Servers, database_url: str, backend: str, report) -> None:
    admin = running.client(0)
    provider_uuids = _create_providers(admin)
    ledger = Ledger()

    elapsed = _run_schedulers(running, provider_uuids, ledger, ITERATIONS_PER_CLIENT)

    assert ledger.unexpected == []
    checked = _check_consistency(admin, database_url, provider_uuids, ledger)
    # The providers were small enough for claims to collide and fill them.
    assert ledger.answered("claim", 204) > 0
    assert ledger.answered("claim", 409) > 0
    assert ledger.answered("stale write", 409) > 0
    requests = sum(ledger.statuses.values())
    report(f"stress [{backend}]: {SERVER_PROCESSES} server processes, {CLIENTS} clients: "
           f"{ledger.claims} claims in {elapsed:.1f}s = {ledger.claims / elapsed:.1f} claims/s, "
           f"{requests / elapsed:.1f} requests/s; {checked}; "
           f"answers: {dict(sorted(ledger.statuses.items()))}")
    assert running.all_running(), running.logs()


def test_service_recovers_when_database_connections_are_killed(server_backend, tmp_path,
                                                                report):
    with servers_on(server_backend, str(tmp_path), SERVER_PROCESSES) as (running, database_url):
        _kill_connections_under_load(running, database_url, server_backend, report)


def _kill_connections_under_load(running: Servers, database_url: str, server_backend: str,
                                 report) -> None:
    admin = running.client(0)
    provider_uuids = _create_providers(admin)
    ledger = Ledger()
    killed = []

    def kill_connections_three_times() -> None:
        for _ in range(3):
            time.sleep(1.0)
            killed.append(test_db.kill_connections(database_url))

    _run_schedulers(running, provider_uuids, ledger, ITERATIONS_PER_CLIENT,
                    tolerate_server_errors=True, while_running=kill_connections_three_times)

    assert sum(killed) > 0
    # Only server errors (the killed transactions) were unexpected.
    assert ledger.unexpected == []
    assert running.all_running(), running.logs()
    # The same processes answer again, writes and reads, each of them.
    for index in range(SERVER_PROCESSES):
        client = running.client(index)
        provider_uuid = _create_providers(client, count=1, name=f"after-fault-{index}")[0]
        provider_uuids.append(provider_uuid)
        status, body = client.request(
            "GET", f"/allocation_candidates?resources=VCPU:1&in_tree={provider_uuid}")
        assert status == 200, body
        allocations = body["allocation_requests"][0]["allocations"]
        consumer_uuid = str(uuid.uuid4())
        status, body = client.request("PUT", f"/allocations/{consumer_uuid}",
                                      _write_body(allocations, None))
        assert status == 204, body
        ledger.expected[consumer_uuid] = _resources(allocations)
    checked = _check_consistency(admin, database_url, provider_uuids, ledger)
    report(f"fault [{server_backend}]: killed {killed} connections under load, then every "
           f"server process answered and claimed again; {checked}; "
           f"answers: {dict(sorted(ledger.statuses.items()))}")
