"""Every provider's inventories with their usages, from the provider copy
and one read of the usages: what ``GET /capacity/providers`` lists and the
capacity gauges of ``GET /metrics`` add up (``placement.capacity_gauges``).

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
from collections.abc import Iterator

import sqlalchemy as sa

from placement.candidates.follower import current, usages
from placement.candidates.provider_copy import CachedProvider, ProviderCopy
from placement.objects import resource_class

__all__ = ["Snapshot", "read"]


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The providers of one copy with the usages read beside it."""

    copy: ProviderCopy
    # provider id -> class id -> amount allocated, where any is
    used: dict[int, dict[int, int]]
    # class id -> name, for every class some provider has an inventory of
    names: dict[int, str]

    def report(self, provider_id: int) -> dict | None:
        """The provider's uuid, parent and root uuids, inventories
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
            name = self.names[class_id]
            # a literal: dict(zip(FIELDS, ...)) costs twice as much, for
            # tens of thousands of inventories
            inventories[name] = {
                "total": inventory.total, "reserved": inventory.reserved,
                "min_unit": inventory.min_unit, "max_unit": inventory.max_unit,
                "step_size": inventory.step_size,
                "allocation_ratio": float(inventory.allocation_ratio)}
            amounts[name] = used.get(class_id, 0)
        parent = providers.get(provider.parent_id) if provider.parent_id else None
        return {"uuid": provider.uuid,
                "parent_provider_uuid": parent.uuid if parent else None,
                "root_provider_uuid": providers[provider.root_id].uuid,
                "inventories": inventories, "usages": amounts}

    def inventories(self) -> Iterator[tuple[CachedProvider, int, int, int]]:
        """(provider, class id, capacity, amount allocated) of every
        inventory of the copy."""
        for provider in self.copy.providers.values():
            used = self.used.get(provider.id, {})
            for class_id, inventory in provider.inventories.items():
                yield provider, class_id, inventory.capacity, used.get(class_id, 0)


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
