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

from placement import exceptions, metrics
from placement.db import api as db_api
from placement.db import tables, triggers
from placement.objects import consumer as consumer_obj
from placement.objects import resource_class, resource_provider, write_locks
from placement.objects.generation import Generational, compare_and_swap
from placement.objects.inventory import InventoryUsage

LOG = logging.getLogger(__name__)

_allocation = tables.allocations
_inventory = tables.inventories
_rp = tables.resource_providers
_consumer = tables.consumers
_allowance = tables.allocation_allowances

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


class CapacityRace(ProviderGenerationRace):
    """The database refused an allocation row for capacity
    (placement.db.triggers) that this write's own check let through. The
    write holds its inventories locked from its start, so only a check
    that disagrees with the database's gets here: like a generation race,
    the write starts over and reads everything again, and is answered as
    a race if that happens again."""


# -- Capacity and usage (the one place allocation writes read them)
#
# Every inventory row carries ``used``, the sum of its allocations, kept by
# the database's triggers (placement.db.triggers) in the transaction that
# changes the allocations, whoever writes them: readers get a provider's
# usage in one row instead of summing its allocations, however many
# consumers it serves.

# The allocations of some consumers, locked until COMMIT: what the write
# replaces (and subtracts from the usages it checks) is exactly what it
# deletes.
_HELD = db_api.SizedStatement(lambda consumer_uuids: (
    sa.select(_allocation.c.resource_provider_id, _allocation.c.resource_class_id,
              _allocation.c.used)
    .where(db_api.bound_in(_allocation.c.consumer_id, "consumer_uuids", consumer_uuids))
    .with_for_update()))


def _held(connection: sa.engine.Connection, consumer_uuids: list[str]
          ) -> tuple[dict[Key, int], int]:
    """What the consumers hold, by inventory, and in how many rows."""
    held: dict[Key, int] = collections.defaultdict(int)
    rows = connection.execute(*_HELD(consumer_uuids=consumer_uuids)).all()
    for provider_id, class_id, used in rows:
        held[provider_id, class_id] += used
    return held, len(rows)


# Every inventory of some providers in some classes, with its usage.
_CAPACITY = db_api.SizedStatement(lambda provider_ids, class_ids: (
    sa.select(_inventory.c.resource_provider_id, _inventory.c.resource_class_id,
              _inventory.c.total, _inventory.c.reserved, _inventory.c.min_unit,
              _inventory.c.max_unit, _inventory.c.step_size, _inventory.c.allocation_ratio,
              _inventory.c.used)
    .where(db_api.bound_in(_inventory.c.resource_provider_id, "provider_ids", provider_ids),
           db_api.bound_in(_inventory.c.resource_class_id, "class_ids", class_ids))))


def inventory_usages(connection: sa.engine.Connection, provider_ids: Iterable[int],
                     class_ids: Iterable[int], held: Mapping[Key, int]
                     ) -> tuple[dict[Key, InventoryUsage], dict[Key, int]]:
    """Every inventory of the given providers in the given classes, with
    the usage of the consumers other than those holding ``held`` (whose
    allocations the write replaces); and the usage of everybody, by
    inventory."""
    rows = connection.execute(*_CAPACITY(provider_ids=list(provider_ids),
                                         class_ids=list(class_ids)))
    inventories = {}
    used = {}
    for row in rows:
        key = (row.resource_provider_id, row.resource_class_id)
        used[key] = row.used
        inventories[key] = InventoryUsage(
            total=row.total, reserved=row.reserved, min_unit=row.min_unit,
            max_unit=row.max_unit, step_size=row.step_size,
            allocation_ratio=row.allocation_ratio, used=row.used - held.get(key, 0))
    return inventories, used


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


_DELETE_HELD = sa.delete(_allocation).where(
    _allocation.c.consumer_id == sa.bindparam("consumer_uuid"))
_DELETE_CONSUMER = sa.delete(_consumer).where(_consumer.c.uuid == sa.bindparam("consumer_uuid"))


