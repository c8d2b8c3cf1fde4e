"""Model-based proof that every process's copy of the providers is right
(issue 21): two real ``placement-api`` processes on one database take random
sequences of writes, at random microversions, each through either process;
after every step both processes must answer the allocation-candidate, the
provider-list and the usage requests exactly as an oracle computes them from
the database's rows with plain SQL, without any cache.

The state machine's writes: providers created (roots and children, 1.14+),
renamed, re-parented (1.37+; below, a root may only gain a parent) and
deleted (mostly leaves without allocations); inventories replaced, updated one
class at a time and deleted; custom traits created, provider traits set and
cleared; aggregates set in the list form (1.1-1.18) and with a generation
(1.19+); custom resource classes created, renamed (1.2-1.6) and deleted;
claims (``PUT /allocations/{c}`` at 1.28+, with a consumer type from 1.38),
moves (``POST /allocations``), deletes (``DELETE /allocations/{c}``) and
reshapes (``POST /reshaper``, 1.30+) moving a root's inventory and the
allocations against it to a child. Generations are read from the database
and are sometimes stale on purpose: a write may be refused (4xx), never
answered with a 5xx.

The oracle covers what the provider copy serves, on worlds without sharing
providers (no ``MISC_SHARES_VIA_AGGREGATE`` is ever set): unsuffixed groups
of one or two classes with required and forbidden traits and aggregates, and
two granular groups of different classes with ``group_policy=none``, at
nested-aware and older microversions (allocation-candidates.md sections 2-5:
every allocation request, and every provider summary's classes, capacity,
usage, traits and place in its tree). Both processes must also give the same
answers as each other.

The servers start once per backend; between examples the database is wiped
by SQL and every process told to reload, as ``placement-manage reload`` does.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import itertools
import json

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from placement.db import api as db_api
from placement.db import provider_changes, tables
from tests import db as test_db
from tests.fixtures.servers import Client, servers_on

pytestmark = pytest.mark.slow

# Few, long examples: each step is a dozen requests per process and as many
# SQL reads; fewer on the database servers, where a request costs more (about
# a minute per backend in all). Fixed examples in CI (a run fails for what the change did, not
# for what a draw happened to find); new ones at every run elsewhere. In CI a
# failure is reported as found, unshrunk (shrinking through the servers takes
# minutes): its steps and draws are printed, and a local run shrinks it.
EXAMPLES = {"sqlite": 22, "mysql": 16, "postgresql": 16}
SETTINGS = settings(stateful_step_count=25, deadline=None,
                    derandomize=test_db.in_ci(), database=None,
                    phases=[phase for phase in Phase
                            if not (test_db.in_ci() and phase is Phase.shrink)],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])

STANDARD_CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
STANDARD_TRAITS = ("HW_CPU_X86_AVX2", "HW_CPU_X86_SSE", "STORAGE_DISK_SSD")
AGGREGATES = tuple(f"00000000-0000-4000-a000-00000000000{index}" for index in (1, 2, 3))
PROJECTS = (("project-a", "user-a"), ("project-b", "user-b"))
CONSUMER_TYPES = ("INSTANCE", "MIGRATION")
MAX_PROVIDERS = 8
MAX_CUSTOM_CLASSES = 3
MAX_CUSTOM_TRAITS = 2
MAX_CONSUMERS = 6
LATEST = (1, 39)


def provider_uuid(number: int) -> str:
    # fixed uuids: examples replay alike (the database is wiped in between)
    return f"00000000-0000-4000-8000-{number:012x}"


def consumer_uuid(number: int) -> str:
    return f"00000000-0000-4000-9000-{number:012x}"


def header(version: tuple[int, int]) -> str:
    return f"placement {version[0]}.{version[1]}"


class ServiceClient(Client):
    """The fixture's client with the service role as well (POST /reshaper)."""

    roles = "admin,service"


# -- The database, read without any cache ---------------------------------------

