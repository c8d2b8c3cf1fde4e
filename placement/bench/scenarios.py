"""The timed scenarios. Each cell runs C closed-loop clients (each sends its
next request as soon as the previous answer is read) until the duration or
the request budget of the cell is spent."""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from placement.bench.client import Client, UnexpectedResponse, expect
from placement.bench.seed import WIDE_CHILDREN, Cloud, Trees
from placement.bench.stats import Samples

PROJECT_ID = "bench-project"
USER_ID = "bench-user"
# A worker that fails this many times in a row (connection refused, timeout)
# stops: the server is gone or stuck and the cell would only spin.
MAX_CONSECUTIVE_EXCEPTIONS = 5


@dataclass
class Limits:
    duration: float
    requests: int  # per closed-loop cell (the open-loop day runs for its duration)
    day_speed: float = 1.0  # f.day: its rates multiplied by this


@dataclass
class Target:
    """Where the server listens, and the data seeded into it."""

    host: str
    port: int
    cloud: Cloud | None = None
    trees: Trees | None = None
    cpu_seconds: Callable[[], float] = lambda: 0.0
    # resident memory of each server process, in MiB
    rss_mb: Callable[[], list[float]] = lambda: [0.0]
    # clients a cell seeding data of its own runs at once
    seed_concurrency: int = 4
    # d.project-usages: the projects whose consumers it seeded
    projects: list[str] = field(default_factory=list)


class Worker:
    """One client thread's connection, random generator and samples."""

    def __init__(self, index: int, target: Target) -> None:
        self.index = index
        self.client = Client(target.host, target.port)
        self.rng = random.Random(index)
        self.samples: dict[str, Samples] = defaultdict(Samples)
        self.claims: list[tuple[str, dict[str, Any]]] = []
        self.rejected_consumers: list[str] = []
        self.touched_providers: set[str] = set()


@dataclass
class LoopRun:
    wall: float  # seconds
    workers: list[Worker]
    server_cpu: float  # seconds of server CPU time spent meanwhile


def run_closed_loop(target: Target, concurrency: int, limits: Limits,
                    operation: Callable[[Worker], None]) -> LoopRun:
    workers = [Worker(index, target) for index in range(concurrency)]
    tickets = itertools.count()
    deadline = time.perf_counter() + limits.duration

    def loop(worker: Worker) -> None:
        failures_in_a_row = 0
        try:
            while time.perf_counter() < deadline and next(tickets) < limits.requests:
                try:
                    operation(worker)
                    failures_in_a_row = 0
                except (OSError, ValueError, KeyError) as exc:
                    worker.samples["exceptions"].add(0.0, type(exc).__name__, False,
                                                     str(exc).encode())
                    failures_in_a_row += 1
                    worker.client.close()
                    if failures_in_a_row >= MAX_CONSECUTIVE_EXCEPTIONS:
                        return
        finally:
            worker.client.close()

    threads = [threading.Thread(target=loop, args=(worker,)) for worker in workers]
    cpu_before = target.cpu_seconds()
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return LoopRun(wall, workers, target.cpu_seconds() - cpu_before)


def merged(workers: list[Worker], label: str) -> Samples:
    total = Samples()
    for worker in workers:
        total.merge(worker.samples[label])
    return total


def cell_result(name: str, concurrency: int, run: LoopRun, primary: str,
                parts: tuple[str, ...] = ()) -> dict[str, Any]:
    """The summary of ``primary`` samples; exceptions count as errors."""
    wall, workers = run.wall, run.workers
    result: dict[str, Any] = {"name": name, "concurrency": concurrency,
                              "seconds": round(wall, 2)}
    result.update(merged(workers, primary).summary(wall))
    exceptions = merged(workers, "exceptions")
    if exceptions.statuses:
        result["errors"] += exceptions.errors
        result["exceptions"] = dict(exceptions.statuses)
    if parts:
        result["parts"] = {part: merged(workers, part).summary(wall) for part in parts}
    result["reconnects"] = sum(worker.client.reconnects for worker in workers)
    result["server_cpu_seconds"] = round(run.server_cpu, 2)
    result["server_cpu_ms_per_op"] = round(1000 * run.server_cpu / max(result["count"], 1), 2)
    return result


# -- a, d, e: reads -----------------------------------------------------------

