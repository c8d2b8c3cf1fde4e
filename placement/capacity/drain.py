"""What a drain leaves: providers (with their descendants) or an
aggregate's taken out, and whether each consumer now on them could be
placed elsewhere by its current allocations, simulated in memory (largest
first: the hardest to place go while there is most room). Read-only."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable

import sqlalchemy as sa

from placement import exceptions
from placement.candidates import find
from placement.candidates.follower import among
from placement.candidates.model import RequestGroup, SearchOptions
from placement.candidates.provider_copy import ProviderCopy
from placement.capacity.simulate import SimulatedWorld, one_at_a_time
from placement.capacity.tables import class_table, free_slots
from placement.capacity.usages import Usages
from placement.db import api as db_api
from placement.db import tables

_alloc = tables.allocations
_rc = tables.resource_classes


@dataclasses.dataclass
class Unplaced:
    consumer: str
    resources: dict[str, int]
    reason: str


@dataclasses.dataclass
class Evacuation:
    providers: list[str]  # uuids taken out, descendants included
    consumers: int
    placed: int
    unplaced: list[Unplaced]

    @property
    def all_placed(self) -> bool:
        return not self.unplaced


def drained_providers(copy: ProviderCopy, provider_uuids: list[str],
                      aggregate_uuid: str | None) -> frozenset[int]:
    """The providers named, those of the aggregate and all their
    descendants. An unknown uuid raises InvalidInput."""
    chosen = set()
    for uuid in provider_uuids:
        if uuid not in copy.ids_by_uuid:
            raise exceptions.InvalidInput(f"No resource provider with uuid {uuid} to drain.")
        chosen.add(copy.ids_by_uuid[uuid])
    if aggregate_uuid is not None:
        chosen.update(copy.aggregate_members.get(aggregate_uuid, ()))
    providers = copy.providers
    drained = set(chosen)
    for root_id in {providers[provider_id].root_id for provider_id in chosen}:
        for provider_id in copy.trees[root_id]:
            lineage = provider_id
            while lineage is not None and lineage not in chosen:
                lineage = providers[lineage].parent_id
            if lineage is not None:
                drained.add(provider_id)
    return frozenset(drained)


def _consumers_on(connection: sa.engine.Connection, drained: frozenset[int]
                  ) -> dict[str, dict[str, int]]:
    """Consumer uuid -> what it has on the drained providers, by class."""
    on: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for ids in db_api.chunks(drained):
        rows = connection.execute(
            sa.select(_alloc.c.consumer_id, _rc.c.name, _alloc.c.used)
            .join(_rc, _rc.c.id == _alloc.c.resource_class_id)
            .where(among(_alloc.c.resource_provider_id, ids)))
        for consumer, class_name, amount in rows:
            on[consumer][class_name] += amount
    return {consumer: dict(resources) for consumer, resources in on.items()}


def evacuate(connection: sa.engine.Connection, copy: ProviderCopy, drained: frozenset[int],
             used: Usages) -> Evacuation:
    """Could every consumer on the ``drained`` providers be placed
    elsewhere, one group of what it has there each, largest first, each
    claim simulated before the next consumer is tried?"""
    consumers = _consumers_on(connection, drained)
    uuids = sorted(copy.providers[provider_id].uuid for provider_id in drained)
    if not consumers:
        return Evacuation(uuids, 0, 0, [])
    groups_of = {consumer: [RequestGroup("", resources)]
                 for consumer, resources in consumers.items()}
    shape = [RequestGroup("", {name: 1 for resources in consumers.values()
                               for name in resources})]
    options = one_at_a_time(SearchOptions())
    _, world, class_ids = find.prepare(connection, shape, options)
    class_names = {class_id: name for name, class_id in class_ids.items()}
    everywhere = copy.anchors([(class_id, frozenset()) for class_id in class_ids.values()],
                              (), (), any_class=True)
    simulated = SimulatedWorld(copy, world, class_names, used.pairs(class_names), everywhere,
                               drained)
    unplaced = []
    for consumer in sorted(consumers, key=_size(copy, class_ids, consumers), reverse=True):
        result = simulated.first(groups_of[consumer], options)
        if result is None:
            unplaced.append(Unplaced(consumer, consumers[consumer], _why(
                copy, class_ids, consumers[consumer], used, drained)))
        else:
            simulated.claim(result.allocations, 1)
    return Evacuation(uuids, len(consumers), len(consumers) - len(unplaced), unplaced)


def _size(copy: ProviderCopy, class_ids: dict[str, int],
          consumers: dict[str, dict[str, int]]) -> Callable[[str], tuple[float, str]]:
    """A consumer's size: the share of the largest inventory of each
    class it takes, summed (classes in units of their own)."""
    largest = {name: max(class_table(copy, class_id).capacities, default=1) or 1
               for name, class_id in class_ids.items()}

    def size(consumer: str) -> tuple[float, str]:
        return (sum(amount / largest[name] for name, amount in consumers[consumer].items()),
                consumer)
    return size


def _why(copy: ProviderCopy, class_ids: dict[str, int], resources: dict[str, int],
         used: Usages, drained: frozenset[int]) -> str:
    """Why a consumer found no place: a class no provider left has room
    for (before the simulated claims), or its classes not together."""
    for name, amount in resources.items():
        class_id = class_ids[name]
        if not any(free_slots(class_table(copy, class_id), used.of(class_id),
                              amount, drained)):
            return f"no provider outside the drain has room for {name}:{amount}"
    wanted = ",".join(f"{name}:{amount}" for name, amount in resources.items())
    return f"no tree outside the drain has room for {wanted} together"
