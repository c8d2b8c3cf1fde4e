"""Consumers: the owners of allocations, with their project, user, type and
generation.

A consumer record exists while the consumer has allocations. Projects,
users and consumer types are created the first time a write names them and
are never deleted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Protocol

import sqlalchemy as sa
from oslo_utils import timeutils

from placement import exceptions
from placement.db import tables
from placement.objects.generation import compare_and_swap

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


class ConsumerRequest(Protocol):
    """What a write says about one consumer (allocation.ConsumerAllocations)."""

    consumer_uuid: str
    owner: Owner
    check_generation: bool
    generation: int | None


def get_by_uuids(connection: sa.engine.Connection, consumer_uuids: Iterable[str]
                 ) -> dict[str, Consumer]:
    """The consumers that exist among ``consumer_uuids``, by uuid."""
    rows = connection.execute(
        sa.select(_consumer.c.id, _consumer.c.uuid, _consumer.c.generation,
                  _consumer.c.project_id, _consumer.c.user_id, _consumer.c.consumer_type_id)
        .where(_consumer.c.uuid.in_(list(consumer_uuids))))
    return {row.uuid: Consumer(**row._mapping) for row in rows}


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


def _ids_for_names(connection: sa.engine.Connection, table: sa.Table, column: sa.Column,
                   values: Iterable[str]) -> dict[str, int]:
    """{value: id} of the rows of ``table`` whose ``column`` is one of
    ``values``, in one query; values not found that way (new ones, or a
    collation that matched another spelling) go through _id_for_name."""
    values = list(dict.fromkeys(values))
    if not values:
        return {}
    found = dict(connection.execute(
        sa.select(column, table.c.id).where(column.in_(values))).all())
    return {value: found[value] if value in found
            else _id_for_name(connection, table, column, value)
            for value in values}


def _check_generation(existing: Consumer | None, expected: int | None) -> None:
    if existing is None and expected is not None:
        raise GenerationConflict(
            f"consumer generation conflict - expected null but got {expected}")
    if existing is not None and existing.generation != expected:
        raise GenerationConflict(
            f"consumer generation conflict - expected {existing.generation} "
            f"but got {expected}")


def prepare(connection: sa.engine.Connection, requests: Sequence[ConsumerRequest]
            ) -> list[Consumer]:
    """The consumers about to be written, in request order: generation
    checks (1.28+ writes: ``check_generation``; the first conflict in
    request order is reported), unknown ones created (generation 0), the
    owner of the request recorded. A constant number of statements
    whatever the number of consumers, except for projects, users and types
    named for the first time and consumers whose owner changes."""
    consumers = get_by_uuids(connection, [request.consumer_uuid for request in requests])
    for request in requests:
        if request.check_generation:
            _check_generation(consumers.get(request.consumer_uuid), request.generation)
    owners = [request.owner for request in requests]
    project_ids = _ids_for_names(connection, _project, _project.c.external_id,
                                 [owner.project_id for owner in owners])
    user_ids = _ids_for_names(connection, _user, _user.c.external_id,
                              [owner.user_id for owner in owners])
    type_ids = _ids_for_names(connection, _consumer_type, _consumer_type.c.name,
                              [owner.consumer_type for owner in owners
                               if owner.consumer_type is not None])
    now = timeutils.utcnow()
    new_rows: dict[str, dict] = {}
    for request in requests:
        owner = request.owner
        ids = {"project_id": project_ids[owner.project_id], "user_id": user_ids[owner.user_id]}
        if owner.consumer_type is not None:
            ids["consumer_type_id"] = type_ids[owner.consumer_type]
        existing = consumers.get(request.consumer_uuid)
        if existing is None:
            new_rows[request.consumer_uuid] = {
                "uuid": request.consumer_uuid, "generation": 0, "created_at": now,
                "consumer_type_id": None, **ids}
            continue
        changed = {name: value for name, value in ids.items()
                   if getattr(existing, name) != value}
        if changed:
            connection.execute(sa.update(_consumer).where(_consumer.c.id == existing.id)
                               .values(updated_at=now, **changed))
            consumers[request.consumer_uuid] = dataclasses.replace(existing, **changed)
    if new_rows:
        connection.execute(sa.insert(_consumer), list(new_rows.values()))
        consumers.update(get_by_uuids(connection, new_rows))
    return [consumers[request.consumer_uuid] for request in requests]


def increment_generations(connection: sa.engine.Connection, consumers: Sequence[Consumer]
                          ) -> None:
    """Compare-and-swap the generations read by ``prepare`` to the next
    ones, all in one statement."""
    if not compare_and_swap(connection, _consumer, consumers, updated_at=timeutils.utcnow()):
        raise exceptions.ConcurrentUpdate(
            "Another thread concurrently updated the data. Please retry your update")


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
