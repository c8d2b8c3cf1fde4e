"""Inventories of resource providers and the capacity rules.

Every write bumps the provider generation with the compare-and-swap of
``resource_provider.increment_generation`` *first*, in the caller's
transaction: on MySQL the UPDATE locks the provider row, so concurrent writers
to one provider are serialised and the later one fails cleanly with
ConcurrentUpdate instead of tripping over the other's rows.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Iterable, Mapping

import sqlalchemy as sa
from oslo_utils import timeutils

from placement import exceptions
from placement.db import tables
from placement.objects import resource_class
from placement.objects.resource_provider import MAX_INT, ResourceProvider, increment_generation

# The fields of an inventory record, in the order of the representations.
INTEGER_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size")
FIELDS = (*INTEGER_FIELDS, "allocation_ratio")

_inv = tables.inventories
_alloc = tables.allocations


class InvalidCapacity(exceptions.InvalidInput):
    """The reserved amount leaves no (or negative) capacity."""


class InventoryExists(exceptions.Conflict):
    """The provider already has an inventory of that class."""


class InventoryNotFound(exceptions.NotFound):
    """The class exists but the provider has no inventory of it."""

    def __init__(self, resource_class_name: str):
        super().__init__(f"No inventory of class {resource_class_name} found.")
        self.resource_class = resource_class_name


class InventoryInUse(exceptions.Conflict):
    """Removing these inventories would orphan allocations."""

    code = exceptions.INVENTORY_INUSE


def capacity(total: int, reserved: int, allocation_ratio: float) -> int:
    """How much of a class can be allocated in all: (total - reserved) * ratio."""
    return int((total - reserved) * allocation_ratio)


# slots: the candidate search may load thousands of these
@dataclasses.dataclass(slots=True)
class InventoryUsage:
    """One inventory of a provider and how much of it is allocated: what
    allocation writes and the allocation-candidate search check amounts
    against."""

    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    used: int
    # Truncated: for the integer amounts compared with it, ``amount <=
    # capacity`` is the same as ``amount <= (total - reserved) * ratio``.
    # Computed once: the candidate search asks for it thousands of times.
    capacity: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.capacity = capacity(self.total, self.reserved, self.allocation_ratio)

    def fits(self, amount: int) -> bool:
        """Can one request group take ``amount`` from this inventory? The
        same as ``misfit(amount) is None``, in one expression: the
        candidate search asks it thousands of times per request."""
        return (self.used + amount <= self.capacity and self.min_unit <= amount <= self.max_unit
                and amount % self.step_size == 0)

    def misfit(self, amount: int) -> str | None:
        """Why one request group cannot take ``amount`` from this inventory:
        the first of 'capacity', 'max_unit', 'min_unit', 'step_size' it
        breaks (None: it fits)."""
        if self.used + amount > self.capacity:
            return "capacity"
        return self.unit_misfit(amount)

    def unit_misfit(self, amount: int) -> str | None:
        """Which of 'max_unit', 'min_unit', 'step_size' ``amount`` breaks
        (None: none)."""
        if amount > self.max_unit:
            return "max_unit"
        if amount < self.min_unit:
            return "min_unit"
        if amount % self.step_size:
            return "step_size"
        return None

    def with_used(self, used: int) -> InventoryUsage:
        """This inventory with ``used`` allocated."""
        return InventoryUsage(self.total, self.reserved, self.min_unit, self.max_unit,
                              self.step_size, self.allocation_ratio, used)

    def fits_total(self, amount: int) -> bool:
        """Can the sum of all groups' amounts be allocated here?"""
        return self.used + amount <= self.capacity and amount <= self.max_unit


@dataclasses.dataclass
class Inventory:
    resource_class: str
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0
    created_at: datetime.datetime | None = dataclasses.field(default=None, compare=False)
    updated_at: datetime.datetime | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def from_fields(cls, resource_class_name: str, fields: Mapping[str, object]) -> Inventory:
        """An inventory from a request record; omitted fields get their
        defaults and keys that are not inventory fields (such as a
        ``resource_provider_generation`` the schemas tolerate) are ignored.
        jsonschema accepts integral floats (10.0) as integers: they are
        stored and shown as the integers they stand for."""
        values = {name: int(fields[name]) for name in INTEGER_FIELDS if name in fields}
        if "allocation_ratio" in fields:
            values["allocation_ratio"] = float(fields["allocation_ratio"])
        return cls(resource_class_name, **values)

    @property
    def capacity(self) -> int:
        return capacity(self.total, self.reserved, self.allocation_ratio)

    def fields(self) -> dict[str, int | float]:
        """The record as the API shows it (the ratio always as a float)."""
        record = {name: getattr(self, name) for name in FIELDS}
        record["allocation_ratio"] = float(self.allocation_ratio)
        return record

    def last_modified(self) -> datetime.datetime | None:
        return self.updated_at or self.created_at


def check_capacity(provider_uuid: str, inventories: Iterable[Inventory],
                   reserved_may_equal_total: bool) -> None:
    """Refuse inventories whose reserved amount leaves no capacity. Whether
    a capacity of exactly 0 is acceptable depends on the API version the
    caller speaks (1.26+ allows it), so the caller says."""
    for inventory in inventories:
        if reserved_may_equal_total:
            invalid, relation = inventory.capacity < 0, "greater than"
        else:
            invalid, relation = inventory.capacity <= 0, "greater than or equal to"
        if invalid:
            raise InvalidCapacity(
                f"Invalid inventory for '{inventory.resource_class}' on resource provider "
                f"'{provider_uuid}'. The reserved value is {relation} total.")


