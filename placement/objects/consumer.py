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
from placement.db import api as db_api
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


# Statements built once: every allocation write runs them.
_BY_UUIDS = db_api.SizedStatement(lambda uuids: (
    sa.select(_consumer.c.id, _consumer.c.uuid, _consumer.c.generation,
              _consumer.c.project_id, _consumer.c.user_id, _consumer.c.consumer_type_id)
    .where(db_api.bound_in(_consumer.c.uuid, "uuids", uuids))))
_INSERT = sa.insert(_consumer)
_DELETE_IF_EMPTY = db_api.SizedStatement(lambda uuids: (
    sa.delete(_consumer)
    .where(db_api.bound_in(_consumer.c.uuid, "uuids", uuids),
           ~sa.exists().where(_allocation.c.consumer_id == _consumer.c.uuid))))

# The owner tables, numbered for _OWNER_IDS.
_OWNER_TABLES = ((_project, _project.c.external_id), (_user, _user.c.external_id),
                 (_consumer_type, _consumer_type.c.name))
# (table number, name, id) of the projects, users and types named, in one
# statement instead of one per table.
_OWNER_IDS = db_api.SizedStatement(lambda **sizes: sa.union_all(*(
    sa.select(sa.literal_column(str(number)).label("kind"), column.label("name"), table.c.id)
    .where(db_api.bound_in(column, f"names{number}", sizes[f"names{number}"]))
    for number, (table, column) in enumerate(_OWNER_TABLES))))


def get_by_uuids(connection: sa.engine.Connection, consumer_uuids: Iterable[str]
                 ) -> dict[str, Consumer]:
    """The consumers that exist among ``consumer_uuids``, by uuid."""
    rows = connection.execute(*_BY_UUIDS(uuids=list(consumer_uuids)))
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


def _owner_ids(connection: sa.engine.Connection, names: Sequence[Iterable[str]]
               ) -> list[dict[str, int]]:
    """For each owner table (in _OWNER_TABLES order) {name: id} of the
    given names, looked up in one statement; new names go through
    _id_for_name."""
    names = [list(dict.fromkeys(table_names)) for table_names in names]
    found: list[dict[str, int]] = [{} for _ in _OWNER_TABLES]
    rows = connection.execute(*_OWNER_IDS(**{f"names{number}": table_names
                                             for number, table_names in enumerate(names)}))
    for row in rows:
        found[row.kind][row.name] = row.id
    return [{value: found[number][value] if value in found[number]
             else _id_for_name(connection, *_OWNER_TABLES[number], value)
             for value in table_names}
            for number, table_names in enumerate(names)]


def _check_generation(existing: Consumer | None, expected: int | None) -> None:
    if existing is None and expected is not None:
        raise GenerationConflict(
            f"consumer generation conflict - expected null but got {expected}")
    if existing is not None and existing.generation != expected:
        raise GenerationConflict(
            f"consumer generation conflict - expected {existing.generation} "
            f"but got {expected}")


# The generation of a consumer created by a write, once the write is done
# (created at 0, then moved on by the write like every other consumer).
CREATED_GENERATION = 1


def prepare(connection: sa.engine.Connection, requests: Sequence[ConsumerRequest]
            ) -> list[Consumer]:
    """Check and record the consumers about to be written: generation
    checks (1.28+ writes: ``check_generation``; the first conflict in
    request order is reported), unknown ones created, the owner of the
    request recorded. Returns the consumers that existed, in request
    order: the write must compare-and-swap their generation
    (increment_generations). The ones created here already have the
    generation they get from the write (CREATED_GENERATION): nobody else
    can have written them. A constant number of statements whatever the
    number of consumers, except for projects, users and types named for
    the first time and consumers whose owner changes."""
    consumers = get_by_uuids(connection, [request.consumer_uuid for request in requests])
    for request in requests:
        if request.check_generation:
            _check_generation(consumers.get(request.consumer_uuid), request.generation)
    owners = [request.owner for request in requests]
    project_ids, user_ids, type_ids = _owner_ids(connection, [
        [owner.project_id for owner in owners], [owner.user_id for owner in owners],
        [owner.consumer_type for owner in owners if owner.consumer_type is not None]])
    now = timeutils.utcnow()
    new_rows: dict[str, dict] = {}
    existing_consumers = []
    for request in requests:
        owner = request.owner
        ids = {"project_id": project_ids[owner.project_id], "user_id": user_ids[owner.user_id]}
        if owner.consumer_type is not None:
            ids["consumer_type_id"] = type_ids[owner.consumer_type]
        existing = consumers.get(request.consumer_uuid)
        if existing is None:
            new_rows[request.consumer_uuid] = {
                "uuid": request.consumer_uuid, "generation": CREATED_GENERATION,
                "created_at": now, "updated_at": now, "consumer_type_id": None, **ids}
            continue
        changed = {name: value for name, value in ids.items()
                   if getattr(existing, name) != value}
        if changed:
            connection.execute(sa.update(_consumer).where(_consumer.c.id == existing.id)
                               .values(updated_at=now, **changed))
            existing = dataclasses.replace(existing, **changed)
        existing_consumers.append(existing)
    if new_rows:
        connection.execute(_INSERT, list(new_rows.values()))
    return existing_consumers


def increment_generations(connection: sa.engine.Connection, consumers: Sequence[Consumer]
                          ) -> None:
    """Compare-and-swap the generations read by ``prepare`` to the next
    ones, all in one statement."""
    if not compare_and_swap(connection, _consumer, consumers, updated_at=timeutils.utcnow()):
        raise exceptions.ConcurrentUpdate(
            "Another thread concurrently updated the data. Please retry your update")


def delete_if_empty(connection: sa.engine.Connection, consumer_uuids: Iterable[str]) -> None:
    """Delete the records of these consumers that have no allocations left."""
    connection.execute(*_DELETE_IF_EMPTY(uuids=list(consumer_uuids)))


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
