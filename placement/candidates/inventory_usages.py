"""Every provider's inventories with their usages, from the provider copy
and one read of the usages: what ``GET /capacity/providers`` lists and the
capacity gauges of ``GET /metrics`` add up (``placement.capacity.resource_gauges``).

The inventories come from the copy, brought up to date with the change
record in the caller's transaction (``follower.current``), so reading them
costs nothing; the usages, which every claim moves, are read from the
database in that transaction, only where some is allocated. At 20 000
computes that is a few thousand short rows, where reading the inventory
rows again would be some sixty thousand rows of nine columns.

A usage is kept only for a class the copy holds an inventory of: a read
made after the change counters may see an inventory newer than the copy
(and allocations against it), which the next request will show whole.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import NamedTuple

import sqlalchemy as sa

from placement.candidates.follower import current, usages
from placement.candidates.memo import Key
from placement.candidates.provider_copy import ProviderCopy
from placement.objects import resource_class

__all__ = ["CLOUD", "Snapshot", "Total", "capacity_totals", "read"]

# The aggregate label of the whole cloud's totals.
CLOUD = ""


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The providers of one copy with the usages read beside it."""

    copy: ProviderCopy
    # provider id -> class id -> amount allocated, where any is
    used: dict[int, dict[int, int]]
    # class id -> name, for every class some provider has an inventory of
    names: dict[int, str]

    def report(self, provider_id: int, name: str, generation: int) -> dict | None:
        """The provider (with the ``name`` and ``generation`` its caller
        read) by its uuid, parent and root uuids, inventories
        ({class name: fields as the API shows them}) and usages ({class
        name: amount}, 0 where none, only classes with inventory) in class
        id order, as GET /resource_providers/{uuid}, /inventories and
        /usages show them; None when the copy does not hold the provider
        (one created after it, which the next request will show)."""
        providers = self.copy.providers
        provider = providers.get(provider_id)
        if provider is None:
            return None
        used = self.used.get(provider_id, {})
        inventories, amounts = {}, {}
        for class_id in sorted(provider.inventories):
            inventory = provider.inventories[class_id]
            class_name = self.names[class_id]
            # a literal: dict(zip(FIELDS, ...)) costs twice as much, for
            # tens of thousands of inventories
            inventories[class_name] = {
                "total": inventory.total, "reserved": inventory.reserved,
                "min_unit": inventory.min_unit, "max_unit": inventory.max_unit,
                "step_size": inventory.step_size,
                "allocation_ratio": float(inventory.allocation_ratio)}
            amounts[class_name] = used.get(class_id, 0)
        parent = providers.get(provider.parent_id) if provider.parent_id else None
        return {"uuid": provider.uuid, "name": name, "generation": generation,
                "parent_provider_uuid": parent.uuid if parent else None,
                "root_provider_uuid": providers[provider.root_id].uuid,
                "inventories": inventories, "usages": amounts}


def read(connection: sa.engine.Connection) -> Snapshot:
    """The providers as ``connection``'s transaction sees them (the copy,
    never older) and their usages as it reads them."""
    copy = current(connection)
    used: dict[int, dict[int, int]] = defaultdict(dict)
    for (provider_id, class_id), amount in usages(connection, None, None).items():
        provider = copy.providers.get(provider_id)
        if provider is not None and class_id in provider.inventories:
            used[provider_id][class_id] = int(amount)
    return Snapshot(copy, dict(used),
                    resource_class.names_from_ids(connection, copy.class_members))


class Total(NamedTuple):
    """One resource class's totals over the whole cloud or an aggregate."""

    resource_class: str
    aggregate: str  # uuid, or CLOUD
    capacity: int  # the sum of (total - reserved) * allocation_ratio
    used: int
    # what can still be allocated, inventory by inventory: capacity - used
    # but for an inventory shrunk below its usage, which frees nothing
    free: int


class _Places(Key["dict[int, tuple[str, ...]]"]):
    """The aggregates each provider of a copy counts in, CLOUD first."""
    # aggregates: frozenset[str] (those with totals of their own)
    __slots__ = ()


def _places(copy: ProviderCopy, aggregates: frozenset[str]) -> dict[int, tuple[str, ...]]:
    places = {}
    alone = (CLOUD,)
    for provider in copy.providers.values():
        # a tree's providers count in the aggregates of its root (a compute's
        # NUMA nodes in the compute's), as member_of selects trees
        root = copy.providers[provider.root_id]
        places[provider.id] = (
            (CLOUD, *sorted((provider.aggregates | root.aggregates) & aggregates))
            if aggregates and (provider.aggregates or root.aggregates) else alone)
    return places


# The capacities of the last copy asked about: (copy serial, aggregates)
# and (class id, aggregate or CLOUD) -> capacity. A copy's memo would
# not do: a copy whose inventory amounts alone changed keeps its
# predecessor's memo (the indexes are the same), and an entry per serial
# would crowd out the search's.
_last_capacities: tuple[tuple[int, frozenset[str]], dict[tuple[int, str], int]] | None = None


def _capacities(copy: ProviderCopy, aggregates: frozenset[str],
                places: dict[int, tuple[str, ...]]) -> dict[tuple[int, str], int]:
    global _last_capacities
    kept = _last_capacities
    if kept is not None and kept[0] == (copy.serial, aggregates):
        return kept[1]
    capacities: dict[tuple[int, str], int] = defaultdict(int)
    for provider in copy.providers.values():
        labels = places[provider.id]
        for class_id, inventory in provider.inventories.items():
            for label in labels:
                capacities[class_id, label] += inventory.capacity
    _last_capacities = ((copy.serial, aggregates), dict(capacities))
    return _last_capacities[1]


def capacity_totals(snapshot: Snapshot, aggregate_limit: int) -> list[Total]:
    """Per resource class, the totals of the whole cloud and of the
    ``aggregate_limit`` aggregates with the most providers (then by uuid).
    The capacities are worked out once per copy, where each provider
    counts once per copy's indexes; each call adds up only the usages
    read, one entry per inventory in use."""
    copy = snapshot.copy
    members = copy.aggregate_members
    chosen = frozenset(sorted(members, key=lambda uuid: (-len(members[uuid]), uuid))
                       [:aggregate_limit])
    places = copy.memo.get_or_make(_Places(chosen), lambda: _places(copy, chosen))
    capacities = _capacities(copy, chosen, places)
    used: dict[tuple[int, str], int] = defaultdict(int)
    taken: dict[tuple[int, str], int] = defaultdict(int)
    for provider_id, amounts in snapshot.used.items():
        inventories = copy.providers[provider_id].inventories
        labels = places[provider_id]
        for class_id, amount in amounts.items():
            within = min(amount, inventories[class_id].capacity)
            for label in labels:
                used[class_id, label] += amount
                taken[class_id, label] += within
    return [Total(snapshot.names[class_id], label, capacity, used[class_id, label],
                  capacity - taken[class_id, label])
            for (class_id, label), capacity in sorted(
                capacities.items(), key=lambda item: (snapshot.names[item[0][0]], item[0][1]))]
