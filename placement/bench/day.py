"""``f.day``: a cloud's day as Nova sends it, at the rates it sends it.

Unlike the closed-loop cells, this one is an open loop: every request is
due at a time set by the cloud, not by the previous answer, and a service
that cannot keep up shows as requests starting late. For N computes:

* each compute's resource tracker reads its allocations every 60 s
  (``update_available_resource``): ``GET /resource_providers/{uuid}/allocations``;
* every 300 s (``[compute]resource_provider_association_refresh``) it
  re-reads its tree: ``GET /resource_providers?in_tree=`` (1.14), then for
  each provider of the tree its inventories, aggregates (1.19) and traits
  (1.6), then the sharing providers of its aggregates
  (``member_of=in:...&required=MISC_SHARES_VIA_AGGREGATE``, 1.18);
* now and then an inventory changes (``PUT .../inventories``, 1.26, after
  reading the provider generation; once an hour per compute) or a trait
  (``PUT .../traits``, 1.6; once in two hours per compute);
* boots: ``GET /allocation_candidates`` with Nova's default limit (1000) at
  1.36, then ``PUT /allocations/{instance}`` of the first candidate, the
  next on 409 (N / 2000 per second); as many deletes
  (``DELETE /allocations/{instance}``);
* migrations and resizes (a fifth as many as boots): the candidates, then ``POST
  /allocations`` (1.28) moving the instance's allocations to a migration
  consumer while the instance claims the destination; then confirm (the
  migration consumer's allocations deleted) or, one time in four, revert
  (moved back, the destination released).

The computes' periodic work is spread evenly over its period, the rest
arrives at random (Poisson) times; ``speed`` multiplies every rate (a
faster day on a smaller cloud). An event is late when it starts more than
``LATE_SECONDS`` after it was due; a family falls behind when its 99th
percentile start delay is late or some of its events never started.
Afterwards every instance must hold exactly what was last written for it,
every deleted instance and migration consumer nothing, and no touched
provider may be over capacity.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from placement.bench.client import Client, Response
from placement.bench.scenarios import (
    Ledger,
    Limits,
    Target,
    Worker,
    claim_body,
    resources_of,
    verify_claims,
)
from placement.bench.stats import Samples, percentile

TRACKER_PERIOD = 60.0
REFRESH_PERIOD = 300.0
NOVA_LIMIT = 1000
FLAVOR = "VCPU:2,MEMORY_MB:2048,DISK_GB:20"
DAY_TRAIT = "CUSTOM_BENCH_DAY"
LATE_SECONDS = 1.0
# events still queued this long after the day ended never start
DRAIN_SECONDS = 10.0
WORKERS = 16


@dataclass
class Family:
    """One kind of event: how often it comes and what it does."""

    name: str
    # seconds between events of the whole cloud (periodic), or their mean
    interval: float
    periodic: bool
    run: Callable[[Day, Worker, int], None]


class Day:
    """What the day keeps while it runs: the computes, the live instances
    (each checked out while a worker moves or deletes it) and the outcome
    of every consumer written."""

    def __init__(self, target: Target, speed: float) -> None:
        cloud = target.cloud
        self.target = target
        # in a fixed random order, which the periodic work goes through: a
        # run shorter than a period still meets flat and nested trees alike
        self.computes = cloud.flat_computes + cloud.nested_roots
        random.Random(0).shuffle(self.computes)
        # nested roots have two NUMA children, seeded in order
        self.children = {root: cloud.numa_nodes[2 * index:2 * index + 2]
                         for index, root in enumerate(cloud.nested_roots)}
        self.speed = speed
        self.lock = threading.Lock()
        self.idle_instances: list[str] = []
        self.allocations: dict[str, dict[str, Any]] = {}  # instance -> allocations
        self.gone: list[str] = []  # deleted instances and finished migrations
        self.touched: set[str] = set()

    def families(self) -> list[Family]:
        computes = len(self.computes)
        boots = computes / 2000
        return [
            Family("tracker", TRACKER_PERIOD / computes, True, _tracker),
            Family("refresh", REFRESH_PERIOD / computes, True, _refresh),
            Family("inventory_change", 3600 / computes, False, _inventory_change),
            Family("trait_change", 7200 / computes, False, _trait_change),
            Family("boot", 1 / boots, False, _boot),
            Family("delete", 1 / boots, False, _delete),
            Family("migration", 5 / boots, False, _migration),
        ]

    def check_out(self, rng: random.Random) -> str | None:
        """An idle instance, kept from every other worker until put back."""
        with self.lock:
            if not self.idle_instances:
                return None
            index = rng.randrange(len(self.idle_instances))
            self.idle_instances[index], self.idle_instances[-1] = (
                self.idle_instances[-1], self.idle_instances[index])
            return self.idle_instances.pop()

    def put_back(self, instance: str, allocations: dict[str, Any]) -> None:
        with self.lock:
            self.allocations[instance] = allocations
            self.touched.update(allocations)
            self.idle_instances.append(instance)

    def forget(self, consumer: str) -> None:
        with self.lock:
            self.allocations.pop(consumer, None)
            self.gone.append(consumer)


def _call(worker: Worker, label: str, method: str, path: str, body: Any = None,
          version: str = "1.0", ok: tuple[int, ...] = (200,)) -> Response:
    response = worker.client.request(method, path, body, api_version=version)
    worker.samples[label].add(response.seconds, response.status, response.status in ok,
                              response.body)
    return response


def _tracker(day: Day, worker: Worker, index: int) -> None:
    compute = day.computes[index % len(day.computes)]
    _call(worker, "tracker.allocations", "GET", f"/resource_providers/{compute}/allocations")


def _refresh(day: Day, worker: Worker, index: int) -> None:
    compute = day.computes[index % len(day.computes)]
    tree = _call(worker, "refresh.in_tree", "GET", f"/resource_providers?in_tree={compute}",
                 version="1.14")
    if tree.status != 200:
        return
    aggregates: set[str] = set()
    for provider in tree.json()["resource_providers"]:
        base = f"/resource_providers/{provider['uuid']}"
        _call(worker, "refresh.inventories", "GET", base + "/inventories")
        found = _call(worker, "refresh.aggregates", "GET", base + "/aggregates", version="1.19")
        if found.status == 200:
            aggregates.update(found.json()["aggregates"])
        _call(worker, "refresh.traits", "GET", base + "/traits", version="1.6")
    if aggregates:
        query = urlencode({"member_of": "in:" + ",".join(sorted(aggregates)),
                           "required": "MISC_SHARES_VIA_AGGREGATE"}, safe=":,")
        _call(worker, "refresh.sharing", "GET", f"/resource_providers?{query}", version="1.18")


def _update(worker: Worker, path: str, label: str, read_version: str, write_version: str,
            change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Read what ``path`` holds, write back ``change`` of it; as Nova,
    re-read and retry on a generation conflict."""
    for _ in range(3):
        current = _call(worker, "update.read", "GET", path, version=read_version)
        if current.status != 200:
            return
        written = _call(worker, label, "PUT", path, change(current.json()),
                        version=write_version, ok=(200, 409))
        if written.status != 409:
            return