@dataclasses.dataclass(frozen=True)
class Inventory:
    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float

    @property
    def capacity(self) -> int:
        return int((self.total - self.reserved) * self.allocation_ratio)

    def fits(self, used: int, amount: int) -> bool:
        return (used + amount <= (self.total - self.reserved) * self.allocation_ratio
                and self.min_unit <= amount <= self.max_unit and amount % self.step_size == 0)

    def record(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Provider:
    id: int
    uuid: str
    name: str
    generation: int
    parent_id: int | None
    root_id: int | None  # the column (the oracle walks the parents instead)


@dataclasses.dataclass
class Consumer:
    uuid: str
    generation: int
    project: str
    user: str
    type: str | None
    # provider uuid -> class name -> amount
    allocations: dict[str, dict[str, int]]


class World:
    """Every row the answers depend on, read in one transaction."""

    def __init__(self, engine: sa.engine.Engine) -> None:
        rp, inv, alloc = tables.resource_providers, tables.inventories, tables.allocations
        rc, trait = tables.resource_classes, tables.traits
        rp_trait = tables.resource_provider_traits
        agg, rp_agg = tables.placement_aggregates, tables.resource_provider_aggregates
        consumers, projects, users = tables.consumers, tables.projects, tables.users
        types = tables.consumer_types
        with engine.connect() as connection:
            self.providers = {row.id: Provider(row.id, row.uuid, row.name, row.generation,
                                               row.parent_provider_id, row.root_provider_id)
                              for row in connection.execute(sa.select(
                                  rp.c.id, rp.c.uuid, rp.c.name, rp.c.generation,
                                  rp.c.parent_provider_id, rp.c.root_provider_id))}
            self.class_names = dict(connection.execute(sa.select(rc.c.id, rc.c.name)).all())
            self.inventories: dict[int, dict[int, Inventory]] = collections.defaultdict(dict)
            for row in connection.execute(sa.select(
                    inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.total,
                    inv.c.reserved, inv.c.min_unit, inv.c.max_unit, inv.c.step_size,
                    inv.c.allocation_ratio)):
                self.inventories[row[0]][row[1]] = Inventory(
                    row.total, row.reserved, row.min_unit, row.max_unit, row.step_size,
                    float(row.allocation_ratio))
            # usage from the allocations themselves, not from inventories.used
            self.used: dict[tuple[int, int], int] = collections.Counter()
            allocation_rows = connection.execute(sa.select(
                alloc.c.consumer_id, alloc.c.resource_provider_id, alloc.c.resource_class_id,
                alloc.c.used)).all()
            for _, provider_id, class_id, used in allocation_rows:
                self.used[provider_id, class_id] += int(used)
            self.traits: dict[int, set[str]] = collections.defaultdict(set)
            for provider_id, name in connection.execute(
                    sa.select(rp_trait.c.resource_provider_id, trait.c.name)
                    .join(trait, trait.c.id == rp_trait.c.trait_id)):
                self.traits[provider_id].add(name)
            self.custom_traits = sorted(connection.scalars(
                sa.select(trait.c.name).where(trait.c.name.like("CUSTOM\\_%", escape="\\"))))
            self.aggregates: dict[int, set[str]] = collections.defaultdict(set)
            for provider_id, uuid in connection.execute(
                    sa.select(rp_agg.c.resource_provider_id, agg.c.uuid)
                    .join(agg, agg.c.id == rp_agg.c.aggregate_id)):
                self.aggregates[provider_id].add(uuid)
            self.consumers: dict[str, Consumer] = {}
            for row in connection.execute(
                    sa.select(consumers.c.uuid, consumers.c.generation,
                              projects.c.external_id.label("project"),
                              users.c.external_id.label("user"), types.c.name.label("type"))
                    .join(projects, projects.c.id == consumers.c.project_id)
                    .join(users, users.c.id == consumers.c.user_id)
                    .outerjoin(types, types.c.id == consumers.c.consumer_type_id)):
                self.consumers[row.uuid] = Consumer(row.uuid, row.generation, row.project,
                                                    row.user, row.type, {})
        for consumer, provider_id, class_id, used in allocation_rows:
            if consumer in self.consumers and provider_id in self.providers:
                self.consumers[consumer].allocations.setdefault(
                    self.providers[provider_id].uuid, {})[self.class_names[class_id]] = int(used)
        self.ids_by_uuid = {provider.uuid: provider.id for provider in self.providers.values()}
        self.class_ids = {name: class_id for class_id, name in self.class_names.items()}
        self.roots = {provider_id: self._walk_to_root(provider_id)
                      for provider_id in self.providers}
        self.trees: dict[int, list[int]] = collections.defaultdict(list)
        for provider_id in sorted(self.providers):
            self.trees[self.roots[provider_id]].append(provider_id)
        self.nested = any(provider.parent_id is not None for provider in self.providers.values())

    def _walk_to_root(self, provider_id: int) -> int:
        seen = set()
        while self.providers[provider_id].parent_id is not None:
            assert provider_id not in seen, f"a loop in the provider tree at {provider_id}"
            seen.add(provider_id)
            provider_id = self.providers[provider_id].parent_id
        return provider_id

    # -- what the rules pick from

    @property
    def custom_classes(self) -> list[str]:
        return sorted(name for name in self.class_names.values() if name.startswith("CUSTOM_"))

    def provider_list(self) -> list[Provider]:
        return [self.providers[provider_id] for provider_id in sorted(self.providers)]

    def holders(self) -> list[Provider]:
        """Providers with some inventory."""
        return [provider for provider in self.provider_list() if self.inventories.get(provider.id)]

    def inventory_names(self, provider: Provider) -> dict[str, Inventory]:
        return {self.class_names[class_id]: inventory
                for class_id, inventory in sorted(self.inventories.get(provider.id, {}).items())}

    def children(self, provider: Provider) -> list[Provider]:
        return [child for child in self.provider_list() if child.parent_id == provider.id]

    def has_allocations(self, provider: Provider) -> bool:
        return any(used for (provider_id, _), used in self.used.items()
                   if provider_id == provider.id)

    # -- the oracle's questions

    def fits(self, provider_id: int, class_name: str, amount: int) -> bool:
        class_id = self.class_ids.get(class_name)
        inventory = self.inventories.get(provider_id, {}).get(class_id)
        return inventory is not None and inventory.fits(self.used[provider_id, class_id], amount)

    def summary(self, provider_id: int, version: tuple[int, int],
                requested: set[str]) -> dict:
        resources = {}
        for class_id, inventory in self.inventories.get(provider_id, {}).items():
            name = self.class_names[class_id]
            if version >= (1, 27) or name in requested:
                resources[name] = {"capacity": inventory.capacity,
                                   "used": self.used[provider_id, class_id]}
        summary: dict = {"resources": resources}
        if version >= (1, 17):
            summary["traits"] = sorted(self.traits.get(provider_id, ()))
        if version >= (1, 29):
            parent = self.providers[provider_id].parent_id
            summary["parent_provider_uuid"] = self.providers[parent].uuid if parent else None
            summary["root_provider_uuid"] = self.providers[self.roots[provider_id]].uuid
        return summary

    def representation(self, provider_id: int) -> dict:
        provider = self.providers[provider_id]
        return {"uuid": provider.uuid, "name": provider.name, "generation": provider.generation,
                "parent_provider_uuid": (self.providers[provider.parent_id].uuid
                                         if provider.parent_id else None),
                "root_provider_uuid": self.providers[self.roots[provider_id]].uuid}


# -- The fixed queries and their oracle ---------------------------------------

@dataclasses.dataclass(frozen=True)
class CandidatesQuery:
    """GET /allocation_candidates: one unsuffixed group (``classes``, with
    traits and aggregates), or granular groups of one class each
    (``granular``, group_policy=none)."""

    version: tuple[int, int]
    classes: tuple[tuple[str, int], ...] = ()
    required: str | None = None
    forbidden: str | None = None
    member_of: str | None = None
    not_member_of: str | None = None
    granular: tuple[tuple[str, str, int], ...] = ()  # (suffix, class, amount)

    @property
    def path(self) -> str:
        parts = []
        if self.classes:
            parts.append("resources=" + ",".join(f"{name}:{amount}"
                                                 for name, amount in self.classes))
        traits = [self.required] if self.required else []
        traits += [f"!{self.forbidden}"] if self.forbidden else []
        if traits:
            parts.append("required=" + ",".join(traits))
        if self.member_of:
            parts.append(f"member_of={self.member_of}")
        if self.not_member_of:
            parts.append(f"member_of=!{self.not_member_of}")
        for suffix, name, amount in self.granular:
            parts.append(f"resources{suffix}={name}:{amount}")
        if self.granular:
            parts.append("group_policy=none")
        return "/allocation_candidates?" + "&".join(parts)

    def requested(self) -> set[str]:
        return {name for name, _ in self.classes} | {name for _, name, _ in self.granular}

    def expected(self, world: World) -> tuple[list, dict]:
        """The allocation requests (normalised) and the provider summaries."""
        results = []
        for root_id, tree in sorted(world.trees.items()):
            for combination in self._combinations(world, root_id, tree):
                providers = {provider_id for provider_id, _, _ in combination}
                if self.version < (1, 29) and world.nested and len(providers) > 1:
                    continue  # not nested-aware: one provider per tree
                results.append((root_id, combination))
        requests = sorted({self._normal(world, combination) for _, combination in results},
                          key=repr)
        if self.version >= (1, 29):
            shown = {provider_id for root_id, _ in results for provider_id in world.trees[root_id]}
        else:
            shown = {provider_id for _, combination in results
                     for provider_id, _, _ in combination}
        summaries = {world.providers[provider_id].uuid:
                     world.summary(provider_id, self.version, self.requested())
                     for provider_id in shown}
        return requests, summaries

    def _combinations(self, world: World, root_id: int, tree: list[int]):
        """The candidates in one tree: per group and class, (provider id,
        (class, suffix), amount)."""
        if self.granular:
            choices = [[(provider_id, name, amount, suffix) for provider_id in tree
                        if world.fits(provider_id, name, amount)]
                       for suffix, name, amount in self.granular]
            for combination in itertools.product(*choices):
                yield tuple((p, (name, suffix), amount) for p, name, amount, suffix in combination)
            return
        root_aggregates = world.aggregates.get(root_id, set())

        def member(provider_id: int, aggregate: str) -> bool:
            # an aggregate on the root covers its whole tree
            return aggregate in world.aggregates.get(provider_id, set()) or (
                aggregate in root_aggregates)

        choices = []
        for name, amount in self.classes:
            choices.append([
                provider_id for provider_id in tree
                if world.fits(provider_id, name, amount)
                and (self.member_of is None or member(provider_id, self.member_of))
                and (self.not_member_of is None or not member(provider_id, self.not_member_of))])
        for combination in itertools.product(*choices):
            providers = set(combination)
            traits = set().union(*(world.traits.get(p, set()) for p in providers))
            if self.required and self.required not in traits:
                continue  # traits of the providers that give resources only
            if self.forbidden and any(self.forbidden in world.traits.get(p, set())
                                      for p in providers):
                continue
            yield tuple((p, (name, ""), amount)
                        for p, (name, amount) in zip(combination, self.classes, strict=True))

    def _normal(self, world: World, combination) -> tuple:
        allocations = collections.Counter()
        mappings = collections.defaultdict(set)
        for provider_id, (name, suffix), amount in combination:
            allocations[world.providers[provider_id].uuid, name] += amount
            mappings[suffix].add(world.providers[provider_id].uuid)
        return normal_request(allocations, mappings if self.version >= (1, 34) else None)


def normal_request(allocations: collections.Counter, mappings: dict | None) -> tuple:
    """An allocation request as ((provider, class, amount), ...) and its
    mappings ((suffix, providers), ...) or None (below 1.34)."""
    return (tuple(sorted((uuid, name, amount) for (uuid, name), amount in allocations.items())),
            None if mappings is None else tuple(sorted(
                (suffix, tuple(sorted(uuids))) for suffix, uuids in mappings.items())))


def normal_candidates(body: dict, version: tuple[int, int]) -> tuple[list, dict]:
    requests = []
    for request in body["allocation_requests"]:
        allocations = collections.Counter()
        for uuid, entry in request["allocations"].items():
            for name, amount in entry["resources"].items():
                allocations[uuid, name] += amount
        mappings = request.get("mappings") if version >= (1, 34) else None
        if mappings is not None:
            mappings = {suffix: set(uuids) for suffix, uuids in mappings.items()}
        assert set(request) == ({"allocations", "mappings"} if version >= (1, 34)
                                else {"allocations"}), request
        requests.append(normal_request(allocations, mappings))
    summaries = {uuid: {**summary, **({"traits": sorted(summary["traits"])}
                                      if "traits" in summary else {})}
                 for uuid, summary in body["provider_summaries"].items()}
    return sorted(requests, key=repr), summaries


@dataclasses.dataclass(frozen=True)
class ProvidersQuery:
    """GET /resource_providers?resources=...: the providers that have
    capacity themselves (no tree, no sharing), with the trait and aggregate."""

    version: tuple[int, int]
    classes: tuple[tuple[str, int], ...]
    required: str | None = None
    member_of: str | None = None

    @property
    def path(self) -> str:
        query = "resources=" + ",".join(f"{name}:{amount}" for name, amount in self.classes)
        if self.required:
            query += f"&required={self.required}"
        if self.member_of:
            query += f"&member_of={self.member_of}"
        return "/resource_providers?" + query

    def expected(self, world: World) -> list[dict]:
        return sorted((world.representation(provider_id) for provider_id in world.providers
                       if all(world.fits(provider_id, name, amount)
                              for name, amount in self.classes)
                       and (self.required is None
                            or self.required in world.traits.get(provider_id, set()))
                       and (self.member_of is None
                            or self.member_of in world.aggregates.get(provider_id, set()))),
                      key=lambda representation: representation["uuid"])


def normal_providers(body: dict) -> list[dict]:
    keys = ("uuid", "name", "generation", "parent_provider_uuid", "root_provider_uuid")
    return sorted(({key: provider[key] for key in keys} for provider in body["resource_providers"]),
                  key=lambda representation: representation["uuid"])


def fixed_queries(world: World) -> list:
    """The query shapes, filled in from what the database holds now."""
    used_classes = {world.class_names[class_id] for inventories in world.inventories.values()
                    for class_id in inventories}
    custom = next((name for name in world.custom_classes if name in used_classes),
                  world.custom_classes[0] if world.custom_classes else "MEMORY_MB")
    trait = min(set().union(*world.traits.values()), default=STANDARD_TRAITS[0])
    aggregate = min(set().union(*world.aggregates.values()), default=AGGREGATES[0])
    # one class at a time, every class some inventory has: the summaries
    # show every tree with some capacity left
    singles = [CandidatesQuery(LATEST, ((name, 1),)) for name in sorted(used_classes - {"VCPU"})]
    return singles + [
        CandidatesQuery(LATEST, (("VCPU", 1),)),
        CandidatesQuery((1, 17), (("VCPU", 2),), required=trait),
        CandidatesQuery(LATEST, (("VCPU", 1), (custom, 1))),
        CandidatesQuery((1, 31), ((custom, 1),)),
        CandidatesQuery((1, 26), (("VCPU", 1), ("MEMORY_MB", 2))),
        CandidatesQuery((1, 29), (("DISK_GB", 1), ("VCPU", 1)), required=trait),
        CandidatesQuery((1, 24), (("MEMORY_MB", 1),), member_of=aggregate),
        CandidatesQuery(LATEST, (("VCPU", 1),), forbidden=trait, not_member_of=aggregate),
        CandidatesQuery(LATEST, (("VCPU", 1), ("DISK_GB", 1)), required=trait,
                        member_of=aggregate),
        CandidatesQuery(LATEST, granular=(("1", "VCPU", 1), ("2", "MEMORY_MB", 1))),
        CandidatesQuery((1, 25), granular=(("1", "VCPU", 1), ("2", custom, 1))),
        ProvidersQuery(LATEST, (("VCPU", 1),)),
        ProvidersQuery((1, 18), (("VCPU", 1), (custom, 1)), required=trait),
        ProvidersQuery(LATEST, (("MEMORY_MB", 1),), member_of=aggregate),
    ]


# -- The state machine ------------------------------------------------------------

@st.composite
def inventory_records(draw) -> dict:
    total = draw(st.integers(1, 12))
    return {"total": total,
            "reserved": draw(st.sampled_from([0, 0, 0, 0, 0, 1, total])),
            "min_unit": draw(st.sampled_from([1, 1, 1, 2])),
            "max_unit": draw(st.sampled_from([total, 2147483647, total, 2])),
            "step_size": draw(st.sampled_from([1, 1, 1, 2])),
            "allocation_ratio": draw(st.sampled_from([1.0, 1.0, 1.5, 2.0]))}


def versions(low: int, high: int = 39) -> st.SearchStrategy[tuple[int, int]]:
    return st.integers(low, high).map(lambda minor: (1, minor))


class CoherenceMachine(RuleBasedStateMachine):
    """Random writes through random processes; after each one every process
    must answer as the database says. ``clients``, ``engine`` and
    ``statuses`` are set by the test (one set of servers per backend)."""

    clients: list[Client] = []
    engine: sa.engine.Engine
    statuses: collections.Counter

    def __init__(self) -> None:
        super().__init__()
        # a fresh database for every example, and every process reloading
        test_db._wipe(self.engine)
        with self.engine.begin() as connection:
            provider_changes.request_reload(connection)
        self.numbers = itertools.count(1)
        self.world = World(self.engine)

    # -- helpers

    def send(self, data, method: str, path: str, body: object, version: tuple[int, int],
             route: str) -> tuple[int, object]:
        process = data.draw(st.integers(0, len(self.clients) - 1), label="process")
        status, answer = self.clients[process].request(method, path, body, header(version))
        self.statuses[route, f"{status // 100}xx"] += 1
        assert status != 0, f"process {process} gave no answer to {method} {path}"
        assert status < 500, (f"process {process}: {method} {path} at {header(version)} "
                              f"{json.dumps(body)} -> {status} {answer}")
        return status, answer

    def generation(self, data, current: int) -> int:
        # now and then a stale one (409 expected)
        return data.draw(st.sampled_from([current] * 5 + [current - 1]), label="generation")

    def provider(self, data, among: list[Provider] | None = None) -> Provider:
        return data.draw(st.sampled_from(among or self.world.provider_list()), label="provider")

    def consumer_body(self, data, version: tuple[int, int], consumer: Consumer | None,
                      allocations: dict) -> dict:
        project, user = ((consumer.project, consumer.user) if consumer else
                         data.draw(st.sampled_from(PROJECTS), label="project"))
        body = {"allocations": allocations, "project_id": project, "user_id": user}
        if version >= (1, 28):
            current = consumer.generation if consumer else None
            stale = [consumer.generation + 1 if consumer else 0]
            body["consumer_generation"] = data.draw(st.sampled_from([current] * 5 + stale),
                                                    label="consumer generation")
        if version >= (1, 38):
            body["consumer_type"] = data.draw(st.sampled_from(CONSUMER_TYPES), label="type")
        return body

    def new_allocations(self, data) -> dict:
        """Allocations on one or two providers, mostly of amounts that fit."""
        holders = self.world.holders()
        chosen = data.draw(st.lists(st.sampled_from(holders), min_size=1, max_size=2,
                                    unique_by=lambda provider: provider.id), label="providers")
        allocations = {}
        for provider in chosen:
            names = sorted(self.world.inventory_names(provider))
            # mostly classes with room left
            roomy = [name for name in names if self.world.fits(provider.id, name, 1)
                     or self.world.fits(provider.id, name, 2)]
            if roomy and data.draw(st.sampled_from([True] * 4 + [False]), label="roomy"):
                names = roomy
            classes = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=2,
                                         unique=True), label="classes")
            resources = {}
            for name in classes:
                fitting = [amount for amount in (1, 2, 3)
                           if self.world.fits(provider.id, name, amount)]
                resources[name] = data.draw(st.sampled_from(fitting * 3 + [1, 2, 3]),
                                            label="amount")
            allocations[provider.uuid] = {"resources": resources}
        return allocations

    def has_providers(self) -> bool:
        return bool(self.world.providers)

    def has_holders(self) -> bool:
        return bool(self.world.holders())

    # -- a first world (so that claims, moves and reshapes have something to
    # work on from the first steps), with a claim or two and a move

    @initialize(data=st.data())
    def seed(self, data):
        if data.draw(st.booleans(), label="custom class"):
            self.create_class(data, data.draw(versions(2), label="version"))
            self.world = World(self.engine)
        for _ in range(data.draw(st.integers(1, 2), label="roots")):
            root = self.new_provider(data, None)
            for _ in range(data.draw(st.integers(0, 2), label="children")):
                self.new_provider(data, root)
        for _ in range(data.draw(st.integers(0, 2), label="claims")):
            self.world = World(self.engine)
            if self.world.holders():
                self.claim(data, data.draw(versions(28), label="version"))
        self.world = World(self.engine)
        if self.world.consumers:  # and a move (the rules make few)
            self.move_allocations(data, data.draw(versions(13), label="version"))

    def new_provider(self, data, parent: str | None) -> str:
        number = next(self.numbers)
        uuid = provider_uuid(number)
        body = {"name": f"rp-{number}", "uuid": uuid}
        if parent:
            body["parent_provider_uuid"] = parent
        self.send(data, "POST", "/resource_providers", body,
                  data.draw(versions(14), label="version"),
                  "create provider")
        classes = data.draw(st.lists(st.sampled_from(
            STANDARD_CLASSES + tuple(self.world.custom_classes)), max_size=3, unique=True),
            label="classes")
        if classes:
            self.send(data, "PUT", f"/resource_providers/{uuid}/inventories", {
                "resource_provider_generation": 0,
                "inventories": {name: data.draw(inventory_records(), label=name)
                                for name in classes}}, data.draw(versions(26), label="version"),
                "put inventories")
        return uuid

    # -- providers

    @precondition(lambda self: len(self.world.providers) < MAX_PROVIDERS)
    @rule(data=st.data(), version=versions(14))
    def create_provider(self, data, version):
        number = next(self.numbers)
        body = {"name": f"rp-{number}", "uuid": provider_uuid(number)}
        if self.world.providers and data.draw(st.booleans(), label="child"):
            body["parent_provider_uuid"] = self.provider(data).uuid
        self.send(data, "POST", "/resource_providers", body, version, "create provider")

    @precondition(has_providers)
    @rule(data=st.data(), version=versions(1))
    def rename_provider(self, data, version):
        provider = self.provider(data)
        names = [f"rp-{next(self.numbers)}"] * 3 + [p.name for p in self.world.provider_list()]
        body = {"name": data.draw(st.sampled_from(names), label="name")}
        if version >= (1, 14) and data.draw(st.booleans(), label="with parent"):
            parent = self.world.providers.get(provider.parent_id)
            body["parent_provider_uuid"] = parent.uuid if parent else None
        self.send(data, "PUT", f"/resource_providers/{provider.uuid}", body, version,
                  "rename provider")

    @precondition(has_providers)
    @rule(data=st.data(), version=versions(14))
    def reparent_provider(self, data, version):
        provider = self.provider(data)
        others = [p.uuid for p in self.world.provider_list() if p.id != provider.id]
        parent = data.draw(st.sampled_from([None, *others]), label="new parent")
        self.send(data, "PUT", f"/resource_providers/{provider.uuid}",
                  {"name": provider.name, "parent_provider_uuid": parent}, version,
                  "re-parent provider")

    @precondition(has_providers)
    @rule(data=st.data(), version=versions(1))
    def delete_provider(self, data, version):
        leaves = [p for p in self.world.provider_list()
                  if not self.world.children(p) and not self.world.has_allocations(p)]
        if leaves and data.draw(st.integers(0, 4), label="any provider") != 0:
            provider = self.provider(data, leaves)
        else:
            provider = self.provider(data)
        self.send(data, "DELETE", f"/resource_providers/{provider.uuid}", None, version,
                  "delete provider")

    # -- inventories

    @precondition(has_providers)
    @rule(data=st.data(), version=versions(1))
    def put_inventories(self, data, version):
        provider = self.provider(data)
        classes = data.draw(st.lists(st.sampled_from(STANDARD_CLASSES + tuple(
            self.world.custom_classes)), max_size=3, unique=True), label="classes")
        self.send(data, "PUT", f"/resource_providers/{provider.uuid}/inventories", {
            "resource_provider_generation": self.generation(data, provider.generation),
            "inventories": {name: data.draw(inventory_records(), label=name)
                            for name in classes}}, version, "put inventories")

    @precondition(has_holders)
    @rule(data=st.data(), version=versions(1))
    def put_one_inventory(self, data, version):
        provider = self.provider(data, self.world.holders())
        name = data.draw(st.sampled_from(sorted(self.world.inventory_names(provider))),
                         label="class")
        body = {"resource_provider_generation": self.generation(data, provider.generation),
                **data.draw(inventory_records(), label="record")}
        self.send(data, "PUT", f"/resource_providers/{provider.uuid}/inventories/{name}", body,
                  version, "put one inventory")

    @precondition(has_holders)
    @rule(data=st.data(), version=versions(5))
    def delete_inventories(self, data, version):
        provider = self.provider(data, self.world.holders())
        path = f"/resource_providers/{provider.uuid}/inventories"
        if data.draw(st.booleans(), label="one class"):
            path += "/" + data.draw(st.sampled_from(sorted(
                self.world.inventory_names(provider))), label="class")
        self.send(data, "DELETE", path, None, version, "delete inventories")

    # -- traits

    @precondition(has_providers)
    @rule(data=st.data(), version=versions(6))
    def set_traits(self, data, version):
        """A provider's traits replaced (a new custom trait among them, now
        and then) or cleared."""
        provider = self.provider(data)
        if data.draw(st.integers(0, 3), label="clear") == 0:
            self.send(data, "DELETE", f"/resource_providers/{provider.uuid}/traits", None,
                      version, "clear traits")
            return
        custom = list(self.world.custom_traits)
        if len(custom) < MAX_CUSTOM_TRAITS and data.draw(st.booleans(), label="new trait"):
            custom.append(f"CUSTOM_T{next(self.numbers)}")
            self.send(data, "PUT", f"/traits/{custom[-1]}", None, version, "create trait")
        traits = data.draw(st.lists(st.sampled_from(STANDARD_TRAITS + tuple(custom)),
                                    max_size=3, unique=True), label="traits")
        self.send(data, "PUT", f"/resource_providers/{provider.uuid}/traits", {
            "resource_provider_generation": self.generation(data, provider.generation),
            "traits": traits}, version, "set traits")

    # -- aggregates

    @precondition(has_providers)
    @rule(data=st.data(), version=versions(1))
    def set_aggregates(self, data, version):
        provider = self.provider(data)
        aggregates = data.draw(st.lists(st.sampled_from(AGGREGATES), max_size=2, unique=True),
                               label="aggregates")
        body: object = aggregates
        if version >= (1, 19):
            body = {"aggregates": aggregates,
                    "resource_provider_generation": self.generation(data, provider.generation)}
        self.send(data, "PUT", f"/resource_providers/{provider.uuid}/aggregates", body, version,
                  "set aggregates")

    # -- resource classes

    @precondition(lambda self: len(self.world.custom_classes) < MAX_CUSTOM_CLASSES)
    @rule(data=st.data(), version=versions(2))
    def create_class(self, data, version):
        """A custom class, and mostly an inventory of it at once (POST
        /resource_providers/{u}/inventories)."""
        name = f"CUSTOM_C{next(self.numbers)}"
        if version >= (1, 7) and data.draw(st.booleans(), label="by PUT"):
            status, _ = self.send(data, "PUT", f"/resource_classes/{name}", None, version,
                                  "create class")
        else:
            status, _ = self.send(data, "POST", "/resource_classes", {"name": name}, version,
                                  "create class")
        if status < 400 and self.world.providers and data.draw(
                st.sampled_from([True, True, False]), label="inventory of it"):
            provider = self.provider(data)
            self.send(data, "POST", f"/resource_providers/{provider.uuid}/inventories",
                      {"resource_class": name, **data.draw(inventory_records(), label="record")},
                      version, "post inventory")

    @precondition(lambda self: self.world.custom_classes)
    @rule(data=st.data(), version=versions(2, 6))
    def rename_class(self, data, version):
        # mostly one that some inventory has (provider summaries name it)
        used = sorted({self.world.class_names[class_id]
                       for inventories in self.world.inventories.values()
                       for class_id in inventories} & set(self.world.custom_classes))
        name = data.draw(st.sampled_from(used * 3 + self.world.custom_classes), label="class")
        new = data.draw(st.sampled_from([f"CUSTOM_C{next(self.numbers)}"] * 5
                                        + self.world.custom_classes), label="new name")
        self.send(data, "PUT", f"/resource_classes/{name}", {"name": new}, version,
                  "rename class")

    @precondition(lambda self: self.world.custom_classes)
    @rule(data=st.data(), version=versions(2))
    def delete_class(self, data, version):
        name = data.draw(st.sampled_from(self.world.custom_classes), label="class")
        self.send(data, "DELETE", f"/resource_classes/{name}", None, version, "delete class")

    # -- allocations

    def consumer(self, data) -> Consumer | None:
        """An existing consumer, or None for a new one."""
        existing = sorted(self.world.consumers)
        choices = existing + ([None] if len(existing) < MAX_CONSUMERS else [])
        chosen = data.draw(st.sampled_from(choices), label="consumer") if choices else None
        return self.world.consumers[chosen] if chosen else None

    @precondition(has_holders)
    @rule(data=st.data())
    def write_allocations(self, data):
        """One allocation write: a claim (PUT /allocations/{c}), mostly, or
        a move (POST /allocations) or a delete (DELETE /allocations/{c}).
        One rule for the three: as rules of their own, hypothesis drew moves
        and deletes a few times a run."""
        kinds = ["claim"] * 3 + (["move"] * 2 + ["delete"] if self.world.consumers else [])
        kind = data.draw(st.sampled_from(kinds), label="kind")
        if kind == "claim":
            self.claim(data, data.draw(versions(28), label="version"))
        elif kind == "move":
            self.move_allocations(data, data.draw(versions(13), label="version"))
        else:
            self.delete_allocations(data, data.draw(versions(1), label="version"))

    def claim(self, data, version):
        """PUT /allocations/{c}: a new or existing consumer's allocations
        replaced (or emptied)."""
        consumer = self.consumer(data)
        uuid = consumer.uuid if consumer else consumer_uuid(next(self.numbers))
        allocations = ({} if consumer and data.draw(st.integers(0, 3), label="empty") == 0
                       else self.new_allocations(data))
        self.send(data, "PUT", f"/allocations/{uuid}",
                  self.consumer_body(data, version, consumer, allocations), version, "claim")

    def move_allocations(self, data, version):
        """POST /allocations: a consumer's resources moved to another
        provider with such classes, and another consumer written at once."""
        consumer = self.world.consumers[data.draw(st.sampled_from(sorted(self.world.consumers)),
                                                  label="consumer")]
        target = self.provider(data, self.world.holders())
        target_classes = self.world.inventory_names(target)
        moved: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for uuid, resources in consumer.allocations.items():
            for name, amount in resources.items():
                where = target.uuid if name in target_classes else uuid
                moved[where][name] = moved[where].get(name, 0) + amount
        body = {consumer.uuid: self.consumer_body(
            data, version, consumer, {uuid: {"resources": resources}
                                      for uuid, resources in moved.items()})}
        second = self.consumer(data)
        if second is None or second.uuid != consumer.uuid:
            if second is not None and data.draw(st.booleans(), label="remove second"):
                allocations = {}
            else:
                allocations = self.new_allocations(data)
            uuid = second.uuid if second else consumer_uuid(next(self.numbers))
            body[uuid] = self.consumer_body(data, version, second, allocations)
        self.send(data, "POST", "/allocations", body, version, "move allocations")

    def delete_allocations(self, data, version):
        uuid = data.draw(st.sampled_from(sorted(self.world.consumers)), label="consumer")
        self.send(data, "DELETE", f"/allocations/{uuid}", None, version, "delete allocations")

    def reshapeable(self) -> list[tuple[Provider, Provider, str]]:
        """(parent, child, class): the parent has an inventory the child has not."""
        world = self.world
        return [(parent, child, name)
                for parent in world.holders() for child in world.children(parent)
                for name in world.inventory_names(parent)
                if name not in world.inventory_names(child)]

    @precondition(lambda self: self.reshapeable())
    @rule(data=st.data(), version=versions(30))
    def reshape(self, data, version):
        """An inventory moves from a provider to its child, with the
        allocations against it."""
        parent, child, name = data.draw(st.sampled_from(self.reshapeable()), label="move")
        parent_inventories = self.world.inventory_names(parent)
        child_inventories = self.world.inventory_names(child)
        inventories = {
            parent.uuid: {"resource_provider_generation": self.generation(data, parent.generation),
                          "inventories": {n: inventory.record()
                                          for n, inventory in parent_inventories.items()
                                          if n != name}},
            child.uuid: {"resource_provider_generation": self.generation(data, child.generation),
                         "inventories": {**{n: inventory.record()
                                            for n, inventory in child_inventories.items()},
                                         name: parent_inventories[name].record()}}}
        allocations = {}
        for consumer in self.world.consumers.values():
            amount = consumer.allocations.get(parent.uuid, {}).get(name)
            if amount is None:
                continue
            moved = {uuid: dict(resources) for uuid, resources in consumer.allocations.items()}
            del moved[parent.uuid][name]
            if not moved[parent.uuid]:
                del moved[parent.uuid]
            moved.setdefault(child.uuid, {})[name] = amount
            allocations[consumer.uuid] = self.consumer_body(
                data, version, consumer,
                {uuid: {"resources": resources} for uuid, resources in moved.items()})
        self.send(data, "POST", "/reshaper",
                  {"inventories": inventories, "allocations": allocations}, version, "reshape")

    # -- the invariant

    @invariant()
    def every_process_answers_as_the_database(self):
        self.world = world = World(self.engine)
        # the processes asked at once (each through its own connection)
        with concurrent.futures.ThreadPoolExecutor(len(self.clients)) as pool:
            answers = list(pool.map(lambda index: self.answers(index, world),
                                    range(len(self.clients))))
        for path, first in answers[0].items():
            assert first == answers[1][path], (
                f"the two processes answer {path} differently:\n{first}\n{answers[1][path]}")

    def answers(self, index: int, world: World) -> dict:
        client = self.clients[index]
        answers = {}
        for query in fixed_queries(world):
            path = f"{query.path} at {header(query.version)}"
            status, body = client.request("GET", query.path, version=header(query.version))
            assert status == 200, (index, path, status, body)
            if isinstance(query, CandidatesQuery):
                requests, summaries = normal_candidates(body, query.version)
                expected_requests, expected_summaries = query.expected(world)
                _compare(index, path, "allocation requests", requests, expected_requests)
                _compare(index, path, "provider summaries", summaries, expected_summaries)
                answers[path] = (requests, summaries)
            else:
                providers = normal_providers(body)
                _compare(index, path, "providers", providers, query.expected(world))
                answers[path] = providers
        for provider in world.provider_list():
            path = f"/resource_providers/{provider.uuid}/usages"
            status, body = client.request("GET", path, version=header(LATEST))
            assert status == 200, (index, path, status, body)
            expected = {"resource_provider_generation": provider.generation, "usages": {
                world.class_names[class_id]: world.used[provider.id, class_id]
                for class_id in world.inventories.get(provider.id, {})}}
            _compare(index, path, "usages", body, expected)
            answers[path] = body
        return answers


