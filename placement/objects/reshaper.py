"""The reshaper: replace the inventories of several providers and the
allocations of several consumers in one transaction.

Inventories are first widened to the union of old and new (so that the new
allocations fit while the old ones still exist), then the allocations are
replaced by the standard write of ``placement.objects.allocation``, then the
inventories are narrowed to exactly the new records.
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from placement import exceptions
from placement.db import api as db_api
from placement.objects import allocation as allocation_obj
from placement.objects import inventory as inventory_obj
from placement.objects import resource_provider


class ProviderNotFound(exceptions.InvalidInput):
    """A provider named in ``inventories`` does not exist."""


@dataclasses.dataclass
class ProviderInventories:
    """What the inventory of one provider must become, and the provider
    generation the client saw."""

    provider_uuid: str
    generation: int
    inventories: list[inventory_obj.Inventory]


def _checked_providers(connection: sa.engine.Connection,
                       inventories: list[ProviderInventories]
                       ) -> list[resource_provider.ResourceProvider]:
    providers = []
    for wanted in inventories:
        try:
            provider = resource_provider.get_by_uuid(connection, wanted.provider_uuid)
        except exceptions.NotFound as error:
            raise ProviderNotFound(
                f"Resource provider {wanted.provider_uuid} in inventories not found: "
                f"{error}") from None
        if provider.generation != wanted.generation:
            raise exceptions.ConcurrentUpdate(
                f"resource provider generation conflict for provider "
                f"{provider.uuid}: actual: {provider.generation}, "
                f"given: {wanted.generation}")
        providers.append(provider)
    return providers


def _replace_inventories(connection: sa.engine.Connection, provider_uuid: str,
                         inventories: list[inventory_obj.Inventory]) -> None:
    """Set the inventory of the provider as this transaction now sees it
    (earlier steps moved its generation). Unknown classes become
    UnknownResourceClass; a lost generation race ProviderGenerationRace."""
    provider = resource_provider.get_by_uuid(connection, provider_uuid)
    try:
        inventory_obj.replace_inventories(connection, provider, inventories)
    except exceptions.NotFound as error:
        raise allocation_obj.UnknownResourceClass(str(error)) from None
    except exceptions.ConcurrentUpdate:
        raise allocation_obj.ProviderGenerationRace() from None


@db_api.retrying
def reshape(db: db_api.Database, inventories: list[ProviderInventories],
            allocations: list[allocation_obj.ConsumerAllocations]) -> None:
    """All or nothing. The client states provider and consumer generations,
    so a lost race is reported (ProviderGenerationRace), not retried.
    Reducing an inventory below its usage is accepted here; removing a
    class that still has allocations raises InventoryInUse."""
    with db.writer() as connection:
        providers = _checked_providers(connection, inventories)
        prepared = allocation_obj.prepare(connection, allocations)
        for provider, wanted in zip(providers, inventories, strict=True):
            if wanted.inventories:
                current = inventory_obj.get_all(connection, provider)
                widened = {**current, **{inventory.resource_class: inventory
                                         for inventory in wanted.inventories}}
                _replace_inventories(connection, provider.uuid, list(widened.values()))
        allocation_obj.write(connection, prepared)
        for wanted in inventories:
            _replace_inventories(connection, wanted.provider_uuid, wanted.inventories)