def delete_for_consumer(connection: sa.engine.Connection, consumer_uuid: str) -> None:
    """Remove every allocation of a consumer and its record. Provider
    generations are left alone (as upstream does)."""
    parameters = {"consumer_uuid": consumer_uuid}
    # the triggers of the deleted rows update these inventories: locked
    # first, in the order every allocation writer takes them
    write_locks.lock_inventories(connection, [], [consumer_uuid])
    _, rows = _held(connection, [consumer_uuid])
    if not rows:
        raise exceptions.NotFound(f"No allocations for consumer '{consumer_uuid}'")
    if connection.execute(_DELETE_HELD, parameters).rowcount != rows:
        # Another transaction changed them after our read (a backend
        # that does not lock them: nothing is kept of this one).
        raise exceptions.NotFound(
            f"Allocation for consumer with id {consumer_uuid} not found. error: "
            "the allocations were deleted by another request")
    connection.execute(_DELETE_CONSUMER, parameters)


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
class _Provider:
    """A provider of the write as this transaction read it: its generation
    is the one the compare-and-swap expects."""

    id: int
    uuid: str
    generation: int


@dataclasses.dataclass
class PreparedWrite:
    """Providers named known to exist, locked with those the consumers hold
    allocations on (``providers``, by uuid), consumers checked and
    recorded (``consumers``: the ones that existed, see
    consumer.prepare)."""

    requests: list[ConsumerAllocations]
    consumers: list[consumer_obj.Consumer]
    providers: dict[str, _Provider]


_LOCK_PROVIDERS = db_api.SizedStatement(lambda uuids, consumer_uuids: (
    sa.select(_rp.c.id, _rp.c.uuid, _rp.c.generation)
    .where(write_locks.changed_providers(_rp.c.id, uuids, consumer_uuids))
    .order_by(_rp.c.id).with_for_update()))


def _providers(connection: sa.engine.Connection, provider_uuids: list[str],
               consumer_uuids: list[str]) -> list[_Provider]:
    """Lock the providers of the write (``write_locks.changed_providers``) and read
    them: wait for their concurrent writers and keep new ones out until we
    commit. Done before anything else is read (but the lock of their
    inventories): on PostgreSQL (READ COMMITTED) every later read, and on
    MySQL the REPEATABLE READ snapshot (which starts at the first plain
    read, not at a locking one), then includes what those writers
    committed, and the generation compare-and-swap, which still guards
    every provider, does not fail because of them (eight writers on the
    same providers used to exhaust the retries on PostgreSQL about once
    in seven writes). SQLite renders no FOR UPDATE: its writers hold the
    database lock."""
    return [_Provider(*row) for row in connection.execute(
        *_LOCK_PROVIDERS(uuids=provider_uuids, consumer_uuids=consumer_uuids))]


def prepare(connection: sa.engine.Connection, requests: list[ConsumerAllocations]
            ) -> PreparedWrite:
    """The providers named and those the consumers hold allocations on
    locked (their inventories first) and read, then the consumer checks
    (generation, creation, owner) in request order, then the existence of
    every provider named."""
    named = list(dict.fromkeys(uuid for request in requests for uuid in request.allocations))
    consumer_uuids = [request.consumer_uuid for request in requests]
    write_locks.lock_inventories(connection, named, consumer_uuids)
    providers = {provider.uuid: provider
                 for provider in _providers(connection, named, consumer_uuids)}
    consumers = consumer_obj.prepare(connection, requests)
    for provider_uuid in named:
        if provider_uuid not in providers:
            raise UnknownProvider(provider_uuid)
    return PreparedWrite(requests, consumers, providers)


def _records(connection: sa.engine.Connection, prepared: PreparedWrite
             ) -> tuple[list[_Record], list[_Provider]]:
    """The allocations to write, in request order; a consumer with empty
    ``allocations`` contributes its current allocations with amount 0. And
    the providers of those current allocations."""
    names = [name for request in prepared.requests
             for resources in request.allocations.values() for name in resources]
    try:
        # The first unknown class in request order is the one reported.
        class_ids = resource_class.ids_from_names(connection, names)
    except exceptions.NotFound as error:
        raise UnknownResourceClass(str(error)) from None
    cleared, held_on = _current_records(connection, [request.consumer_uuid
                                                     for request in prepared.requests
                                                     if not request.allocations])
    records = []
    for request in prepared.requests:
        if request.allocations:
            records.extend(
                _Record(request.consumer_uuid, prepared.providers[provider_uuid].id,
                        provider_uuid, class_ids[name], name, amount)
                for provider_uuid, resources in request.allocations.items()
                for name, amount in resources.items())
        else:
            records.extend(cleared[request.consumer_uuid])
    return records, held_on