def candidates_query(**params: str) -> str:
    return "/allocation_candidates?" + urlencode(params, safe=":,!")


def cloud_queries(cloud: Cloud) -> dict[str, str]:
    flavor = "VCPU:2,MEMORY_MB:2048,DISK_GB:20"
    four_aggregates = "in:" + ",".join(cloud.aggregates[:4])
    return {
        "a.basic": candidates_query(resources=flavor, limit="1000"),
        "a.traits-member-of": candidates_query(
            resources=flavor, required="HW_CPU_X86_AVX2", member_of=four_aggregates,
            limit="1000"),
        "a.nested-granular": candidates_query(
            resources1="VCPU:2,MEMORY_MB:2048", resources2="VCPU:2,MEMORY_MB:2048",
            resources="DISK_GB:20", group_policy="isolate", limit="1000"),
        "d.providers-with-capacity": "/resource_providers?" + urlencode(
            {"resources": flavor}, safe=":,"),
        # an extension of ours (the original answers 404)
        "d.capacity-providers": "/capacity/providers",
        "d.capacity-one-aggregate": f"/capacity/providers?member_of={cloud.aggregates[0]}",
    }


def wide_tree_query() -> str:
    groups = {f"resources{index}": "VGPU:1" for index in range(1, WIDE_CHILDREN + 1)}
    return candidates_query(**groups, group_policy="isolate", limit="1000")


def subtree_query() -> str:
    return candidates_query(
        resources="DISK_GB:20", resources_COMPUTE="VCPU:2,MEMORY_MB:2048",
        resources_NET="SRIOV_NET_VF:1", required_NUMA="HW_NUMA_ROOT",
        same_subtree="_NUMA,_COMPUTE,_NET", group_policy="none", limit="1000")


def describe(response_body: dict[str, Any]) -> str:
    if "allocation_requests" in response_body:
        return (f"{len(response_body['allocation_requests'])} candidates, "
                f"{len(response_body['provider_summaries'])} summaries")
    if "resource_providers" in response_body:
        return f"{len(response_body['resource_providers'])} providers"
    if "usages" in response_body and "resource_provider_generation" not in response_body:
        return ", ".join(f"{kind}: {usages.get('consumer_count', 0)} consumers"
                         for kind, usages in response_body["usages"].items())
    return ""


def timed_get(worker: Worker, path: str) -> None:
    """A GET that must answer 200, in the worker's ``get`` samples."""
    response = worker.client.get(path)
    worker.samples["get"].add(response.seconds, response.status, response.status == 200,
                              response.body)


def read_cell(name: str, concurrency: int, target: Target, limits: Limits,
              path_for: Callable[[Worker], str]) -> dict[str, Any]:
    """GETs that must answer 200. One untimed warm-up request first, whose
    answer is described in the notes."""
    warm_up = Worker(0, target)
    try:
        first = expect(warm_up.client, "GET", path_for(warm_up))
        notes = describe(first.json())
    finally:
        warm_up.client.close()

    result = cell_result(name, concurrency, run_closed_loop(
        target, concurrency, limits, lambda worker: timed_get(worker, path_for(worker))), "get")
    result["notes"] = notes
    return result


# -- a.cold: every request a new shape -----------------------------------------
#
# A scheduler rarely asks the same thing twice while nothing moved: flavors
# differ, and so do the traits and aggregates a request names. These cells
# draw every request at random (from the worker's seeded generator: the same
# sequence for every service measured), so that no kept answer serves it.

COLD_TRAITS = ("HW_CPU_X86_AVX2", "CUSTOM_GOLD")
# Claims a cold-claims worker keeps at once: older ones are deleted, so that
# usages keep moving and the cloud ends as it began.
COLD_CLAIMS_KEPT = 10


def cold_query(rng: random.Random, aggregates: list[str], filtered: bool) -> str:
    """A candidates request of a random flavor (VCPU 1-16, MEMORY_MB
    512-32768, DISK_GB 10-200, Nova's limit of 1000); ``filtered``: also one
    or two of the cloud's traits, each required or (three times in ten)
    forbidden, and ``member_of=in:`` 1 to 5 of its 10 aggregates."""
    params = {"resources": f"VCPU:{rng.randint(1, 16)},MEMORY_MB:{rng.randint(512, 32768)},"
                           f"DISK_GB:{rng.randint(10, 200)}",
              "limit": "1000"}
    if filtered:
        traits = rng.sample(COLD_TRAITS, rng.randint(1, 2))
        params["required"] = ",".join(("!" if rng.random() < 0.3 else "") + name
                                      for name in traits)
        params["member_of"] = "in:" + ",".join(rng.sample(aggregates, rng.randint(1, 5)))
    return candidates_query(**params)