def _compare(index: int, path: str, what: str, got, expected) -> None:
    if got == expected:
        return
    if isinstance(got, dict) and isinstance(expected, dict):
        detail = {key: {"answered": got.get(key), "database": expected.get(key)}
                  for key in sorted(got.keys() | expected.keys())
                  if got.get(key) != expected.get(key)}
    elif isinstance(got, list) and isinstance(expected, list):
        detail = {"answered only": [item for item in got if item not in expected],
                  "database only": [item for item in expected if item not in got]}
    else:
        detail = {"answered": got, "database": expected}
    raise AssertionError(f"process {index}: GET {path}: {what} differ from the database's: "
                         f"{json.dumps(detail, default=str, indent=1)}")


def test_every_process_answers_as_the_database_after_every_write(backend, tmp_path, report):
    with servers_on(backend, str(tmp_path), 2) as (running, url):
        engine = db_api.create_engine(url)
        statuses: collections.Counter = collections.Counter()
        machine = type("Machine", (CoherenceMachine,), {
            "clients": [ServiceClient(port) for port in running.ports],
            "engine": engine, "statuses": statuses})
        try:
            run_state_machine_as_test(
                machine, settings=settings(SETTINGS, max_examples=EXAMPLES[backend]))
        finally:
            for client in machine.clients:
                client.close()
            engine.dispose()
            assert running.all_running(), running.logs()
        accepted = sum(count for (_, status), count in statuses.items() if status == "2xx")
        report(f"cache coherence on {backend}: {sum(statuses.values())} writes, "
               f"{accepted} accepted; by route: " + ", ".join(
                   f"{route} {status}: {count}"
                   for (route, status), count in sorted(statuses.items())))