_CURRENT_RECORDS = db_api.SizedStatement(lambda consumer_uuids: (
    sa.select(_allocation.c.consumer_id, _allocation.c.resource_provider_id,
              _allocation.c.resource_class_id, _rp.c.uuid, _rp.c.generation)
    .join(_rp, _rp.c.id == _allocation.c.resource_provider_id)
    .where(db_api.bound_in(_allocation.c.consumer_id, "consumer_uuids", consumer_uuids))
    .order_by(_allocation.c.id)))


def _current_records(connection: sa.engine.Connection, consumer_uuids: list[str]
                     ) -> tuple[dict[str, list[_Record]], list[_Provider]]:
    """What these consumers hold now, as records with amount 0, by
    consumer; and the providers they hold it on."""
    held: dict[str, list[_Record]] = {consumer_uuid: [] for consumer_uuid in consumer_uuids}
    if not consumer_uuids:
        return held, []
    rows = connection.execute(*_CURRENT_RECORDS(consumer_uuids=consumer_uuids)).all()
    names = _class_names(connection, rows)
    providers = {}
    for row in rows:
        held[row.consumer_id].append(
            _Record(row.consumer_id, row.resource_provider_id, row.uuid,
                    row.resource_class_id, names[row.resource_class_id], 0))
        providers[row.resource_provider_id] = _Provider(
            row.resource_provider_id, row.uuid, row.generation)
    return held, list(providers.values())


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
                    previously_used: dict[Key, int]) -> dict[Key, int]:
    """Units, steps and capacity of every requested amount. ``inventories``
    carry the usage of other consumers (the written ones are already
    removed); an over-commit is accepted only if it is not made worse than
    ``previously_used``. Returns the usage each inventory accepted so may
    be left at (its usage before: the allowance the database's triggers
    need to let the rows through)."""
    allowances: dict[Key, int] = {}
    requested: dict[Key, int] = collections.defaultdict(int)
    for record in records:
        if record.amount == 0:
            continue
        key = (record.provider_id, record.class_id)
        where = f"'{record.class_name}' on resource provider '{record.provider_uuid}'"
        inventory = inventories.get(key)
        if inventory is None:
            raise AllocationRefused(f"Inventory for {where} invalid.")
        if inventory.unit_misfit(record.amount) is not None:
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
        if over:
            allowances[key] = previously_used[key]
    return allowances


def _increment_provider_generations(connection: sa.engine.Connection,
                                    providers: list[Generational]) -> None:
    """Compare-and-swap every provider's generation to the next one in one
    statement (no query per provider). ProviderGenerationRace when any of
    them moved."""
    if not compare_and_swap(connection, _rp, providers):
        raise ProviderGenerationRace()


_DELETE_ALLOCATIONS = db_api.SizedStatement(lambda consumer_uuids: sa.delete(_allocation).where(
    db_api.bound_in(_allocation.c.consumer_id, "consumer_uuids", consumer_uuids)))
_INSERT_ALLOCATIONS = sa.insert(_allocation)


