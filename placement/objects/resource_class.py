"""Resource classes: name <-> id resolution.

Standard classes have the id of their position in os-resource-classes and
never change, so they are resolved without the database; custom classes
(id >= 10000) are looked up, as another process may create or delete them.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable

import os_resource_classes
import sqlalchemy as sa
from oslo_db import exception as db_exc
from oslo_utils import timeutils

from placement import exceptions
from placement.db import tables

STANDARD_IDS: dict[str, int] = {name: i for i, name in enumerate(os_resource_classes.STANDARDS)}
STANDARD_NAMES: dict[int, str] = {i: name for name, i in STANDARD_IDS.items()}
CUSTOM_ID_START = 10000
_rc = tables.resource_classes


class ResourceClassNotFound(exceptions.NotFound):
    """No class of that name."""

    def __init__(self, name: str):
        super().__init__(f"No such resource class {name}.")


def ids_from_names(connection: sa.engine.Connection, names: Iterable[str]
                   ) -> dict[str, int]:
    """{name: id} for every name; NotFound naming the first unknown one."""
    names = list(dict.fromkeys(names))
    found = {name: STANDARD_IDS[name] for name in names if name in STANDARD_IDS}
    custom = [name for name in names if name not in found]
    if custom:
        rows = connection.execute(sa.select(_rc.c.name, _rc.c.id).where(_rc.c.name.in_(custom)))
        found.update({row.name: row.id for row in rows})
    for name in names:
        if name not in found:
            raise ResourceClassNotFound(name)
    return found


def id_from_name(connection: sa.engine.Connection, name: str) -> int:
    return ids_from_names(connection, [name])[name]


def names_from_ids(connection: sa.engine.Connection, ids: Iterable[int]) -> dict[int, str]:
    ids = set(ids)
    found = {i: STANDARD_NAMES[i] for i in ids if i in STANDARD_NAMES}
    custom = ids - found.keys()
    if custom:
        rows = connection.execute(sa.select(_rc.c.id, _rc.c.name).where(_rc.c.id.in_(custom)))
        found.update({row.id: row.name for row in rows})
    return found


@dataclasses.dataclass
class ResourceClass:
    id: int
    name: str
    created_at: datetime.datetime | None = None
    updated_at: datetime.datetime | None = None

    @property
    def is_standard(self) -> bool:
        return self.id < CUSTOM_ID_START


class ResourceClassExists(exceptions.Conflict):
    """A custom class of that name exists already."""


def _from_row(row: sa.Row) -> ResourceClass:
    return ResourceClass(row.id, row.name, row.created_at, row.updated_at)


def _select() -> sa.Select:
    return sa.select(_rc.c.id, _rc.c.name, _rc.c.created_at, _rc.c.updated_at)


def get_all(connection: sa.engine.Connection) -> list[ResourceClass]:
    """Every class, standard ones first (in library order), then custom ones
    in the order they were created (ids grow)."""
    return [_from_row(row) for row in connection.execute(_select().order_by(_rc.c.id))]


def get_by_name(connection: sa.engine.Connection, name: str) -> ResourceClass:
    row = connection.execute(_select().where(_rc.c.name == name)).one_or_none()
    if row is None:
        raise ResourceClassNotFound(name)
    return _from_row(row)


def create(connection: sa.engine.Connection, name: str) -> ResourceClass:
    """Insert a custom class with the next free custom id. Raises
    ResourceClassExists when the name is taken. Two writers racing for the
    same id: the loser gets DBDuplicateEntry on the primary key and must
    retry in a new transaction (``placement.db.api.write`` does)."""
    exists = connection.execute(sa.select(_rc.c.id).where(_rc.c.name == name)).first()
    if exists is not None:
        raise ResourceClassExists(f"Conflicting resource class already exists: {name}")
    highest = connection.execute(sa.select(sa.func.max(_rc.c.id))).scalar()
    new_id = max(highest if highest is not None else 0, CUSTOM_ID_START - 1) + 1
    now = timeutils.utcnow()
    try:
        connection.execute(sa.insert(_rc).values(id=new_id, name=name, created_at=now))
    except db_exc.DBDuplicateEntry as error:
        if "name" in (error.columns or []):
            raise ResourceClassExists(
                f"Conflicting resource class already exists: {name}") from None
        # A concurrent writer took the same id: a lost race like a deadlock,
        # so report it as one to be retried in a new transaction.
        raise db_exc.DBDeadlock() from error
    return ResourceClass(new_id, name, now)


def rename(connection: sa.engine.Connection, resource_class: ResourceClass,
           new_name: str) -> ResourceClass:
    """Rename a custom class (standard classes are read-only)."""
    if resource_class.is_standard:
        raise exceptions.InvalidInput(
            f"Cannot update standard resource class {resource_class.name}")
    # Renaming a class to its own name is no conflict: nothing changes.
    taken = connection.execute(sa.select(_rc.c.id).where(
        _rc.c.name == new_name, _rc.c.id != resource_class.id)).first()
    if taken is not None:
        raise ResourceClassExists(f"Resource class already exists: {new_name}")
    now = timeutils.utcnow()
    connection.execute(
        sa.update(_rc).where(_rc.c.id == resource_class.id).values(name=new_name, updated_at=now))
    return dataclasses.replace(resource_class, name=new_name, updated_at=now)


def delete(connection: sa.engine.Connection, resource_class: ResourceClass) -> None:
    """Delete a custom class that no inventory uses (allocations always come
    with an inventory, so checking inventories is enough)."""
    if resource_class.is_standard:
        raise exceptions.InvalidInput(
            f"Cannot delete standard resource class {resource_class.name}.")
    inventories = tables.inventories
    in_use = connection.execute(
        sa.select(inventories.c.id).where(inventories.c.resource_class_id == resource_class.id)
        .limit(1)).first()
    if in_use is not None:
        raise exceptions.Conflict(
            f"Cannot delete resource class {resource_class.name}. Class is in use in inventory.")
    connection.execute(sa.delete(_rc).where(_rc.c.id == resource_class.id))
