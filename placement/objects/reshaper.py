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
from oslo_db import exception as db_exc
from oslo_log import log as logging

from placement import exceptions, metrics
from placement.db import api as db_api
from placement.db import tables
from placement.objects import allocation as allocation_obj
from placement.objects import inventory as inventory_obj
from placement.objects import resource_provider

LOG = logging.getLogger(__name__)

_rp = tables.resource_providers


class ProviderNotFound(exceptions.InvalidInput):
    """A provider named in ``inventories`` does not exist."""

    code = exceptions.RESOURCE_PROVIDER_NOT_FOUND


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
    """The providers of ``inventories`` (in that order, read in one query),
    each at the generation the client stated."""
    wanted_uuids = [wanted.provider_uuid for wanted in inventories]
    by_uuid = {provider.uuid: provider for provider in resource_provider.providers_where(
        connection, _rp.c.uuid.in_(wanted_uuids))}
    providers = []
    for wanted in inventories:
        provider = by_uuid.get(wanted.provider_uuid)
        if provider is None:
            raise ProviderNotFound(
                f"Resource provider {wanted.provider_uuid} in inventories not found: "
                f"No resource provider with uuid {wanted.provider_uuid} found")
        if provider.generation != wanted.generation:
            raise exceptions.ConcurrentUpdate(
                f"resource provider generation conflict for provider "
                f"{provider.uuid}: actual: {provider.generation}, "
                f"given: {wanted.generation}")
        providers.append(provider)
    return providers


def _replace_inventories(connection: sa.engine.Connection,
                         provider: resource_provider.ResourceProvider,
                         inventories: list[inventory_obj.Inventory]) -> None:
    """Set the inventory of the provider, compare-and-swapping the
    generation carried by ``provider`` (the checked one plus this
    transaction's own bumps). Unknown classes become UnknownResourceClass;
    a lost generation race ProviderGenerationRace."""
    try:
        inventory_obj.replace_inventories(connection, provider, inventories)
    except exceptions.NotFound as error:
        raise allocation_obj.UnknownResourceClass(str(error)) from None
    except exceptions.ConcurrentUpdate:
        raise allocation_obj.ProviderGenerationRace() from None


def _reshape_once(db: db_api.Database, inventories: list[ProviderInventories],
                  allocations: list[allocation_obj.ConsumerAllocations]) -> None:
    """One attempt of ``reshape``: a new transaction (retried, each time
    new, after a deadlock or a lost connection)."""
    db_api.write(db, _reshaped, inventories, allocations)


def _reshaped(connection: sa.engine.Connection, inventories: list[ProviderInventories],
              allocations: list[allocation_obj.ConsumerAllocations]) -> None:
    # These objects are the only source of the providers' generations
    # from here on (see allocation.write).
    providers = _checked_providers(connection, inventories)
    prepared = allocation_obj.prepare(connection, allocations)
    for provider, wanted in zip(providers, inventories, strict=True):
        if wanted.inventories:
            current = inventory_obj.get_all(connection, provider)
            widened = {**current, **{inventory.resource_class: inventory
                                     for inventory in wanted.inventories}}
            _replace_inventories(connection, provider, list(widened.values()))
    allocation_obj.write(connection, prepared,
                         {provider.id: provider for provider in providers})
    for provider, wanted in zip(providers, inventories, strict=True):
        _replace_inventories(connection, provider, wanted.inventories)


# A lost race to insert a project, user, consumer type or consumer can only
# happen once per row, so a few new attempts are enough.
DUPLICATE_ENTRY_ATTEMPTS = 3


def reshape(db: db_api.Database, inventories: list[ProviderInventories],
            allocations: list[allocation_obj.ConsumerAllocations]) -> None:
    """All or nothing. The client states provider and consumer generations,
    so a lost race is reported (ProviderGenerationRace), not retried.
    Reducing an inventory below its usage is accepted here; removing a
    class that still has allocations raises InventoryInUse.

    An attempt that loses the race to create a row another request created
    first (DBDuplicateEntry) runs again in a new transaction, which sees
    that row (and checks every generation again)."""
    for attempt in range(1, DUPLICATE_ENTRY_ATTEMPTS + 1):
        try:
            _reshape_once(db, inventories, allocations)
            return
        except db_exc.DBDuplicateEntry:
            if attempt == DUPLICATE_ENTRY_ATTEMPTS:
                raise
            LOG.debug("Reshape attempt %d lost a race to create a row", attempt)
            metrics.count_retry("duplicate_entry")