def _inventory_change(day: Day, worker: Worker, index: int) -> None:
    """The hypervisor reports a little more disk (never less: the claims
    already made must still fit)."""
    def more_disk(body: dict[str, Any]) -> dict[str, Any]:
        body["inventories"]["DISK_GB"]["total"] += 1
        return body

    compute = worker.rng.choice(day.computes)
    _update(worker, f"/resource_providers/{compute}/inventories", "update.inventories",
            "1.0", "1.26", more_disk)


def _trait_change(day: Day, worker: Worker, index: int) -> None:
    def toggled(body: dict[str, Any]) -> dict[str, Any]:
        return {"traits": sorted(set(body["traits"]) ^ {DAY_TRAIT}),
                "resource_provider_generation": body["resource_provider_generation"]}

    compute = worker.rng.choice(day.computes)
    _update(worker, f"/resource_providers/{compute}/traits", "update.traits", "1.6", "1.6",
            toggled)


def _candidates(worker: Worker, label: str) -> list[dict[str, Any]]:
    query = urlencode({"resources": FLAVOR, "limit": NOVA_LIMIT}, safe=":,")
    response = _call(worker, label, "GET", f"/allocation_candidates?{query}", version="1.36")
    return response.json()["allocation_requests"] if response.status == 200 else []


