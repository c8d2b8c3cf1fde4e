"""The data sets, created over HTTP the way a deployment's agents would.

``cloud`` (scenarios a-d): N compute nodes, each VCPU 64 (ratio 16),
MEMORY_MB 262144 (reserved 512, ratio 1.5), DISK_GB 2000; HW_CPU_X86_AVX2 on
50 % of them, CUSTOM_GOLD on 20 %; compute i in aggregate i % 10; 10 % are
nested (the root holds DISK_GB and the traits, two NUMA children hold VCPU 32
/ MEMORY_MB 131072 each); max(2, N / 200) sharing DISK_GB providers, sharing
provider j in aggregate j % 5 (aggregates 0-4).

``trees`` (scenario e): N trees of 7 providers (a root with DISK_GB, two NUMA
children with HW_NUMA_ROOT and VCPU / MEMORY_MB, two SRIOV_NET_VF physical
functions under each NUMA node), plus one wide tree: a root with 8 children
holding 1 VGPU each.

Which computes get a trait or are nested is drawn from a seeded generator:
the same N always gives the same cloud.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from placement.bench.client import Client, expect

AGGREGATE_COUNT = 10
SHARING_AGGREGATES = 5
WIDE_CHILDREN = 8

COMPUTE_INVENTORY = {
    "VCPU": {"total": 64, "allocation_ratio": 16.0},
    "MEMORY_MB": {"total": 262144, "reserved": 512, "allocation_ratio": 1.5},
    "DISK_GB": {"total": 2000},
}
NUMA_INVENTORY = {
    "VCPU": {"total": 32, "allocation_ratio": 16.0},
    "MEMORY_MB": {"total": 131072, "reserved": 256, "allocation_ratio": 1.5},
}
ROOT_DISK_INVENTORY = {"DISK_GB": {"total": 2000}}
SHARED_DISK_INVENTORY = {"DISK_GB": {"total": 100000}}
PF_INVENTORY = {"SRIOV_NET_VF": {"total": 8}}
WIDE_CHILD_INVENTORY = {"VGPU": {"total": 1}}


@dataclass
class SeedTiming:
    seconds: float = 0.0
    requests: int = 0
    providers: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 2), "requests": self.requests,
                "providers": self.providers,
                "requests_per_second": round(self.requests / self.seconds, 1)
                if self.seconds else 0.0}


@dataclass
class Cloud:
    flat_computes: list[str] = field(default_factory=list)
    nested_roots: list[str] = field(default_factory=list)
    numa_nodes: list[str] = field(default_factory=list)
    sharing: list[str] = field(default_factory=list)
    aggregates: list[str] = field(default_factory=list)
    timing: SeedTiming = field(default_factory=SeedTiming)

    @property
    def all_providers(self) -> list[str]:
        return self.flat_computes + self.nested_roots + self.numa_nodes + self.sharing


@dataclass
class Trees:
    roots: list[str] = field(default_factory=list)
    wide_root: str = ""
    wide_children: list[str] = field(default_factory=list)
    timing: SeedTiming = field(default_factory=SeedTiming)


class Seeder:
    """Creates providers with a pool of keep-alive clients and counts requests."""

    def __init__(self, host: str, port: int, concurrency: int) -> None:
        self._host = host
        self._port = port
        self._concurrency = concurrency
        self._local = threading.local()
        self._lock = threading.Lock()
        self._clients: list[Client] = []
        self.requests = 0
        self.providers = 0
        # uuids come from a seeded generator so that runs are comparable.
        self._uuids = random.Random(20261130)

    def client(self) -> Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = Client(self._host, self._port)
            with self._lock:
                self._clients.append(client)
        return client

    def new_uuid(self) -> str:
        with self._lock:
            return str(uuid.UUID(int=self._uuids.getrandbits(128), version=4))

    def call(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        response = expect(self.client(), method, path, body, status)
        with self._lock:
            self.requests += 1
        return response.json() if response.body else None

    def create_trait(self, name: str) -> None:
        self.call("PUT", f"/traits/{name}", status=201)

    def create_provider(self, name: str, inventories: dict[str, dict[str, Any]],
                        parent: str | None = None, traits: Iterable[str] = (),
                        aggregates: Iterable[str] = ()) -> str:
        """POST the provider, then its inventories, traits and aggregates
        (each write carrying the generation the previous one returned)."""
        provider = self.new_uuid()
        body = {"name": name, "uuid": provider, "parent_provider_uuid": parent}
        generation = self.call("POST", "/resource_providers", body)["generation"]
        base = f"/resource_providers/{provider}"
        if inventories:
            generation = self.call("PUT", base + "/inventories", {
                "resource_provider_generation": generation,
                "inventories": inventories})["resource_provider_generation"]
        traits = list(traits)
        if traits:
            generation = self.call("PUT", base + "/traits", {
                "resource_provider_generation": generation,
                "traits": traits})["resource_provider_generation"]
        aggregates = list(aggregates)
        if aggregates:
            self.call("PUT", base + "/aggregates", {
                "resource_provider_generation": generation, "aggregates": aggregates})
        with self._lock:
            self.providers += 1
        return provider

    def run_all(self, tasks: list[Callable[[], Any]]) -> list[Any]:
        """Run independent tasks on the pool, in order of results; the first
        failure is raised."""
        with ThreadPoolExecutor(self._concurrency) as pool:
            return list(pool.map(lambda task: task(), tasks))

    def close(self) -> None:
        for client in self._clients:
            client.close()


def _pick(rng: random.Random, population: int, share: float) -> set[int]:
    return set(rng.sample(range(population), round(population * share)))


def seed_cloud(host: str, port: int, n: int, concurrency: int) -> Cloud:
    seeder = Seeder(host, port, concurrency)
    rng = random.Random(n)
    avx2, gold, nested = _pick(rng, n, 0.5), _pick(rng, n, 0.2), _pick(rng, n, 0.1)
    cloud = Cloud(aggregates=[str(uuid.UUID(int=rng.getrandbits(128), version=4))
                              for _ in range(AGGREGATE_COUNT)])
    started = time.perf_counter()
    try:
        seeder.create_trait("CUSTOM_GOLD")

        def compute(index: int) -> tuple[str, list[str]]:
            traits = (["HW_CPU_X86_AVX2"] if index in avx2 else []) + (
                ["CUSTOM_GOLD"] if index in gold else [])
            aggregates = [cloud.aggregates[index % AGGREGATE_COUNT]]
            name = f"compute-{index:05d}"
            if index not in nested:
                return seeder.create_provider(name, COMPUTE_INVENTORY, traits=traits,
                                              aggregates=aggregates), []
            root = seeder.create_provider(name, ROOT_DISK_INVENTORY, traits=traits,
                                          aggregates=aggregates)
            return root, [seeder.create_provider(f"{name}-numa{node}", NUMA_INVENTORY,
                                                 parent=root) for node in (0, 1)]

        def sharing(index: int) -> str:
            return seeder.create_provider(
                f"shared-disk-{index:03d}", SHARED_DISK_INVENTORY,
                traits=["MISC_SHARES_VIA_AGGREGATE"],
                aggregates=[cloud.aggregates[index % SHARING_AGGREGATES]])

        computes = seeder.run_all([lambda index=index: compute(index) for index in range(n)])
        for index, (provider, children) in enumerate(computes):
            if index in nested:
                cloud.nested_roots.append(provider)
                cloud.numa_nodes.extend(children)
            else:
                cloud.flat_computes.append(provider)
        cloud.sharing = seeder.run_all([lambda index=index: sharing(index)
                                        for index in range(max(2, n // 200))])
    finally:
        seeder.close()
    cloud.timing = SeedTiming(time.perf_counter() - started, seeder.requests, seeder.providers)
    return cloud


def seed_trees(host: str, port: int, n: int, concurrency: int) -> Trees:
    seeder = Seeder(host, port, concurrency)
    trees = Trees()
    started = time.perf_counter()
    try:
        def tree(index: int) -> str:
            name = f"tree-{index:05d}"
            root = seeder.create_provider(name, ROOT_DISK_INVENTORY)
            for node in (0, 1):
                numa = seeder.create_provider(f"{name}-numa{node}", NUMA_INVENTORY,
                                              parent=root, traits=["HW_NUMA_ROOT"])
                for function in (0, 1):
                    seeder.create_provider(f"{name}-numa{node}-pf{function}", PF_INVENTORY,
                                           parent=numa)
            return root

        trees.roots = seeder.run_all([lambda index=index: tree(index) for index in range(n)])
        trees.wide_root = seeder.create_provider("wide-root", {})
        trees.wide_children = seeder.run_all([
            lambda index=index: seeder.create_provider(
                f"wide-child-{index}", WIDE_CHILD_INVENTORY, parent=trees.wide_root)
            for index in range(WIDE_CHILDREN)])
    finally:
        seeder.close()
    trees.timing = SeedTiming(time.perf_counter() - started, seeder.requests, seeder.providers)
    return trees
