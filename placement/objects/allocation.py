"""Allocations: reading them, the usage and capacity of providers, and
replacing the allocations of consumers.

A write replaces *all* allocations of every consumer it names, in one
transaction holding every check (consumer generations, providers, capacity,
provider generations). A provider generation that moved under the write (a
concurrent writer committed first) makes the whole write start over in a new
transaction, with everything read again; it is never re-read inside the old
one (a REPEATABLE READ snapshot would show the same stale data again).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
from collections.abc import Iterable, Mapping

import sqlalchemy as sa
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_utils import timeutils

from placement import exceptions
from placement.db import api as db_api
from placement.db import tables
from placement.objects import consumer as consumer_obj
from placement.objects import resource_class, resource_provider
from placement.objects import usage as usage_obj
from placement.objects.generation import compare_and_swap
from placement.objects.inventory import InventoryUsage

LOG = logging.getLogger(__name__)

_allocation = tables.allocations
_inventory = tables.inventories
_rp = tables.resource_providers
_consumer = tables.consumers

Key = tuple[int, int]  # (provider id, resource class id)


# -- Errors ------------------------------------------------------------------

class AllocationRefused(exceptions.Conflict):
    """Missing inventory, a unit constraint or the capacity says no. Shown
    as ``Unable to allocate inventory: <message>``."""


class UnknownProvider(exceptions.InvalidInput):
    def __init__(self, provider_uuid: str):
        super().__init__(
            f"Allocation for resource provider '{provider_uuid}' that does not exist.")


class UnknownResourceClass(exceptions.InvalidInput):
    """A class named in the write does not exist; the message is the bare
    ``No such resource class <RC>.``, each route adds its own prefix."""


class ConcurrentWrite(exceptions.ConcurrentUpdate):
    """A provider or consumer generation moved during the write."""


class ProviderGenerationRace(ConcurrentWrite):
    def __init__(self) -> None:
        super().__init__("Another thread concurrently updated the resource provider "
                         "data. Please retry your update")


# -- Capacity (the one place allocation writes read it) ----------------------

def inventory_usages(connection: sa.engine.Connection, provider_ids: Iterable[int],
                     class_ids: Iterable[int]) -> dict[Key, InventoryUsage]:
    """Every inventory of the given providers in the given classes, with
    its current usage."""
    provider_ids, class_ids = list(provider_ids), list(class_ids)
    rows = connection.execute(
        sa.select(_inventory).where(_inventory.c.resource_provider_id.in_(provider_ids),
                                    _inventory.c.resource_class_id.in_(class_ids)))
    used = usage_obj.used_by_providers(connection, provider_ids)
    return {
        (row.resource_provider_id, row.resource_class_id): InventoryUsage(
            total=row.total, reserved=row.reserved, min_unit=row.min_unit,
            max_unit=row.max_unit, step_size=row.step_size,
            allocation_ratio=row.allocation_ratio,
            used=used.get((row.resource_provider_id, row.resource_class_id), 0))
        for row in rows
    }


# -- Reading allocations -----------------------------------------------------

@dataclasses.dataclass
class ConsumerAllocationsView:
    """``GET /allocations/{consumer}``: provider uuid -> {generation,
    resources}, the consumer's details (None for legacy rows without a
    consumer record) and the newest allocation time."""

    allocations: dict[str, dict]
    consumer: consumer_obj.ConsumerDetails | None
    last_modified: datetime.datetime | None


def _class_names(connection: sa.engine.Connection, rows: list) -> dict[int, str]:
    return resource_class.names_from_ids(connection, {row.resource_class_id for row in rows})


def get_for_consumer(connection: sa.engine.Connection, consumer_uuid: str
                     ) -> ConsumerAllocationsView:
    rows = connection.execute(
        sa.select(_allocation.c.resource_class_id, _allocation.c.used,
                  _allocation.c.created_at, _rp.c.uuid, _rp.c.generation)
        .join(_rp, _rp.c.id == _allocation.c.resource_provider_id)
        .where(_allocation.c.consumer_id == consumer_uuid)
        .order_by(_allocation.c.id)
    ).all()
    names = _class_names(connection, rows)
    allocations: dict[str, dict] = {}
    for row in rows:
        entry = allocations.setdefault(row.uuid, {"generation": row.generation,
                                                  "resources": {}})
        entry["resources"][names[row.resource_class_id]] = row.used
    details = consumer_obj.get_details(connection, consumer_uuid) if rows else None
    return ConsumerAllocationsView(allocations, details,
                                   max((row.created_at for row in rows if row.created_at),
                                       default=None))


@dataclasses.dataclass
class ProviderAllocationsView:
    """``GET /resource_providers/{uuid}/allocations``: consumer uuid ->
    {resources, consumer_generation}, and the newest allocation time."""

    allocations: dict[str, dict]
    last_modified: datetime.datetime | None


def get_for_provider(connection: sa.engine.Connection,
                     provider: resource_provider.ResourceProvider) -> ProviderAllocationsView:
    rows = connection.execute(
        sa.select(_allocation.c.consumer_id, _allocation.c.resource_class_id,
                  _allocation.c.used, _allocation.c.created_at,
                  _consumer.c.generation)
        .outerjoin(_consumer, _consumer.c.uuid == _allocation.c.consumer_id)
        .where(_allocation.c.resource_provider_id == provider.id)
        .order_by(_allocation.c.id)
    ).all()
    names = _class_names(connection, rows)
    allocations: dict[str, dict] = {}
    for row in rows:
        entry = allocations.setdefault(
            row.consumer_id, {"resources": {}, "consumer_generation": row.generation})
        entry["resources"][names[row.resource_class_id]] = row.used
    return ProviderAllocationsView(
        allocations,
        max((row.created_at for row in rows if row.created_at), default=None))


def delete_for_consumer(db: db_api.Database, consumer_uuid: str) -> None:
    """Remove every allocation of a consumer and its record. Provider
    generations are left alone (as upstream does)."""
    with db.writer() as connection:
        held = connection.execute(
            sa.select(sa.func.count()).where(_allocation.c.consumer_id == consumer_uuid)
        ).scalar()
        if not held:
            raise exceptions.NotFound(f"No allocations for consumer '{consumer_uuid}'")
        deleted = connection.execute(
            sa.delete(_allocation).where(_allocation.c.consumer_id == consumer_uuid))
        if deleted.rowcount == 0:
            # Another transaction removed them after our snapshot was taken.
            raise exceptions.NotFound(
                f"Allocation for consumer with id {consumer_uuid} not found. error: "
                "the allocations were deleted by another request")
        connection.execute(sa.delete(_consumer).where(_consumer.c.uuid == consumer_uuid))


# -- Writing -----------------------------------------------------------------

@dataclasses.dataclass
class ConsumerAllocations:
    """What the allocations of one consumer must become.

    ``allocations`` maps provider uuid -> {resource class name: amount}; an
    empty dict removes everything the consumer holds. ``check_generation``
    (1.28+) makes ``generation`` the generation the client expects (None:
    the consumer must not exist yet)."""

    consumer_uuid: str
    allocations: dict[str, dict[str, int]]
    owner: consumer_obj.Owner
    check_generation: bool = False
    generation: int | None = None


@dataclasses.dataclass
class _Record:
    """One allocation of the write. ``amount`` 0: an allocation the consumer
    currently holds that is being removed (from an empty ``allocations``)."""

    consumer_uuid: str
    provider_id: int
    provider_uuid: str
    class_id: int
    class_name: str
    amount: int


@dataclasses.dataclass
class PreparedWrite:
    """Consumers checked and recorded, providers known to exist."""

    requests: list[ConsumerAllocations]
    consumers: list[consumer_obj.Consumer]
    provider_ids: dict[str, int]


def prepare(connection: sa.engine.Connection, requests: list[ConsumerAllocations]
            ) -> PreparedWrite:
    """The consumer checks (generation, creation, owner) in request order,
    then the existence of every provider named."""
    consumers = consumer_obj.prepare(connection, requests)
    named = list(dict.fromkeys(uuid for request in requests for uuid in request.allocations))
    provider_ids = {row.uuid: row.id for row in connection.execute(
        sa.select(_rp.c.uuid, _rp.c.id).where(_rp.c.uuid.in_(named)))}
    for provider_uuid in named:
        if provider_uuid not in provider_ids:
            raise UnknownProvider(provider_uuid)
    return PreparedWrite(requests, consumers, provider_ids)


def _records(connection: sa.engine.Connection, prepared: PreparedWrite) -> list[_Record]:
    """The allocations to write, in request order; a consumer with empty
    ``allocations`` contributes its current allocations with amount 0."""
    names = [name for request in prepared.requests
             for resources in request.allocations.values() for name in resources]
    try:
        # The first unknown class in request order is the one reported.
        class_ids = resource_class.ids_from_names(connection, names)
    except exceptions.NotFound as error:
        raise UnknownResourceClass(str(error)) from None
    cleared = _current_records(connection, [request.consumer_uuid
                                            for request in prepared.requests
                                            if not request.allocations])
    records = []
    for request in prepared.requests:
        if request.allocations:
            records.extend(
                _Record(request.consumer_uuid, prepared.provider_ids[provider_uuid],
                        provider_uuid, class_ids[name], name, amount)
                for provider_uuid, resources in request.allocations.items()
                for name, amount in resources.items())
        else:
            records.extend(cleared[request.consumer_uuid])
    return records


def _current_records(connection: sa.engine.Connection, consumer_uuids: list[str]
                     ) -> dict[str, list[_Record]]:
    """What these consumers hold now, as records with amount 0, by consumer."""
    held: dict[str, list[_Record]] = {consumer_uuid: [] for consumer_uuid in consumer_uuids}
    if not consumer_uuids:
        return held
    rows = connection.execute(
        sa.select(_allocation.c.consumer_id, _allocation.c.resource_provider_id,
                  _allocation.c.resource_class_id, _rp.c.uuid)
        .join(_rp, _rp.c.id == _allocation.c.resource_provider_id)
        .where(_allocation.c.consumer_id.in_(consumer_uuids))
        .order_by(_allocation.c.id)
    ).all()
    names = _class_names(connection, rows)
    for row in rows:
        held[row.consumer_id].append(
            _Record(row.consumer_id, row.resource_provider_id, row.uuid,
                    row.resource_class_id, names[row.resource_class_id], 0))
    return held


def _providers(connection: sa.engine.Connection, provider_ids: list[int]
               ) -> list[resource_provider.ResourceProvider]:
    """The providers as this transaction sees them (their generations are
    the ones the compare-and-swap expects)."""
    return resource_provider.providers_where(connection, _rp.c.id.in_(provider_ids))


def _providers_to_bump(connection: sa.engine.Connection, provider_ids: list[int],
                       known: Mapping[int, resource_provider.ResourceProvider]
                       ) -> list[resource_provider.ResourceProvider]:
    """The providers of the write: the ``known`` ones as given, the others
    read now."""
    unknown = [provider_id for provider_id in provider_ids if provider_id not in known]
    read = _providers(connection, unknown) if unknown else []
    return [known[provider_id] for provider_id in provider_ids if provider_id in known] + read


def _check_inventory_present(records: list[_Record], inventories: dict[Key, InventoryUsage]
                             ) -> None:
    """Every provider must have an inventory of at least one requested class."""
    provider_uuids = {record.provider_id: record.provider_uuid for record in records}
    with_inventory = {provider_id for provider_id, _ in inventories}
    missing = [uuid for provider_id, uuid in provider_uuids.items()
               if provider_id not in with_inventory]
    if missing:
        # In class id order, as the reference (which joins a set of ids).
        class_names = ", ".join(dict(sorted(
            (record.class_id, record.class_name) for record in records)).values())
        raise AllocationRefused(
            f"Inventory for '{class_names}' on resource provider "
            f"'{', '.join(missing)}' invalid.")


def _check_capacity(records: list[_Record], inventories: dict[Key, InventoryUsage],
                    previously_used: dict[Key, int]) -> None:
    """Units, steps and capacity of every requested amount. ``inventories``
    carry the usage of other consumers (the written ones are already
    removed); an over-commit is accepted only if it is not made worse than
    ``previously_used``."""
    requested: dict[Key, int] = collections.defaultdict(int)
    for record in records:
        if record.amount == 0:
            continue
        key = (record.provider_id, record.class_id)
        where = f"'{record.class_name}' on resource provider '{record.provider_uuid}'"
        inventory = inventories.get(key)
        if inventory is None:
            raise AllocationRefused(f"Inventory for {where} invalid.")
        if not inventory.fits_units(record.amount):
            raise AllocationRefused(
                f"Unable to create allocation for {where}. The requested amount "
                "would violate inventory constraints.")
        requested[key] += record.amount
        wanted = inventory.used + requested[key]
        over = (inventory.capacity < inventory.used + record.amount
                or inventory.capacity < wanted)
        not_worse = key in previously_used and wanted <= previously_used[key]
        if over and not not_worse:
            raise AllocationRefused(
                f"Unable to create allocation for {where}. The requested amount "
                "would exceed the capacity.")


def _increment_provider_generations(connection: sa.engine.Connection,
                                    providers: list[resource_provider.ResourceProvider]
                                    ) -> None:
    """Compare-and-swap every provider's generation to the next one in one
    statement (no query per provider). ProviderGenerationRace when any of
    them moved."""
    if not compare_and_swap(connection, _rp, providers):
        raise ProviderGenerationRace()


def write(connection: sa.engine.Connection, prepared: PreparedWrite,
          known_providers: Mapping[int, resource_provider.ResourceProvider] | None = None
          ) -> None:
    """Replace the allocations of the prepared consumers, in the caller's
    transaction. Raises ProviderGenerationRace when a provider changed
    since this transaction read it; the caller must roll back.

    ``known_providers`` (by id) are providers the caller already read and
    checked: their generation is the one to compare-and-swap from, never
    one read again here (under READ COMMITTED a new read would show, and
    then overwrite, what a concurrent writer committed since). They are
    updated in place with their new generation."""
    records = _records(connection, prepared)
    provider_ids = list(dict.fromkeys(record.provider_id for record in records))
    class_ids = list(dict.fromkeys(record.class_id for record in records))
    providers = _providers_to_bump(connection, provider_ids, known_providers or {})
    previously_used = usage_obj.used_by_providers(connection, provider_ids)
    consumer_uuids = [request.consumer_uuid for request in prepared.requests]
    connection.execute(sa.delete(_allocation).where(_allocation.c.consumer_id.in_(consumer_uuids)))
    inventories = inventory_usages(connection, provider_ids, class_ids)
    _check_inventory_present(records, inventories)
    _check_capacity(records, inventories, previously_used)
    now = timeutils.utcnow()
    new_rows = [
        {"consumer_id": record.consumer_uuid, "resource_provider_id": record.provider_id,
         "resource_class_id": record.class_id, "used": record.amount, "created_at": now}
        for record in records if record.amount > 0
    ]
    if new_rows:
        connection.execute(sa.insert(_allocation), new_rows)
    _increment_provider_generations(connection, providers)
    try:
        consumer_obj.increment_generations(connection, prepared.consumers)
    except exceptions.ConcurrentUpdate as error:
        raise ConcurrentWrite(str(error)) from None
    consumer_obj.delete_if_empty(connection, consumer_uuids)


def _lock_named_providers(connection: sa.engine.Connection,
                          requests: list[ConsumerAllocations]) -> None:
    """Wait for the concurrent writers of the providers this write names
    and keep new ones out until we commit (rows locked in id order, so
    allocation writers do not deadlock each other). Done before anything
    else is read: on PostgreSQL (READ COMMITTED) every later read, and on
    MySQL the REPEATABLE READ snapshot (which starts at the first plain
    read, not at a locking one), then includes what those writers
    committed, and the generation compare-and-swap does not fail because
    of them. Correctness does not rest on this lock (the compare-and-swap
    still guards every provider); it saves the retries, which eight
    writers on the same providers used to exhaust on PostgreSQL about once
    in seven writes. No-op on SQLite, whose writers hold the database
    lock."""
    named = list(dict.fromkeys(uuid for request in requests for uuid in request.allocations))
    if named:
        connection.execute(sa.select(_rp.c.id).where(_rp.c.uuid.in_(named))
                           .order_by(_rp.c.id).with_for_update()).all()


@db_api.retrying
def _attempt(db: db_api.Database, requests: list[ConsumerAllocations]) -> None:
    with db.writer() as connection:
        _lock_named_providers(connection, requests)
        write(connection, prepare(connection, requests))


def replace_all(db: db_api.Database, requests: list[ConsumerAllocations],
                attempts: int) -> None:
    """Replace the allocations of every consumer in ``requests`` at once.

    Each attempt is a new transaction that reads everything afresh. An
    attempt that loses a race (a provider generation moved, or another
    request created the same project/user/type/consumer first) is retried,
    ``attempts`` times at most; then ProviderGenerationRace."""
    for attempt in range(1, max(attempts, 1) + 1):
        try:
            _attempt(db, requests)
            return
        except (ProviderGenerationRace, db_exc.DBDuplicateEntry) as error:
            LOG.debug("Allocation write attempt %d lost a race: %s", attempt, error)
    raise ProviderGenerationRace()
