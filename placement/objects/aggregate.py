"""Aggregates of providers: plain uuids, created the first time a provider
is associated with them and never deleted."""

from __future__ import annotations

import sqlalchemy as sa
from oslo_db import exception as db_exc
from oslo_utils import timeutils

from placement import exceptions
from placement.db import tables
from placement.objects import resource_provider as rp_obj
from placement.objects.resource_provider import ResourceProvider

_agg = tables.placement_aggregates
_rp_agg = tables.resource_provider_aggregates
_UUID_WIDTH = _agg.c.uuid.type.length


def stored_form(uuid: str) -> str:
    """How the aggregate ``uuid`` (any form the lenient uuid check accepts)
    is stored and looked up: as given when it fits the column, as the spec
    wants; forms too long for it (``urn:uuid:...``, ``{...}``) canonical."""
    if len(uuid) <= _UUID_WIDTH:
        return uuid
    return rp_obj.normalize_uuid(uuid)


def uuids_of(connection: sa.engine.Connection, provider: ResourceProvider) -> list[str]:
    """The provider's aggregate uuids, in association order."""
    rows = connection.execute(
        sa.select(_agg.c.uuid)
        .join(_rp_agg, _rp_agg.c.aggregate_id == _agg.c.id)
        .where(_rp_agg.c.resource_provider_id == provider.id)
        .order_by(_rp_agg.c.created_at, _agg.c.id))
    return [row.uuid for row in rows]


def _existing_ids(connection: sa.engine.Connection, uuids: list[str]) -> dict[str, int]:
    """{uuid: aggregate id} of the aggregates among ``uuids`` that exist."""
    query = sa.select(_agg.c.uuid, _agg.c.id).where(_agg.c.uuid.in_(uuids))
    return {row.uuid: row.id for row in connection.execute(query)}


def _ids_creating_missing(connection: sa.engine.Connection, uuids: list[str]) -> dict[str, int]:
    """{uuid: aggregate id}, inserting the aggregates not seen before."""
    found = _existing_ids(connection, uuids)
    now = timeutils.utcnow().replace(tzinfo=None)
    for uuid in uuids:
        if uuid in found:
            continue
        try:
            with connection.begin_nested():
                found[uuid] = connection.execute(
                    sa.insert(_agg).values(uuid=uuid, created_at=now)).inserted_primary_key[0]
        except db_exc.DBDuplicateEntry:
            # Another request created it since our read. A plain read would
            # not see it under REPEATABLE READ; a locking read sees the
            # latest committed row.
            found[uuid] = connection.scalar(
                sa.select(_agg.c.id).where(_agg.c.uuid == uuid).with_for_update())
    return found


def _linked_ids(connection: sa.engine.Connection, provider: ResourceProvider) -> set[int]:
    """Ids of the aggregates the provider is associated with."""
    return set(connection.scalars(sa.select(_rp_agg.c.aggregate_id).where(
        _rp_agg.c.resource_provider_id == provider.id)))


def replace(connection: sa.engine.Connection, provider: ResourceProvider,
            uuids: list[str]) -> None:
    """Make ``uuids`` exactly the provider's aggregates (kept as given)."""
    wanted = _ids_creating_missing(connection, uuids) if uuids else {}
    rp_obj.replace_links(connection, _rp_agg.c.aggregate_id, provider,
                         _linked_ids(connection, provider), wanted.values())


def set_for_provider(connection: sa.engine.Connection, provider_uuid: str,
                     uuids: list[str], generation: int | None = None) -> ResourceProvider:
    """Replace the aggregates of provider ``provider_uuid``. With a
    ``generation`` (1.19+) it must be the current one and the provider
    generation goes up, changed set or not; without, it is left alone."""
    provider = rp_obj.get_by_uuid(connection, provider_uuid)
    if generation is not None:
        rp_obj.check_generation(provider, generation)
        try:
            rp_obj.increment_generation(connection, provider)
        except exceptions.ConcurrentUpdate as error:
            raise exceptions.ConcurrentUpdate(f"Update conflict: {error}") from None
    try:
        replace(connection, provider, uuids)
    except db_exc.DBDuplicateEntry:
        # Below 1.19 nothing serialises writers of one provider: another
        # request linked the same aggregate since our read.
        raise exceptions.ConcurrentUpdate(
            f"Update conflict: the aggregates of resource provider {provider.uuid} "
            "were changed by another request.") from None
    return provider