def cold_claim(worker: Worker, aggregates: list[str]) -> None:
    """A scheduler placing an instance of a new shape: candidates (plain or
    filtered, in turn), then the claim of one of them at random, the way
    Nova picks among weighed hosts; past COLD_CLAIMS_KEPT claims the oldest
    is deleted. Every read sees usages other claims just moved."""
    filtered = len(worker.samples["candidates"].latencies) % 2 == 1
    candidates = worker.client.get(cold_query(worker.rng, aggregates, filtered))
    worker.samples["candidates"].add(candidates.seconds, candidates.status,
                                     candidates.status == 200, candidates.body)
    requests = candidates.json()["allocation_requests"] if candidates.status == 200 else []
    if not requests:
        return
    allocations = worker.rng.choice(requests)["allocations"]
    consumer = str(uuid.uuid4())
    response = worker.client.put(f"/allocations/{consumer}", claim_body(allocations))
    # 409: another worker took the room first
    worker.samples["put"].add(response.seconds, response.status,
                              response.status in (204, 409), response.body)
    if response.status == 204:
        worker.touched_providers.update(allocations)
        worker.claims.append((consumer, resources_of(allocations)))
    while len(worker.claims) > COLD_CLAIMS_KEPT:
        delete_claim(worker, worker.claims.pop(0)[0])


def delete_claim(worker: Worker, consumer: str) -> None:
    response = worker.client.request("DELETE", f"/allocations/{consumer}")
    worker.samples["delete"].add(response.seconds, response.status, response.status == 204,
                                 response.body)


def cold_cell(name: str, concurrency: int, target: Target, limits: Limits,
              ledger: Ledger) -> dict[str, Any]:
    """``a.cold-plain`` and ``a.cold-filtered``: reads of random shapes;
    ``a.cold-claims``: each read followed by a claim (see cold_claim), the
    rate counting the reads. Afterwards every claim is deleted and the
    touched providers' usages must be what they were."""
    aggregates = target.cloud.aggregates
    if name == "a.cold-claims":
        run = run_closed_loop(target, concurrency, limits,
                              lambda worker: cold_claim(worker, aggregates))
        for worker in run.workers:
            for consumer, _ in worker.claims:
                delete_claim(worker, consumer)
            worker.client.close()
        result = cell_result(name, concurrency, run, "candidates",
                             parts=("put", "delete"))
        touched = set().union(*(worker.touched_providers for worker in run.workers))
        result["verification"] = verify_claims(target, [], [], ledger, touched)
        result["notes"] = "random shapes, a claim after each read"
        return result
    filtered = name == "a.cold-filtered"
    run = run_closed_loop(target, concurrency, limits, lambda worker: timed_get(
        worker, cold_query(worker.rng, aggregates, filtered)))
    result = cell_result(name, concurrency, run, "get")
    result["notes"] = "every request a new shape"
    return result


# -- b, c: writes -------------------------------------------------------------

STORM_QUERY = candidates_query(resources="VCPU:2,MEMORY_MB:2048,DISK_GB:20", limit="10")


def claim_body(allocations: dict[str, Any], generation: int | None = None,
               consumer_type: str | None = "INSTANCE") -> dict[str, Any]:
    """A consumer's allocations as schedulers write them; without
    ``consumer_type`` as Nova does below 1.38."""
    body = {"allocations": allocations, "project_id": PROJECT_ID, "user_id": USER_ID,
            "consumer_generation": generation}
    if consumer_type is not None:
        body["consumer_type"] = consumer_type
    return body