def write(connection: sa.engine.Connection, prepared: PreparedWrite,
          known_providers: Mapping[int, Generational] | None = None) -> None:
    """Replace the allocations of the prepared consumers, in the caller's
    transaction. Raises ProviderGenerationRace when a provider changed
    since this transaction read it; the caller must roll back.

    ``known_providers`` (by id) are providers the caller already read and
    checked: their generation is the one to compare-and-swap from, never
    one read again here (under READ COMMITTED a new read would show, and
    then overwrite, what a concurrent writer committed since). They are
    updated in place with their new generation."""
    records, held_on = _records(connection, prepared)
    providers: dict[int, Generational] = {
        provider.id: provider for provider in [*held_on, *prepared.providers.values()]}
    providers.update(known_providers or {})
    provider_ids = list(dict.fromkeys(record.provider_id for record in records))
    class_ids = list(dict.fromkeys(record.class_id for record in records))
    consumer_uuids = [request.consumer_uuid for request in prepared.requests]
    held, held_rows = _held(connection, consumer_uuids)
    inventories, previously_used = inventory_usages(connection, provider_ids, class_ids, held)
    _check_inventory_present(records, inventories)
    allowances = _check_capacity(records, inventories, previously_used)
    # Before the allocation rows: every writer takes a provider's lock
    # before its inventories' (which the triggers of the allocation rows
    # update), so that allocation writers do not deadlock each other.
    _increment_provider_generations(connection,
                                    [providers[provider_id] for provider_id in provider_ids])
    # Nothing to delete when the consumers hold nothing and this write
    # created all of them (the usual claim): another writer adding
    # allocations for one of them must create its record too: it waits for
    # ours until we commit, then fails on it and starts over.
    if (held_rows or prepared.consumers) and connection.execute(
            *_DELETE_ALLOCATIONS(consumer_uuids=consumer_uuids)).rowcount != held_rows:
        # They were locked: only a backend that does not lock them (none
        # of ours) could get here. Start again rather than keep usages
        # that do not add up.
        raise ProviderGenerationRace()
    now = timeutils.utcnow()
    new_rows = [
        {"consumer_id": record.consumer_uuid, "resource_provider_id": record.provider_id,
         "resource_class_id": record.class_id, "used": record.amount, "created_at": now}
        for record in records if record.amount > 0
    ]
    if new_rows:
        _insert_allocations(connection, new_rows, allowances)
    try:
        consumer_obj.increment_generations(connection, prepared.consumers)
    except exceptions.ConcurrentUpdate as error:
        raise ConcurrentWrite(str(error)) from None
    holding = {row["consumer_id"] for row in new_rows}
    emptied = [consumer_uuid for consumer_uuid in consumer_uuids if consumer_uuid not in holding]
    if emptied:
        consumer_obj.delete_if_empty(connection, emptied)


_INSERT_ALLOWANCES = sa.insert(_allowance)
_DELETE_ALLOWANCES = sa.delete(_allowance)


def _insert_allocations(connection: sa.engine.Connection, rows: list[dict],
                        allowances: dict[Key, int]) -> None:
    """Insert the allocation ``rows``; the inventories of ``allowances``
    may be left over capacity, at most at the usage given (allowed for
    this transaction only: the allowances are removed before it commits).
    CapacityRace when the database refuses a row for capacity."""
    if allowances:
        connection.execute(_INSERT_ALLOWANCES, [
            {"resource_provider_id": provider_id, "resource_class_id": class_id, "used": used}
            for (provider_id, class_id), used in allowances.items()])
    try:
        connection.execute(_INSERT_ALLOCATIONS, rows)
    except (db_exc.DBError, sa.exc.DBAPIError) as error:
        if triggers.refused_over_capacity(error):
            raise CapacityRace() from None
        raise
    if allowances:
        # no other allowance can exist in this transaction
        connection.execute(_DELETE_ALLOWANCES)


def _prepared_and_written(connection: sa.engine.Connection,
                          requests: list[ConsumerAllocations]) -> None:
    write(connection, prepare(connection, requests))


def _attempt(db: db_api.Database, requests: list[ConsumerAllocations]) -> None:
    """One attempt of ``replace_all``: a new transaction (retried, each
    time new, after a deadlock or a lost connection)."""
    db_api.write(db, _prepared_and_written, requests)


def _retry_reason(error: Exception) -> str:
    """Why replace_all runs a write again, as the metrics say it."""
    if isinstance(error, CapacityRace):
        return "capacity_refused"
    if isinstance(error, ProviderGenerationRace):
        return "generation_conflict"
    return "duplicate_entry"


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
            if attempt < attempts:
                metrics.count_retry(_retry_reason(error))
    raise ProviderGenerationRace()
