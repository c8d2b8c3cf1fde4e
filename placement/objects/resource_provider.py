"""Resource providers: lookups and the generation compare-and-swap every
write to a provider goes through."""

from __future__ import annotations

import dataclasses
import datetime

import sqlalchemy as sa
from sqlalchemy.orm import aliased

from placement import exceptions
from placement.db import tables

_rp = tables.resource_providers
_parent = aliased(_rp)
_root = aliased(_rp)


@dataclasses.dataclass
class ResourceProvider:
    id: int
    uuid: str
    name: str | None
    generation: int
    root_provider_id: int
    parent_provider_id: int | None
    root_provider_uuid: str
    parent_provider_uuid: str | None
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None


def select_providers() -> sa.Select:
    """SELECT of providers with their root and parent uuids; add WHEREs."""
    return (
        sa.select(
            _rp.c.id, _rp.c.uuid, _rp.c.name, _rp.c.generation,
            _rp.c.root_provider_id, _rp.c.parent_provider_id,
            _root.c.uuid.label("root_provider_uuid"),
            _parent.c.uuid.label("parent_provider_uuid"),
            _rp.c.created_at, _rp.c.updated_at,
        )
        .select_from(_rp)
        .join(_root, _root.c.id == _rp.c.root_provider_id)
        .outerjoin(_parent, _parent.c.id == _rp.c.parent_provider_id)
    )


def get_by_uuid(connection: sa.engine.Connection, uuid: str) -> ResourceProvider:
    row = connection.execute(select_providers().where(_rp.c.uuid == uuid)).one_or_none()
    if row is None:
        raise exceptions.NotFound(f"No resource provider with uuid {uuid} found")
    return ResourceProvider(**row._mapping)


def increment_generation(connection: sa.engine.Connection, provider: ResourceProvider) -> int:
    """Compare-and-swap the provider generation from the value we read to the
    next one, in the caller's transaction. Raises ConcurrentUpdate when
    another writer got there first; the caller's transaction must then be
    rolled back."""
    result = connection.execute(
        sa.update(_rp)
        .where(_rp.c.id == provider.id, _rp.c.generation == provider.generation)
        .values(generation=provider.generation + 1)
    )
    if result.rowcount != 1:
        raise exceptions.ConcurrentUpdate(
            f"resource provider generation conflict: {provider.uuid} was changed "
            "by another request. Please update the generation and try again.")
    provider.generation += 1
    return provider.generation