def get_all(connection: sa.engine.Connection, provider: ResourceProvider
            ) -> dict[str, Inventory]:
    """{class name: inventory} of the provider, in class id order."""
    rows = connection.execute(
        sa.select(_inv).where(_inv.c.resource_provider_id == provider.id)
        .order_by(_inv.c.resource_class_id)).all()
    names = resource_class.names_from_ids(connection, (row.resource_class_id for row in rows))
    inventories = {}
    for row in rows:
        name = names[row.resource_class_id]
        inventories[name] = Inventory(
            name, created_at=row.created_at, updated_at=row.updated_at,
            **{field: getattr(row, field) for field in FIELDS})
    return inventories


def add(connection: sa.engine.Connection, provider: ResourceProvider,
        inventory: Inventory) -> None:
    """Add an inventory of a class the provider has none of yet.

    Raises NotFound (unknown class), InventoryExists, ConcurrentUpdate."""
    class_id = resource_class.id_from_name(connection, inventory.resource_class)
    increment_generation(connection, provider)
    existing = connection.execute(
        sa.select(_inv.c.id).where(_inv.c.resource_provider_id == provider.id,
                                   _inv.c.resource_class_id == class_id)).first()
    if existing is not None:
        raise InventoryExists(
            f"Inventory of class {inventory.resource_class} already exists on resource "
            f"provider {provider.uuid}.")
    _insert(connection, provider, class_id, inventory)


def update(connection: sa.engine.Connection, provider: ResourceProvider,
           inventory: Inventory) -> None:
    """Replace every field of the provider's inventory of that class.
    Capacity may drop below the current usage.

    Raises NotFound (unknown class), InventoryNotFound, ConcurrentUpdate."""
    class_id = resource_class.id_from_name(connection, inventory.resource_class)
    increment_generation(connection, provider)
    if not _update(connection, provider, class_id, inventory):
        raise InventoryNotFound(inventory.resource_class)


def replace_inventories(connection: sa.engine.Connection, provider: ResourceProvider,
                        inventories: Iterable[Inventory]) -> None:
    """Make the provider's inventory exactly ``inventories``: add the new
    classes, update the existing ones (capacity may drop below usage) and
    delete the classes not listed, which must have no allocations. The
    provider generation is bumped even when nothing changes.

    Raises NotFound (unknown class), InventoryInUse, ConcurrentUpdate.
    No capacity check here: callers that want one call ``check_capacity``."""
    wanted = {inventory.resource_class: inventory for inventory in inventories}
    class_ids = resource_class.ids_from_names(connection, wanted)
    increment_generation(connection, provider)
    current = set(connection.execute(
        sa.select(_inv.c.resource_class_id).where(_inv.c.resource_provider_id == provider.id)
    ).scalars())
    obsolete = current - set(class_ids.values())
    _delete(connection, provider, obsolete)
    for name, inventory in wanted.items():
        if class_ids[name] in current:
            _update(connection, provider, class_ids[name], inventory)
        else:
            _insert(connection, provider, class_ids[name], inventory)


def delete(connection: sa.engine.Connection, provider: ResourceProvider,
           resource_class_name: str) -> None:
    """Delete the provider's inventory of one class (it must have no
    allocations).

    Raises NotFound (unknown class), InventoryNotFound, InventoryInUse,
    ConcurrentUpdate."""
    class_id = resource_class.id_from_name(connection, resource_class_name)
    increment_generation(connection, provider)
    if not _delete(connection, provider, [class_id]):
        raise InventoryNotFound(resource_class_name)


def _insert(connection: sa.engine.Connection, provider: ResourceProvider, class_id: int,
            inventory: Inventory) -> None:
    # ``used`` is set by the database (placement.db.triggers)
    connection.execute(sa.insert(_inv).values(
        resource_provider_id=provider.id, resource_class_id=class_id,
        created_at=timeutils.utcnow(), **inventory.fields()))


def _update(connection: sa.engine.Connection, provider: ResourceProvider, class_id: int,
            inventory: Inventory) -> bool:
    """Overwrite one inventory row; False when there is none."""
    result = connection.execute(
        sa.update(_inv)
        .where(_inv.c.resource_provider_id == provider.id, _inv.c.resource_class_id == class_id)
        .values(updated_at=timeutils.utcnow(), **inventory.fields()))
    return result.rowcount > 0


def _delete(connection: sa.engine.Connection, provider: ResourceProvider,
            class_ids: Collection[int]) -> int:
    """Delete the provider's inventories of these classes after making sure
    none has allocations; the number of rows deleted."""
    if not class_ids:
        return 0
    used_class_ids = connection.execute(
        sa.select(_alloc.c.resource_class_id).distinct()
        .where(_alloc.c.resource_provider_id == provider.id,
               _alloc.c.resource_class_id.in_(class_ids))
        .order_by(_alloc.c.resource_class_id)).scalars().all()
    if used_class_ids:
        names = resource_class.names_from_ids(connection, used_class_ids)
        listed = ", ".join(names[class_id] for class_id in used_class_ids)
        raise InventoryInUse(
            f"Inventory for '{listed}' on resource provider '{provider.uuid}' in use.")
    return connection.execute(
        sa.delete(_inv).where(_inv.c.resource_provider_id == provider.id,
                              _inv.c.resource_class_id.in_(class_ids))).rowcount
