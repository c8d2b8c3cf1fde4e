"""Consumers: the owners of allocations, with their project, user, type and
generation.

A consumer record exists while the consumer has allocations. Projects,
users and consumer types are created the first time a write names them and
are never deleted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import sqlalchemy as sa
from oslo_utils import timeutils

from placement import exceptions
from placement.db import tables

_consumer = tables.consumers
_allocation = tables.allocations
_project = tables.projects
_user = tables.users
_consumer_type = tables.consumer_types

UNKNOWN_TYPE = "unknown"


class GenerationConflict(exceptions.ConcurrentUpdate):
    """The generation the client sent is not the consumer's generation."""


@dataclasses.dataclass
class Consumer:
    id: int
    uuid: str
    generation: int
    project_id: int
    user_id: int
    consumer_type_id: int | None


@dataclasses.dataclass
class Owner:
    """Who a consumer belongs to (external ids) and, from 1.38 on, its type.
    ``consumer_type`` None means: keep the stored type (writes below 1.38)."""

    project_id: str
    user_id: str
    consumer_type: str | None = None


def get_by_uuid(connection: sa.engine.Connection, consumer_uuid: str) -> Consumer | None:
    row = connection.execute(
        sa.select(_consumer.c.id, _consumer.c.uuid, _consumer.c.generation,
                  _consumer.c.project_id, _consumer.c.user_id, _consumer.c.consumer_type_id)
        .where(_consumer.c.uuid == consumer_uuid)
    ).one_or_none()
    return Consumer(**row._mapping) if row is not None else None


def _id_for_name(connection: sa.engine.Connection, table: sa.Table, column: sa.Column,
                 value: str) -> int:
    """The id of the row of ``table`` whose ``column`` is ``value``, inserting
    it when missing. A concurrent insert of the same value surfaces as
    DBDuplicateEntry, which makes the allocation write start over in a new
    transaction (where the other row is visible)."""
    found = connection.execute(sa.select(table.c.id).where(column == value)).scalar()
    if found is not None:
        return found
    result = connection.execute(
        sa.insert(table).values({column.name: value, "created_at": timeutils.utcnow()}))
    return result.inserted_primary_key[0]


def _owner_ids(connection: sa.engine.Connection, owner: Owner) -> dict[str, int]:
    ids = {
        "project_id": _id_for_name(connection, _project, _project.c.external_id,
                                   owner.project_id),
        "user_id": _id_for_name(connection, _user, _user.c.external_id, owner.user_id),
    }
    if owner.consumer_type is not None:
        ids["consumer_type_id"] = _id_for_name(
            connection, _consumer_type, _consumer_type.c.name, owner.consumer_type)
    return ids


def _check_generation(existing: Consumer | None, expected: int | None) -> None:
    if existing is None and expected is not None:
        raise GenerationConflict(
            f"consumer generation conflict - expected null but got {expected}")
    if existing is not None and existing.generation != expected:
        raise GenerationConflict(
            f"consumer generation conflict - expected {existing.generation} "
            f"but got {expected}")


def prepare(connection: sa.engine.Connection, consumer_uuid: str, owner: Owner,
            check_generation: bool, expected_generation: int | None) -> Consumer:
    """The consumer about to be written, after the generation check (1.28+
    writes: ``check_generation``), created if unknown (generation 0) and
    with the owner of the request recorded."""
    existing = get_by_uuid(connection, consumer_uuid)
    if check_generation:
        _check_generation(existing, expected_generation)
    ids = _owner_ids(connection, owner)
    now = timeutils.utcnow()
    if existing is None:
        connection.execute(sa.insert(_consumer).values(
            uuid=consumer_uuid, generation=0, created_at=now, **ids))
        return get_by_uuid(connection, consumer_uuid)
    changed = {name: value for name, value in ids.items()
               if getattr(existing, name) != value}
    if changed:
        connection.execute(sa.update(_consumer).where(_consumer.c.id == existing.id)
                           .values(updated_at=now, **changed))
        existing = dataclasses.replace(existing, **changed)
    return existing


def increment_generation(connection: sa.engine.Connection, consumer: Consumer) -> None:
    """Compare-and-swap the generation read by ``prepare`` to the next one."""
    result = connection.execute(
        sa.update(_consumer)
        .where(_consumer.c.id == consumer.id, _consumer.c.generation == consumer.generation)
        .values(generation=consumer.generation + 1, updated_at=timeutils.utcnow())
    )
    if result.rowcount != 1:
        raise exceptions.ConcurrentUpdate(
            "Another thread concurrently updated the data. Please retry your update")
    consumer.generation += 1


def delete_if_empty(connection: sa.engine.Connection, consumer_uuids: Iterable[str]) -> None:
    """Delete the records of these consumers that have no allocations left."""
    has_allocations = sa.exists().where(_allocation.c.consumer_id == _consumer.c.uuid)
    connection.execute(
        sa.delete(_consumer)
        .where(_consumer.c.uuid.in_(list(consumer_uuids)), ~has_allocations))


@dataclasses.dataclass
class ConsumerDetails:
    generation: int
    project_id: str
    user_id: str
    consumer_type: str


def get_details(connection: sa.engine.Connection, consumer_uuid: str
                ) -> ConsumerDetails | None:
    """Generation, external project and user ids and type name of a consumer."""
    row = connection.execute(
        sa.select(_consumer.c.generation,
                  _project.c.external_id.label("project_id"),
                  _user.c.external_id.label("user_id"),
                  _consumer_type.c.name.label("consumer_type"))
        .select_from(_consumer)
        .join(_project, _project.c.id == _consumer.c.project_id)
        .join(_user, _user.c.id == _consumer.c.user_id)
        .outerjoin(_consumer_type, _consumer_type.c.id == _consumer.c.consumer_type_id)
        .where(_consumer.c.uuid == consumer_uuid)
    ).one_or_none()
    if row is None:
        return None
    return ConsumerDetails(row.generation, row.project_id, row.user_id,
                           row.consumer_type or UNKNOWN_TYPE)