def _weighed(worker: Worker, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates in the order a scheduler tries them: its weighers
    spread instances over the hosts, which the bench stands in for with a
    random first choice, the others following as alternates."""
    if not candidates:
        return candidates
    first = worker.rng.randrange(len(candidates))
    return candidates[first:] + candidates[:first]


def _boot(day: Day, worker: Worker, index: int) -> None:
    instance = str(uuid.uuid4())
    for request in _weighed(worker, _candidates(worker, "boot.candidates")):
        allocations = request["allocations"]
        response = _call(worker, "boot.claim", "PUT", f"/allocations/{instance}",
                         claim_body(allocations, consumer_type=None), version="1.36", ok=(204, 409))
        if response.status == 204:
            day.put_back(instance, allocations)
            return
        if response.status != 409:
            break
    day.forget(instance)  # no room: it must hold nothing


def _delete(day: Day, worker: Worker, index: int) -> None:
    instance = day.check_out(worker.rng)
    if instance is None:
        return
    response = _call(worker, "delete", "DELETE", f"/allocations/{instance}", version="1.28",
                     ok=(204,))
    if response.status == 204:
        day.forget(instance)
    else:
        day.put_back(instance, day.allocations[instance])


def _generation(worker: Worker, consumer: str) -> int | None:
    response = _call(worker, "migrate.read", "GET", f"/allocations/{consumer}", version="1.28")
    return response.json().get("consumer_generation") if response.status == 200 else None


def _migration(day: Day, worker: Worker, index: int) -> None:
    instance = day.check_out(worker.rng)
    if instance is None:
        return
    source = day.allocations[instance]
    final = source
    try:
        generation = _generation(worker, instance)
        migration = str(uuid.uuid4())
        for request in _weighed(worker, _candidates(worker, "migrate.candidates")):
            destination = request["allocations"]
            if set(destination) & set(source):
                continue  # the same host: not a migration
            response = _call(worker, "migrate.move", "POST", "/allocations", {
                migration: claim_body(source, consumer_type=None),
                instance: claim_body(destination, generation, consumer_type=None),
            }, version="1.28", ok=(204, 409))
            if response.status == 409:
                generation = _generation(worker, instance)
                continue
            if response.status != 204:
                return
            final = _finish_migration(day, worker, instance, migration, source, destination)
            return
    finally:
        day.put_back(instance, final)


def _finish_migration(day: Day, worker: Worker, instance: str, migration: str,
                      source: dict[str, Any], destination: dict[str, Any]) -> dict[str, Any]:
    """Confirm (three times in four) or revert; the instance's allocations after."""
    if worker.rng.random() < 0.75:
        response = _call(worker, "migrate.confirm", "DELETE", f"/allocations/{migration}",
                         version="1.28", ok=(204,))
        final = destination
    else:
        response = _call(worker, "migrate.revert", "POST", "/allocations", {
            instance: claim_body(source, _generation(worker, instance), consumer_type=None),
            migration: claim_body({}, _generation(worker, migration), consumer_type=None),
        }, version="1.28", ok=(204,))
        final = source
    with day.lock:
        day.touched.update(destination)
    if response.status != 204:
        return destination
    day.forget(migration)
    return final


def _schedule(families: list[Family], speed: float, seconds: float,
              rng: random.Random) -> Iterator[tuple[float, int, Family]]:
    """(due second, index, family) of every event of the day, in time order."""
    def times(family: Family) -> Iterator[tuple[float, int, Family]]:
        interval = family.interval / speed
        due = interval * rng.random() if family.periodic else rng.expovariate(1 / interval)
        for index in itertools.count():
            if due >= seconds:
                return
            yield due, index, family
            due += interval if family.periodic else rng.expovariate(1 / interval)
    return heapq.merge(*(times(family) for family in families), key=lambda event: event[0])


def day_cell(target: Target, limits: Limits, ledger: Ledger, speed: float = 1.0,
             workers: int = WORKERS) -> dict[str, Any]:
    """The day for ``limits.duration`` seconds; the result's ``families``
    give each event family's start delays and every request kind's
    latencies."""
    day = Day(target, speed)
    setup = Client(target.host, target.port)
    try:
        setup.request("PUT", f"/traits/{DAY_TRAIT}")
    finally:
        setup.close()
    families = day.families()
    events: queue.Queue = queue.Queue()
    lags: dict[str, Samples] = defaultdict(Samples)
    pool = [Worker(index, target) for index in range(workers)]
    started = time.perf_counter()
    stop_at = started + limits.duration + DRAIN_SECONDS

    def work(worker: Worker) -> None:
        try:
            while True:
                event = events.get()
                if event is None:
                    return
                due, index, family = event
                if time.perf_counter() > stop_at:
                    continue  # left unstarted: counted below
                lag = time.perf_counter() - started - due
                lags[family.name].add(max(lag, 0.0), "started", True)
                try:
                    family.run(day, worker, index)
                except (OSError, ValueError, KeyError) as exc:
                    worker.samples["exceptions"].add(0.0, type(exc).__name__, False,
                                                     str(exc).encode())
                    worker.client.close()
        finally:
            worker.client.close()

    threads = [threading.Thread(target=work, args=(worker,)) for worker in pool]
    cpu_before = target.cpu_seconds()
    for thread in threads:
        thread.start()
    scheduled: dict[str, int] = defaultdict(int)
    for due, index, family in _schedule(families, speed, limits.duration, random.Random(0)):
        delay = started + due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        events.put((due, index, family))
        scheduled[family.name] += 1
    for _ in threads:
        events.put(None)
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    server_cpu = target.cpu_seconds() - cpu_before
    return _day_result(day, pool, families, scheduled, lags, wall, server_cpu, speed,
                       ledger, workers)


def _day_result(day: Day, pool: list[Worker], families: list[Family],
                scheduled: dict[str, int], lags: dict[str, Samples], wall: float,
                server_cpu: float, speed: float, ledger: Ledger,
                workers: int) -> dict[str, Any]:
    requests: dict[str, Samples] = defaultdict(Samples)
    for worker in pool:
        for label, samples in worker.samples.items():
            requests[label].merge(samples)
    everything = Samples()
    for label, samples in requests.items():
        if label != "exceptions":
            everything.merge(samples)
    behind = []
    events: dict[str, Any] = {}
    for family in families:
        started = lags[family.name]
        delays = sorted(started.latencies)
        unstarted = scheduled[family.name] - len(delays)
        p99 = percentile(delays, 0.99)
        events[family.name] = {"scheduled": scheduled[family.name], "unstarted": unstarted,
                               "per_second": round(scheduled[family.name] / wall, 2),
                               "start_delay_p50_ms": round(1000 * percentile(delays, 0.5), 1),
                               "start_delay_p99_ms": round(1000 * p99, 1)}
        if unstarted or p99 > LATE_SECONDS:
            behind.append(family.name)
    result: dict[str, Any] = {"name": "f.day", "concurrency": workers, "seconds": round(wall, 2)}
    result.update(everything.summary(wall))
    exceptions = requests.get("exceptions")
    if exceptions is not None:
        result["errors"] += exceptions.errors
        result["exceptions"] = dict(exceptions.statuses)
    result["server_cpu_seconds"] = round(server_cpu, 2)
    result["server_cpu_ms_per_op"] = round(1000 * server_cpu / max(result["count"], 1), 2)
    result["speed"] = speed
    result["computes"] = len(day.computes)
    result["events"] = events
    result["requests"] = {label: samples.summary(wall) for label, samples in
                          sorted(requests.items()) if label != "exceptions"}
    result["kept_up"] = not behind
    live = [(instance, resources_of(allocations))
            for instance, allocations in day.allocations.items()]
    for _, allocations in live:
        ledger.add(allocations)
    ledger.touched |= day.touched
    result["verification"] = verify_claims(day.target, live, day.gone, ledger)
    result["notes"] = (f"{len(day.computes)} computes x{speed:g}; "
                       + ("kept up" if not behind else "BEHIND: " + ", ".join(behind)))
    return result


def format_day(result: dict[str, Any]) -> str:
    """The day's events (rate, start delays) and requests (rate, latencies)."""
    lines = [f"f.day: {result['computes']} computes, speed {result['speed']:g}, "
             f"{result['seconds']:.0f} s, {'kept up' if result['kept_up'] else 'FELL BEHIND'}",
             f"  {'event':<18} {'per s':>8} {'start p50 ms':>13} {'start p99 ms':>13} "
             f"{'unstarted':>9}"]
    for name, event in result["events"].items():
        lines.append(f"  {name:<18} {event['per_second']:>8.2f} "
                     f"{event['start_delay_p50_ms']:>13.1f} {event['start_delay_p99_ms']:>13.1f} "
                     f"{event['unstarted']:>9}")
    lines.append(f"  {'request':<22} {'per s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for label, summary in result["requests"].items():
        lines.append(f"  {label:<22} {summary['rate']:>8.2f} {summary['p50_ms']:>8.1f} "
                     f"{summary['p99_ms']:>8.1f} {summary['errors']:>7}")
    return "\n".join(lines)