def resources_of(allocations: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {provider: dict(entry["resources"]) for provider, entry in allocations.items()}


def claim(worker: Worker) -> None:
    """A scheduler placing one instance: candidates, then the first one that
    the service accepts."""
    started = time.perf_counter()
    candidates = worker.client.get(STORM_QUERY)
    worker.samples["candidates"].add(candidates.seconds, candidates.status,
                                     candidates.status == 200, candidates.body)
    if candidates.status != 200:
        worker.samples["claim"].add(time.perf_counter() - started, "error", ok=False)
        return
    consumer = str(uuid.uuid4())
    outcome = "rejected"
    for request in candidates.json()["allocation_requests"]:
        allocations = request["allocations"]
        worker.touched_providers.update(allocations)
        response = worker.client.put(f"/allocations/{consumer}", claim_body(allocations))
        worker.samples["put"].add(response.seconds, response.status,
                                  response.status in (204, 409), response.body)
        if response.status == 204:
            worker.claims.append((consumer, resources_of(allocations)))
            outcome = "claimed"
            break
        if response.status != 409:
            outcome = "error"
            break
    if outcome == "rejected":
        worker.rejected_consumers.append(consumer)
    worker.samples["claim"].add(time.perf_counter() - started, outcome, outcome != "error")


@dataclass
class Ledger:
    """What the storms successfully claimed: the usage every touched provider
    must show, and the consumers to check."""

    usage: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(
        lambda: defaultdict(int)))
    touched: set[str] = field(default_factory=set)

    def add(self, allocations: dict[str, dict[str, int]]) -> None:
        for provider, resources in allocations.items():
            for resource_class, amount in resources.items():
                self.usage[provider][resource_class] += amount


def storm_cell(concurrency: int, target: Target, limits: Limits,
               ledger: Ledger) -> dict[str, Any]:
    run = run_closed_loop(target, concurrency, limits, claim)
    wall, workers = run.wall, run.workers
    result = cell_result("b.storm", concurrency, run, "claim", parts=("candidates", "put"))
    claims = [item for worker in workers for item in worker.claims]
    rejected = [consumer for worker in workers for consumer in worker.rejected_consumers]
    puts = merged(workers, "put").statuses
    attempts = sum(puts.values())
    result["claims"] = len(claims)
    result["rate"] = round(len(claims) / wall, 2) if wall else 0.0
    result["conflict_share"] = round(puts.get("409", 0) / attempts, 3) if attempts else 0.0
    for _, allocations in claims:
        ledger.add(allocations)
    for worker in workers:
        ledger.touched |= worker.touched_providers
    result["verification"] = verify_claims(target, claims, rejected, ledger)
    result["notes"] = (f"claims/s; {result['conflict_share']:.0%} of PUTs 409; "
                       f"{len(rejected)} claims found no room")
    return result


def churn(worker: Worker, computes: list[str]) -> None:
    provider = worker.rng.choice(computes)
    worker.touched_providers.add(provider)
    consumer = str(uuid.uuid4())
    path = f"/allocations/{consumer}"
    allocations = {provider: {"resources": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}}
    for method, body in (("PUT", claim_body(allocations)), ("DELETE", None)):
        response = worker.client.request(method, path, body)
        ok = response.status == 204
        worker.samples[method.lower()].add(response.seconds, response.status, ok,
                                           response.body)
        worker.samples["op"].add(response.seconds, response.status, ok, response.body)
        if not ok:
            return


def churn_cell(concurrency: int, target: Target, limits: Limits,
               ledger: Ledger) -> dict[str, Any]:
    # Providers the storms filled up would refuse the churn's claims.
    computes = [provider for provider in target.cloud.flat_computes
                if provider not in ledger.touched] or target.cloud.flat_computes
    run = run_closed_loop(target, concurrency, limits, lambda worker: churn(worker, computes))
    result = cell_result("c.churn", concurrency, run, "op", parts=("put", "delete"))
    touched = set().union(*(worker.touched_providers for worker in run.workers))
    # Every churned allocation was deleted again: usages are what the storms left.
    result["verification"] = verify_claims(target, [], [], ledger, touched)
    result["notes"] = "PUT + DELETE, each counted"
    return result


# -- d.project-usages: the quota read -----------------------------------------------
#
# Nova counts a project's usage before each boot (GET /usages?project_id=).
# The cell first seeds 5 consumers per compute, at most PROJECT_CONSUMERS,
# of PROJECTS projects (7 users), each holding VCPU 1 and MEMORY_MB 512 on a
# flat compute; they stay, written into the ledger so that the cells after it
# still know what each provider's usage must be.

PROJECTS = 50
PROJECT_CONSUMERS = 5000


