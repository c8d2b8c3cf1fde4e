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
from oslo_utils import timeutils

from placement import exceptions
from placement.db import api as db_api
from placement.db import tables
from placement.objects import allocation as allocation_obj
from placement.objects import resource_class, resource_provider

_inventory = tables.inventories

INVENTORY_DEFAULTS = {
    "reserved": 0,
    "min_unit": 1,
    "max_unit": 2147483647,
    "step_size": 1,
    "allocation_ratio": 1.0,
}
INVENTORY_FIELDS = ("total", *INVENTORY_DEFAULTS)


class ProviderNotFound(exceptions.InvalidInput):
    """A provider named in ``inventories`` does not exist."""


class InventoryInUse(exceptions.Conflict):
    """The final inventory would drop a class that still has allocations."""


@dataclasses.dataclass
class ProviderInventories:
    """What the inventory of one provider must become, and the provider
    generation the client saw. ``inventories``: class name -> fields."""

    provider_uuid: str
    generation: int
    inventories: dict[str, dict]


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


def _records_by_class_id(connection: sa.engine.Connection, inventories: dict[str, dict]
                         ) -> dict[int, dict]:
    """Class id -> complete record (defaults applied)."""
    try:
        class_ids = resource_class.ids_from_names(connection, inventories)
    except exceptions.NotFound as error:
        raise allocation_obj.UnknownResourceClass(str(error)) from None
    return {class_ids[name]: {field: {**INVENTORY_DEFAULTS, **record}[field]
                              for field in INVENTORY_FIELDS}
            for name, record in inventories.items()}


def _current_records(connection: sa.engine.Connection, provider_id: int) -> dict[int, dict]:
    rows = connection.execute(
        sa.select(_inventory).where(_inventory.c.resource_provider_id == provider_id))
    return {row.resource_class_id: {field: getattr(row, field) for field in INVENTORY_FIELDS}
            for row in rows}


def _set_inventory(connection: sa.engine.Connection, provider_uuid: str,
                   records: dict[int, dict]) -> None:
    """Make the provider's inventory exactly ``records`` (class id -> fields)
    and bump its generation. Classes that still have allocations cannot go."""
    provider = resource_provider.get_by_uuid(connection, provider_uuid)
    current = _current_records(connection, provider.id)
    removed = set(current) - set(records)
    in_use = sorted(class_id for _, class_id in
                    allocation_obj.usages(connection, [provider.id], removed))
    if in_use:
        names = resource_class.names_from_ids(connection, in_use)
        raise InventoryInUse(
            f"Inventory for '{', '.join(names[class_id] for class_id in in_use)}' on "
            f"resource provider '{provider.uuid}' in use.")
    now = timeutils.utcnow()
    if removed:
        connection.execute(sa.delete(_inventory).where(
            _inventory.c.resource_provider_id == provider.id,
            _inventory.c.resource_class_id.in_(removed)))
    for class_id, record in records.items():
        if class_id not in current:
            connection.execute(sa.insert(_inventory).values(
                resource_provider_id=provider.id, resource_class_id=class_id,
                created_at=now, **record))
        elif current[class_id] != record:
            connection.execute(sa.update(_inventory).where(
                _inventory.c.resource_provider_id == provider.id,
                _inventory.c.resource_class_id == class_id).values(updated_at=now, **record))
    try:
        resource_provider.increment_generation(connection, provider)
    except exceptions.ConcurrentUpdate:
        raise allocation_obj.ProviderGenerationRace() from None


@db_api.retrying
def reshape(db: db_api.Database, inventories: list[ProviderInventories],
            allocations: list[allocation_obj.ConsumerAllocations]) -> None:
    """All or nothing. The client states provider and consumer generations,
    so a lost race is reported (ProviderGenerationRace), not retried."""
    with db.writer() as connection:
        providers = _checked_providers(connection, inventories)
        prepared = allocation_obj.prepare(connection, allocations)
        final = [(provider, _records_by_class_id(connection, wanted.inventories))
                 for provider, wanted in zip(providers, inventories, strict=True)]
        for provider, records in final:
            if records:
                widened = {**_current_records(connection, provider.id), **records}
                _set_inventory(connection, provider.uuid, widened)
        allocation_obj.write(connection, prepared)
        for provider, records in final:
            _set_inventory(connection, provider.uuid, records)
