"""A mixed-fleet storm: the original OpenStack Placement service and this one
on ONE database, behind ONE address, both taking writes.

The original (openstack-placement 16.0.0, run as a black box by
tests/fixtures/original.py: uwsgi, two processes) creates the
schema on an empty database; then this project's ``placement-manage db
sync`` runs on it, and one ``placement-api`` process of ours starts
(tests/fixtures/servers.py). A round-robin reverse proxy written here (stdlib
only) puts both behind one port: consecutive requests go to different
fleets, so that a claim acknowledged by one is deleted through the other and
a provider created by one gets its inventory from the other.

Through the proxy: a few small computes (VCPU, MEMORY_MB) and a DISK_GB
provider shared with them by aggregate, then for ``STORM_SECONDS`` client
threads race as schedulers do: GET /allocation_candidates, PUT
/allocations/{new consumer} (1.28 and 1.39, ``consumer_generation: null``)
of the first candidate, POST /allocations moving an earlier claim (any
client's) as Nova migrates (the instance to its first candidate, a new
migration consumer holding what it held), DELETE /allocations/{c} of
earlier claims. Every answer is recorded, with the fleet that gave it (the proxy
says which), and a watcher reads the usages with SQL meanwhile.

Then, reading through BOTH fleets directly and the database with SQL:

* no provider's usage of a class, SUMmed from the allocations table (not
  from our derived columns), exceeds ``(total - reserved) *
  allocation_ratio``, during the storm or after it (but see below);
* every claim answered 204 and not deleted holds exactly its amounts; every
  refused or deleted one holds nothing; a claim or delete without a definite
  answer (the original's 500s) left all of the claim or none of it; nothing
  else holds anything; both fleets list the same allocations and usages;
* ours never answered 5xx (the original may, under races: "database is
  locked" on SQLite; counted and reported, not failed on);
* ``inventories.used`` equals the SUM of the allocations of each inventory:
  our derived state stays right whoever writes (database triggers);
* our reads see the original's writes: usages through ours equal the SQL
  sums, and an inventory changed, a trait set or a provider created through
  the original shows in our GET /allocation_candidates right away (our
  provider cache follows the change record, which the triggers keep).

Over-commits and the original. Alone, the original over-commits under
racing claims on PostgreSQL (measured with this module's storm against one
original service and nothing else: 40 computes, claims only, no deletes,
no sharing provider: a compute ended at 12 VCPU of 10.5, or 2816 MB of
2560, in every run) and on MariaDB (it retries a lost race inside its
REPEATABLE READ transaction). Beside ours it cannot: the database refuses
any allocation row past capacity (placement.db.triggers), whoever writes
it, so no over-commit at all is allowed on any backend; the original's
refused writes are among its 5xx, counted and reported.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import http.client
import http.server
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests import db as test_db
from tests.fixtures import original
from tests.fixtures.servers import REPOSITORY, Servers, json_request

pytestmark = [pytest.mark.slow, pytest.mark.external("original-service")]

STORM_SECONDS = 30
CLIENTS = 8
COMPUTES = 6
# Small computes, so that capacity runs out within seconds and claims race
# at its edge for the rest of the storm: (8 - 1) * 1.5 = 10.5 VCPU and
# 3072 - 512 = 2560 MB each.
COMPUTE_INVENTORY = {
    "VCPU": {"total": 8, "reserved": 1, "allocation_ratio": 1.5},
    "MEMORY_MB": {"total": 3072, "reserved": 512, "allocation_ratio": 1.0},
}
# Shared by aggregate with every compute: 110 GB for claims of 10 to 30.
SHARED_INVENTORY = {"DISK_GB": {"total": 120, "reserved": 10, "allocation_ratio": 1.0}}
# A claim asks for DISK_GB too so often. After a claim, a client deletes
# one (any client's) so often; after finding no room or losing a race, more
# often: the cloud stays at the edge of full, where claims race for the last
# units.
CLAIM_CHANCE_OF_DISK = 0.5
DELETE_CHANCE_AFTER_CLAIM = 0.25
DELETE_CHANCE_OTHERWISE = 0.6
# After a claim, a client moves one (any client's) so often, as Nova
# migrates an instance: POST /allocations gives the instance its place on
# the first candidate and a new migration consumer what the instance held.
MOVE_CHANCE = 0.2

MICROVERSION = "placement 1.39"
PROJECT_ID = str(uuid.uuid4())
USER_ID = str(uuid.uuid4())
# The response header by which the proxy names the fleet that answered.
FLEET_HEADER = "X-Mixed-Fleet"
ORIGINAL, OURS = "original", "ours"
# The fleets whose 5xx are counted and reported, not failed on: the original
# answers 500 when it loses a race (e.g. "database is locked" on SQLite).
MAY_ANSWER_5XX = frozenset({ORIGINAL})
BACKEND_TIMEOUT = 60
CLIENT_TIMEOUT = 90
WATCH_INTERVAL = 0.25



# The original service, as a black box.

@contextlib.contextmanager
def original_service(database_url: str, log_dir: str) -> Iterator[str]:
    """The original service (16.0.0, uwsgi, two processes) serving
    ``database_url``, which it migrates at start-up; its base URL."""
    with original.running(original.installed("16.0.0"), database_url, log_dir) as client:
        yield f"http://127.0.0.1:{client.port}"


# HTTP: the clients' calls and the proxy.

def _call(url: str, method: str, path: str, body: object = None,
          version: str = MICROVERSION) -> tuple[int, str, object]:
    """Status (0: no answer), the fleet that answered (through the proxy)
    and the decoded body of one request on a connection of its own."""
    parts = urllib.parse.urlsplit(url)
    headers, payload = json_request(body, version)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CLIENT_TIMEOUT)
    try:
        connection.request(method, path, payload, headers)
        response = connection.getresponse()
        data = response.read()
    except (OSError, http.client.HTTPException):
        return 0, "", None
    finally:
        connection.close()
    try:
        decoded = json.loads(data) if data else None
    except ValueError:
        decoded = data.decode(errors="replace")
    return response.status, response.getheader(FLEET_HEADER, ""), decoded


# Not forwarded either way: they describe one connection, not the message.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate",
                        "proxy-authorization", "te", "trailer", "trailers",
                        "transfer-encoding", "upgrade", "content-length"})


class RoundRobinProxy:
    """One address in front of several backends: each request goes to the
    next backend in turn (method, path, headers and body as received), and
    its answer (status, headers, body) back, with ``FLEET_HEADER`` naming
    the backend. A backend that does not answer makes a 502."""

    def __init__(self, backends: list[tuple[str, str]]) -> None:
        self.backends = [(name, urllib.parse.urlsplit(url)) for name, url in backends]
        # (backend name, status) -> requests it answered so
        self.answers: collections.Counter = collections.Counter()
        self._turn = itertools.count()
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self) -> None:
                proxy._forward(self)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RoundRobinProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(10)

    def _backend(self) -> tuple[str, urllib.parse.SplitResult]:
        with self._lock:
            return self.backends[next(self._turn) % len(self.backends)]

    def _forward(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        name, target = self._backend()
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {key: value for key, value in handler.headers.items()
                   if key.lower() not in HOP_BY_HOP}
        connection = http.client.HTTPConnection(target.hostname, target.port,
                                                timeout=BACKEND_TIMEOUT)
        try:
            connection.request(handler.command, handler.path, body, headers)
            response = connection.getresponse()
            status, reason = response.status, response.reason
            answer_headers, data = response.getheaders(), response.read()
        except (OSError, http.client.HTTPException) as error:
            status, reason = 502, "Bad Gateway"
            answer_headers = [("Content-Type", "text/plain")]
            data = f"{name} did not answer: {error!r}".encode()
        finally:
            connection.close()
        with self._lock:
            self.answers[(name, status)] += 1
        handler.send_response_only(status, reason)
        for key, value in answer_headers:
            if key.lower() not in HOP_BY_HOP:
                handler.send_header(key, value)
        handler.send_header(FLEET_HEADER, name)
        if handler.command == "HEAD":
            handler.send_header("Content-Length", dict(
                (key.lower(), value) for key, value in answer_headers).get("content-length", "0"))
            handler.end_headers()
            return
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def requests(self, name: str) -> int:
        return sum(count for (backend, _), count in self.answers.items() if backend == name)

    def server_errors(self, name: str) -> dict[int, int]:
        return {status: count for (backend, status), count in sorted(self.answers.items())
                if backend == name and status >= 500}


# The database, read with SQL.

def _engine(url: str) -> sa.engine.Engine:
    connect_args = {"timeout": 30} if url.startswith("sqlite") else {}
    return sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args=connect_args)


# Every allocation, and the inventory it draws on (if any): one statement,
# one snapshot.
_ALLOCATED = sa.text(
    "SELECT a.consumer_id, rp.uuid, rc.name, a.used, i.total, i.reserved, "
    "i.allocation_ratio FROM allocations a "
    "JOIN resource_providers rp ON rp.id = a.resource_provider_id "
    "JOIN resource_classes rc ON rc.id = a.resource_class_id "
    "LEFT JOIN inventories i ON i.resource_provider_id = a.resource_provider_id "
    "AND i.resource_class_id = a.resource_class_id")
# Per inventory, the SUM of its allocations.
_INVENTORY_USAGE = sa.text(
    "SELECT rp.uuid, rc.name, COALESCE(SUM(a.used), 0) FROM inventories i "
    "JOIN resource_providers rp ON rp.id = i.resource_provider_id "
    "JOIN resource_classes rc ON rc.id = i.resource_class_id "
    "LEFT JOIN allocations a ON a.resource_provider_id = i.resource_provider_id "
    "AND a.resource_class_id = i.resource_class_id GROUP BY rp.uuid, rc.name")
# Our derived usage of each inventory against the SUM of its allocations.
_DERIVED_USED = sa.text(
    "SELECT rp.uuid, rc.name, i.used, COALESCE(SUM(a.used), 0) FROM inventories i "
    "JOIN resource_providers rp ON rp.id = i.resource_provider_id "
    "JOIN resource_classes rc ON rc.id = i.resource_class_id "
    "LEFT JOIN allocations a ON a.resource_provider_id = i.resource_provider_id "
    "AND a.resource_class_id = i.resource_class_id "
    "GROUP BY rp.uuid, rc.name, i.used")


@dataclasses.dataclass(frozen=True)
class OverCommit:
    """A provider's class used beyond its capacity (None: no inventory of
    it at all), and the consumers holding it."""
    provider: str
    resource_class: str
    used: int
    capacity: float | None
    consumers: frozenset[str]


def _allocated(engine: sa.engine.Engine) -> list[tuple]:
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(_ALLOCATED)]


def sql_held(engine: sa.engine.Engine) -> dict[str, dict[str, dict[str, int]]]:
    """consumer -> provider -> class -> amount, from the allocations table."""
    held: dict[str, dict[str, dict[str, int]]] = {}
    for consumer, provider, resource_class, used, *_ in _allocated(engine):
        held.setdefault(consumer, {}).setdefault(provider, {})[resource_class] = used
    return held


def sql_usages(engine: sa.engine.Engine) -> dict[str, dict[str, int]]:
    """provider -> class -> SUM of its allocations, for every inventory."""
    usages: dict[str, dict[str, int]] = {}
    with engine.connect() as connection:
        for provider, resource_class, used in connection.execute(_INVENTORY_USAGE):
            usages.setdefault(provider, {})[resource_class] = int(used)
    return usages


def sql_over_commits(engine: sa.engine.Engine) -> list[OverCommit]:
    """Every provider's class used beyond ``(total - reserved) *
    allocation_ratio``, SUMmed from the allocations table."""
    used: collections.Counter = collections.Counter()
    capacity: dict[tuple[str, str], float | None] = {}
    consumers: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for consumer, provider, resource_class, amount, total, reserved, ratio in _allocated(engine):
        key = (provider, resource_class)
        used[key] += amount
        capacity[key] = None if total is None else (total - reserved) * ratio
        consumers[key].add(consumer)
    return [OverCommit(*key, used[key], capacity[key], frozenset(consumers[key]))
            for key in used if capacity[key] is None or used[key] > capacity[key]]


def sql_derived_mismatches(engine: sa.engine.Engine) -> list[tuple]:
    """(provider, class, inventories.used, SUM of allocations) wherever they differ."""
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(_DERIVED_USED) if row[2] != row[3]]


# The providers.

@dataclasses.dataclass
class Layout:
    computes: list[str]
    sharing: str
    aggregate: str

    @property
    def providers(self) -> list[str]:
        return [*self.computes, self.sharing]


def _ok(answer: tuple[int, str, object], expected: int = 200) -> object:
    status, fleet, body = answer
    assert status == expected, (fleet, status, body)
    return body


def _post_provider(url: str, name: str, inventories: dict, aggregate: str | None = None,
                   traits: list[str] | None = None) -> str:
    """A provider with ``inventories`` (and an aggregate and traits),
    written through the API of the fleet at ``url``; its uuid. Each write
    names the generation the previous one (maybe through the other fleet)
    answered."""
    provider = str(uuid.uuid4())
    _ok(_call(url, "POST", "/resource_providers", {"name": name, "uuid": provider}))
    generation = _ok(_call(url, "PUT", f"/resource_providers/{provider}/inventories", {
        "resource_provider_generation": 0, "inventories": inventories}))[
        "resource_provider_generation"]
    if traits:
        generation = _ok(_call(url, "PUT", f"/resource_providers/{provider}/traits", {
            "resource_provider_generation": generation, "traits": traits}))[
            "resource_provider_generation"]
    if aggregate:
        _ok(_call(url, "PUT", f"/resource_providers/{provider}/aggregates", {
            "resource_provider_generation": generation, "aggregates": [aggregate]}))
    return provider


def set_up_providers(url: str) -> Layout:
    aggregate = str(uuid.uuid4())
    computes = [_post_provider(url, f"mixed-compute-{number}", COMPUTE_INVENTORY, aggregate)
                for number in range(COMPUTES)]
    sharing = _post_provider(url, "mixed-shared-disk", SHARED_INVENTORY, aggregate,
                               ["MISC_SHARES_VIA_AGGREGATE"])
    return Layout(computes, sharing, aggregate)


# The storm.

def _resources(allocations: dict) -> dict[str, dict[str, int]]:
    """provider -> class -> amount of an API ``allocations`` object."""
    return {provider: dict(allocation["resources"])
            for provider, allocation in allocations.items() if allocation["resources"]}


def _error_code(body: object) -> str:
    if isinstance(body, dict) and body.get("errors"):
        return str(body["errors"][0].get("code"))
    return ""


class Storm:
    """``clients`` schedulers racing through ``url`` (the proxy), one phase
    after the other, and a watcher of the database's usages. What they were
    told accumulates over the phases."""

    def __init__(self, url: str, engine: sa.engine.Engine, clients: int) -> None:
        self.url = url
        self.engine = engine
        self.clients = clients
        self.lock = threading.Lock()
        # consumer -> provider -> class -> amount of each claim answered 204,
        # until a delete of it is sent.
        self.claimed: dict[str, dict] = {}
        self.deleted: set[str] = set()
        self.refused: set[str] = set()
        # consumer -> what it asked, of a claim or delete without a definite
        # answer: all of it is held, or none.
        self.uncertain: dict[str, dict] = {}
        # (instance, what it held, where it moved, migration consumer) of a
        # move without a definite answer: the move happened whole, or not.
        self.uncertain_moves: list[tuple[str, dict, dict, str]] = []
        # the held claims clients may delete (any client any claim)
        self.deletable: list[str] = []
        # (phase, fleet, what, status, error code) -> answers
        self.answers: collections.Counter = collections.Counter()
        self.unexpected: list[tuple] = []
        self.failures: list[BaseException] = []
        # phase -> every over-commit the watcher saw during it; how often it looked
        self.over_commits: dict[str, list[OverCommit]] = collections.defaultdict(list)
        self.watches: collections.Counter = collections.Counter()
        self.seconds: dict[str, float] = {}
        self._phase = ""
        self._stop = threading.Event()

    def run(self, phase: str, seconds: float) -> None:
        self._phase = phase
        self._stop.clear()
        threads = [threading.Thread(target=self._client, args=(number,))
                   for number in range(self.clients)]
        threads.append(threading.Thread(target=self._watch))
        started = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        self._stop.set()
        for thread in threads:
            thread.join(CLIENT_TIMEOUT + 30)
        assert not any(thread.is_alive() for thread in threads), "a client hung"
        self.seconds[phase] = time.monotonic() - started

    def _record(self, what: str, answer: tuple[int, str, object], *expected: int) -> None:
        status, fleet, body = answer
        with self.lock:
            self.answers[(self._phase, fleet, what, status,
                          _error_code(body) if status >= 400 else "")] += 1
            if status not in expected and not (fleet in MAY_ANSWER_5XX and status >= 500):
                self.unexpected.append((fleet, what, status, body))

    def _client(self, number: int) -> None:
        chance = random.Random(f"{self._phase}-{number}")
        # Half the clients claim as 1.28 does, half as 1.39 (consumer types).
        version = "placement 1.28" if number % 2 else MICROVERSION
        try:
            while not self._stop.is_set():
                claimed = self._claim(chance, version)
                if claimed and chance.random() < MOVE_CHANCE:
                    self._move(chance)
                if chance.random() < (DELETE_CHANCE_AFTER_CLAIM if claimed
                                      else DELETE_CHANCE_OTHERWISE):
                    self._delete(chance)
        except BaseException as error:  # reported by the test
            self.failures.append(error)

    def _first_candidate(self, wanted: dict[str, int], version: str) -> dict | None:
        """The allocations of the first candidate for ``wanted`` (None: none)."""
        query = ",".join(f"{name}:{amount}" for name, amount in wanted.items())
        answer = _call(self.url, "GET", f"/allocation_candidates?resources={query}",
                       version=version)
        self._record("candidates", answer, 200)
        status, _, body = answer
        if status != 200 or not body["allocation_requests"]:
            return None
        return body["allocation_requests"][0]["allocations"]

    def _claim(self, chance: random.Random, version: str) -> bool:
        """Claims the first candidate for some resources: whether one was made."""
        wanted = {"VCPU": chance.randint(1, 3), "MEMORY_MB": 256 * chance.randint(1, 3)}
        if chance.random() < CLAIM_CHANCE_OF_DISK:
            wanted["DISK_GB"] = 10 * chance.randint(1, 3)
        allocations = self._first_candidate(wanted, version)
        if allocations is None:
            return False
        consumer = str(uuid.uuid4())
        claim = {"allocations": allocations, "project_id": PROJECT_ID, "user_id": USER_ID,
                 "consumer_generation": None}
        if version == MICROVERSION:
            claim["consumer_type"] = "INSTANCE"
        answer = _call(self.url, "PUT", f"/allocations/{consumer}", claim, version=version)
        self._record("claim", answer, 204, 409)
        status, fleet, _ = answer
        with self.lock:
            if status == 409:
                self.refused.add(consumer)
                return False
            if status == 204:
                self.claimed[consumer] = _resources(allocations)
                self.deletable.append(consumer)
            else:
                self.uncertain[consumer] = _resources(allocations)
        return status == 204

    def _delete(self, chance: random.Random) -> None:
        with self.lock:
            if not self.deletable:
                return
            consumer = self.deletable.pop(chance.randrange(len(self.deletable)))
        answer = _call(self.url, "DELETE", f"/allocations/{consumer}")
        self._record("delete", answer, 204)
        with self.lock:
            resources = self.claimed.pop(consumer)
            if answer[0] == 204:
                self.deleted.add(consumer)
            else:
                self.uncertain[consumer] = resources

    def _move(self, chance: random.Random) -> None:
        """Migrate a held claim (Nova's way, at 1.39): its consumer takes the
        first candidate for the same amounts and a new migration consumer
        what it held, in one POST /allocations."""
        with self.lock:
            if not self.deletable:
                return
            instance = self.deletable.pop(chance.randrange(len(self.deletable)))
            held = self.claimed[instance]
        wanted: collections.Counter = collections.Counter()
        for resources in held.values():
            wanted.update(resources)
        destination = self._first_candidate(dict(wanted), MICROVERSION)
        generation = _call(self.url, "GET", f"/allocations/{instance}")[2]
        if destination is None or not isinstance(generation, dict):
            with self.lock:
                self.deletable.append(instance)
            return
        migration = str(uuid.uuid4())
        owner = {"project_id": PROJECT_ID, "user_id": USER_ID}
        answer = _call(self.url, "POST", "/allocations", {
            instance: {"allocations": destination, "consumer_type": "INSTANCE",
                       "consumer_generation": generation["consumer_generation"], **owner},
            migration: {"allocations": {provider: {"resources": resources}
                                        for provider, resources in held.items()},
                        "consumer_type": "MIGRATION", "consumer_generation": None, **owner}})
        self._record("move", answer, 204, 409)
        with self.lock:
            if answer[0] == 204:
                self.claimed[instance] = _resources(destination)
                self.claimed[migration] = held
                self.deletable += [instance, migration]
            elif answer[0] == 409:
                self.deletable.append(instance)
            else:
                del self.claimed[instance]
                self.uncertain_moves.append(
                    (instance, held, _resources(destination), migration))

    def _watch(self) -> None:
        phase = self._phase
        try:
            while not self._stop.wait(WATCH_INTERVAL):
                over = sql_over_commits(self.engine)
                with self.lock:
                    self.watches[phase] += 1
                    self.over_commits[phase].extend(over)
        except BaseException as error:
            self.failures.append(error)

    def count(self, what: str, status: int | None = None, fleet: str | None = None,
              phase: str | None = None, code: str | None = None) -> int:
        return sum(number for (during, by, kind, answered, error), number
                   in self.answers.items()
                   if kind == what and (status is None or answered == status)
                   and (fleet is None or by == fleet) and (phase is None or during == phase)
                   and (code is None or error == code))

    def summary(self, phase: str) -> str:
        fleets = {}
        for fleet in (ORIGINAL, OURS):
            requests = sum(number for (during, by, *_), number in self.answers.items()
                           if during == phase and by == fleet)
            errors = collections.Counter()
            for (during, by, _, status, _), number in self.answers.items():
                if during == phase and by == fleet and status >= 500:
                    errors[status] += number
            fleets[fleet] = (f"{requests} requests, claims "
                             f"{self.count('claim', 204, fleet, phase)} ok/"
                             f"{self.count('claim', 409, fleet, phase)} x 409, "
                             f"moves {self.count('move', 204, fleet, phase)} ok/"
                             f"{self.count('move', 409, fleet, phase)} x 409, "
                             f"deletes {self.count('delete', 204, fleet, phase)} ok, "
                             f"5xx {dict(sorted(errors.items()))}")
        over = self.over_commits[phase]
        classes = {(sighting.provider, sighting.resource_class) for sighting in over}
        return (f"{phase}, {self.seconds[phase]:.1f} s: claims "
                f"{self.count('claim', 204, phase=phase)} ok, "
                f"{self.count('claim', 409, phase=phase)} x 409 "
                f"({self.count('claim', 409, phase=phase, code='placement.concurrent_update')}"
                f" concurrent update), moves {self.count('move', 204, phase=phase)} ok, "
                f"deletes {self.count('delete', 204, phase=phase)} ok; "
                f"original: {fleets[ORIGINAL]}; ours: {fleets[OURS]}; "
                f"{len(classes)} provider classes seen over capacity ({len(over)} sightings "
                f"in {self.watches[phase]} database watches"
                + (f", worst {max(o.used - (o.capacity or 0) for o in over):g} over)"
                   if over else ")"))


# The checks.

def _brief(answers: list[tuple]) -> str:
    """How many unexpected answers, and the first few, shortened."""
    shown = [(fleet, what, status, str(body)[:300]) for fleet, what, status, body in answers[:5]]
    return f"{len(answers)} unexpected answers, the first: {shown}"


def _via(url: str, path: str) -> object:
    return _ok(_call(url, "GET", path))


def check_claims(storm: Storm, fleets: dict[str, str], engine: sa.engine.Engine,
                 layout: Layout) -> dict[str, dict]:
    """What the clients were told against what is held, in the database and
    as each fleet reads it; returns what is held."""
    held = sql_held(engine)
    claimed = storm.claimed
    lost = {consumer: (resources, held.get(consumer)) for consumer, resources in claimed.items()
            if held.get(consumer) != resources}
    phantoms = {consumer: allocations for consumer, allocations in held.items()
                if consumer in storm.refused | storm.deleted}
    half_written = {consumer: (asked, held[consumer])
                    for consumer, asked in storm.uncertain.items()
                    if consumer in held and held[consumer] != asked}
    # a move without a definite answer happened whole or not at all
    half_moved = [move for move in storm.uncertain_moves
                  if (held.get(move[0]), held.get(move[3])) not in ((move[1], None),
                                                                   (move[2], move[1]))]
    assert half_moved == []
    unknown = (set(held) - set(claimed) - set(storm.uncertain) - storm.refused - storm.deleted
               - {consumer for move in storm.uncertain_moves for consumer in (move[0], move[3])})
    assert lost == {}
    assert phantoms == {}
    assert half_written == {}
    assert unknown == set()
    assert claimed and storm.deleted, storm.answers

    # Every fleet reads the same: each provider's allocations, usages and
    # inventories, and each consumer's allocations.
    usages = sql_usages(engine)
    for fleet, url in fleets.items():
        for provider in layout.providers:
            listed = _via(url, f"/resource_providers/{provider}/allocations")["allocations"]
            expected = {consumer: where[provider] for consumer, where in held.items()
                        if provider in where}
            assert {consumer: allocation["resources"] for consumer, allocation
                    in listed.items()} == expected, (fleet, provider)
            assert _via(url, f"/resource_providers/{provider}/usages")["usages"] == \
                usages[provider], (fleet, provider)
        for consumer in list(held) + sorted(storm.deleted)[:50] + sorted(storm.refused)[:50]:
            allocations = _via(url, f"/allocations/{consumer}")["allocations"]
            assert _resources(allocations) == held.get(consumer, {}), (fleet, consumer)
    for provider in layout.providers:
        assert _via(fleets[OURS], f"/resource_providers/{provider}/inventories") == \
            _via(fleets[ORIGINAL], f"/resource_providers/{provider}/inventories"), provider
    return held


def _candidate_providers(url: str, query: str) -> set[str]:
    body = _via(url, f"/allocation_candidates?{query}")
    return {provider for request in body["allocation_requests"]
            for provider in request["allocations"]}


def check_original_writes_seen(fleets: dict[str, str], engine: sa.engine.Engine,
                               layout: Layout) -> str:
    """Writes through the original, read at once through ours."""
    original, ours = fleets[ORIGINAL], fleets[OURS]
    # Our cache has read every provider since its last change.
    assert _candidate_providers(ours, "resources=VCPU:1") <= set(layout.computes)
    checks = 0

    # Inventories changed: each time only the changed compute has room.
    previous_capacity = 0.0
    for number, total in enumerate((40, 100, 250)):
        compute = layout.computes[number]
        generation = _via(original, f"/resource_providers/{compute}")["generation"]
        inventories = {**COMPUTE_INVENTORY, "VCPU": {**COMPUTE_INVENTORY["VCPU"], "total": total}}
        _ok(_call(original, "PUT", f"/resource_providers/{compute}/inventories", {
            "resource_provider_generation": generation, "inventories": inventories}))
        vcpu = COMPUTE_INVENTORY["VCPU"]
        capacity = (total - vcpu["reserved"]) * vcpu["allocation_ratio"]
        room = int(capacity) - sql_usages(engine)[compute]["VCPU"]
        assert room > previous_capacity
        assert _candidate_providers(ours, f"resources=VCPU:{room}") == {compute}, total
        previous_capacity = capacity
        checks += 1

    # A trait set: only that compute has it. The storm leaves computes at the
    # edge of full; the one just grown has room, so only the trait decides.
    trait = f"CUSTOM_MIXED_FLEET_{uuid.uuid4().hex[:8].upper()}"
    assert _call(original, "PUT", f"/traits/{trait}")[0] == 201
    assert _candidate_providers(ours, f"required={trait}&resources=VCPU:1") == set()
    generation = _via(original, f"/resource_providers/{compute}")["generation"]
    _ok(_call(original, "PUT", f"/resource_providers/{compute}/traits", {
        "resource_provider_generation": generation, "traits": [trait]}))
    assert _candidate_providers(ours, f"resources=VCPU:1&required={trait}") == {compute}
    checks += 1

    # Providers created: each bigger than anything before it.
    for number, total in enumerate((1000, 2000, 3000)):
        provider = _post_provider(original, f"mixed-late-{number}", {
            "VCPU": {"total": total, "allocation_ratio": 1.0}})
        assert _candidate_providers(ours, f"resources=VCPU:{total - 500}") == {provider}
        assert _via(ours, f"/resource_providers/{provider}")["generation"] == \
            _via(original, f"/resource_providers/{provider}")["generation"]
        checks += 1

    # A claim and its delete through the original: our usages follow.
    consumer, compute = str(uuid.uuid4()), layout.computes[0]
    _ok(_call(original, "PUT", f"/allocations/{consumer}", {
        "allocations": {compute: {"resources": {"VCPU": 5}}}, "project_id": PROJECT_ID,
        "user_id": USER_ID, "consumer_generation": None, "consumer_type": "INSTANCE"}), 204)
    usage = _via(ours, f"/resource_providers/{compute}/usages")["usages"]
    assert usage == sql_usages(engine)[compute]
    _ok(_call(original, "DELETE", f"/allocations/{consumer}"), 204)
    assert _via(ours, f"/resource_providers/{compute}/usages")["usages"] == \
        sql_usages(engine)[compute]
    assert usage["VCPU"] == sql_usages(engine)[compute]["VCPU"] + 5
    checks += 1
    return f"{checks} writes through the original seen at once through ours"


# Putting it together.

MIXED = "mixed storm"


def mixed_fleet_storm(fleets: dict[str, str], engine: sa.engine.Engine, backend: str,
                      report) -> None:
    """The storm(s) through a proxy in front of ``fleets`` and every check
    but that of our derived columns."""
    title = f"mixed fleet [{backend}]"
    with RoundRobinProxy(list(fleets.items())) as proxy:
        layout = set_up_providers(proxy.url)
        # Both fleets see all of it.
        for fleet_url in fleets.values():
            assert _candidate_providers(fleet_url, "resources=VCPU:1,MEMORY_MB:256,DISK_GB:10"
                                        ) == set(layout.providers)
        storm = Storm(proxy.url, engine, CLIENTS)
        storm.run(MIXED, STORM_SECONDS)
        report(f"{title}: {storm.summary(MIXED)}")  # the figures first, whatever comes next
        assert storm.failures == []
        # (ours answering 5xx, among others)
        assert storm.unexpected == [], _brief(storm.unexpected)
        assert storm.over_commits[MIXED] == [], storm.over_commits[MIXED][:5]
    held = check_claims(storm, fleets, engine, layout)
    seen = check_original_writes_seen(fleets, engine, layout)
    over = sql_over_commits(engine)
    assert over == [], f"over capacity at the end: {over[:5]}"
    report(f"{title}: no over-commit, no "
           f"claim lost or left behind, both fleets read the same; requests through the "
           f"proxy: original {proxy.requests(ORIGINAL)} (5xx {proxy.server_errors(ORIGINAL)}), "
           f"ours {proxy.requests(OURS)} (5xx {proxy.server_errors(OURS)}); {len(held)} "
           f"consumers hold allocations at the end; {seen}")


def _sync_our_schema(url: str, log_dir: str) -> None:
    """Our ``placement-manage db sync`` on the database the original made."""
    environment = dict(os.environ, OS_PLACEMENT_DATABASE__CONNECTION=url,
                       OS_PLACEMENT_CONFIG_DIR=tempfile.mkdtemp(dir=log_dir))
    done = subprocess.run([sys.executable, "-m", "placement.cmd.manage", "db", "sync"],
                          cwd=REPOSITORY, env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("fleet_backend", [
    pytest.param("sqlite", id="sqlite", marks=pytest.mark.backend("sqlite")),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.backend("postgresql")),
    pytest.param("mysql", id="mysql", marks=pytest.mark.backend("mysql")),
])
def test_mixed_fleet_storm(fleet_backend, tmp_path, report):
    url = test_db.empty_database_url(fleet_backend)
    log_dir = str(tmp_path)
    engine = _engine(url)
    try:
        with original_service(url, log_dir) as original:
            _sync_our_schema(url, log_dir)
            ours = Servers(url, log_dir, 1)
            try:
                fleets = {ORIGINAL: original, OURS: f"http://127.0.0.1:{ours.ports[0]}"}
                mixed_fleet_storm(fleets, engine, fleet_backend, report)
                derived = sql_derived_mismatches(engine)
                assert derived == [], "inventories.used differs from the SUM of the allocations"
                assert ours.all_running(), ours.logs()
                our_log = ours.logs()
            finally:
                ours.stop()
    finally:
        engine.dispose()
    assert "Traceback" not in our_log, our_log