def seed_project_consumers(target: Target, ledger: Ledger) -> None:
    if target.projects:
        return
    target.projects = [f"quota-project-{index}" for index in range(PROJECTS)]
    computes = target.cloud.flat_computes
    local = threading.local()
    opened: list[Client] = []
    lock = threading.Lock()

    def claim(index: int) -> dict[str, Any]:
        if getattr(local, "client", None) is None:
            local.client = Client(target.host, target.port)
            with lock:
                opened.append(local.client)
        allocations = {computes[index % len(computes)]: {
            "resources": {"VCPU": 1, "MEMORY_MB": 512}}}
        expect(local.client, "PUT", f"/allocations/{uuid.uuid4()}", {
            "allocations": allocations, "project_id": target.projects[index % PROJECTS],
            "user_id": f"quota-user-{index % 7}", "consumer_generation": None,
            "consumer_type": "INSTANCE"}, 204)
        return allocations

    try:
        with ThreadPoolExecutor(target.seed_concurrency) as pool:
            for allocations in pool.map(
                    claim, range(min(PROJECT_CONSUMERS, 5 * len(computes)))):
                ledger.add(resources_of(allocations))
    finally:
        for client in opened:
            client.close()


def project_usages_cell(concurrency: int, target: Target, limits: Limits,
                        ledger: Ledger) -> dict[str, Any]:
    seed_project_consumers(target, ledger)
    return read_cell("d.project-usages", concurrency, target, limits, lambda worker: (
        f"/usages?project_id={worker.rng.choice(target.projects)}"))


# -- verification -------------------------------------------------------------

def verify_claims(target: Target, claims: list[tuple[str, dict[str, dict[str, int]]]],
                  rejected: list[str], ledger: Ledger,
                  providers: set[str] | None = None) -> dict[str, Any]:
    """After a storm: every 204 claim is present exactly as written, every
    claim that only got 409s left nothing, no provider is over capacity and
    every provider's usage is the sum of the claims on it."""
    providers = ledger.touched if providers is None else providers
    local = threading.local()
    opened: list[Client] = []
    lock = threading.Lock()

    def client() -> Client:
        if getattr(local, "client", None) is None:
            local.client = Client(target.host, target.port)
            with lock:
                opened.append(local.client)
        return local.client

    def allocations_of(consumer: str) -> dict[str, dict[str, int]]:
        body = expect(client(), "GET", f"/allocations/{consumer}").json()
        return resources_of(body["allocations"])

    def claim_ok(item: tuple[str, dict[str, dict[str, int]]]) -> bool:
        consumer, written = item
        return allocations_of(consumer) == written

    def provider_state(provider: str) -> tuple[bool, bool]:
        base = f"/resource_providers/{provider}"
        inventories = expect(client(), "GET", base + "/inventories").json()["inventories"]
        usages = expect(client(), "GET", base + "/usages").json()["usages"]
        over = any(used > (inventories[rc]["total"] - inventories[rc]["reserved"])
                   * inventories[rc]["allocation_ratio"]
                   for rc, used in usages.items() if rc in inventories)
        expected = ledger.usage.get(provider, {})
        matches = all(usages.get(rc, 0) == expected.get(rc, 0)
                      for rc in set(usages) | set(expected))
        return over, matches

    try:
        with ThreadPoolExecutor(4) as pool:
            present = list(pool.map(claim_ok, claims))
            leftovers = list(pool.map(lambda consumer: bool(allocations_of(consumer)),
                                      rejected))
            states = list(pool.map(provider_state, sorted(providers)))
    except UnexpectedResponse as exc:
        return {"failed": str(exc), "over_commits": -1}
    finally:
        for opened_client in opened:
            opened_client.close()
    return {
        "checked_claims": len(claims),
        "missing_claims": present.count(False),
        "checked_rejected": len(rejected),
        "rejected_with_allocations": leftovers.count(True),
        "checked_providers": len(states),
        "over_commits": sum(over for over, _ in states),
        "usage_mismatches": sum(not matches for _, matches in states),
    }


def verification_failed(verification: dict[str, Any]) -> bool:
    return bool(verification.get("failed")) or any(
        verification.get(key, 0) for key in (
            "missing_claims", "rejected_with_allocations", "over_commits",
            "usage_mismatches"))
