"""The order in which allocation writers lock rows, so that they never
deadlock each other (placement.objects.allocation).

A write changes the usage of the providers it names and of those its
consumers hold allocations on (which it deletes). Before anything else it
locks their inventories in id order (the rows the triggers of its
allocation rows update), then the counters of the usage change record of
those providers in shard order (which the triggers of the inventories'
usage update: placement.db.triggers), then the providers themselves in id
order (``allocation._providers``, whose generations it moves).
"""

from __future__ import annotations

import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import provider_changes, tables

_allocation = tables.allocations
_inventory = tables.inventories
_rp = tables.resource_providers
_usage_shards = provider_changes.USAGES.shards


def changed_providers(provider_column: sa.ColumnElement, named: int, consumers: int
                      ) -> sa.ColumnElement[bool]:
    """``provider_column`` (a provider id) is a provider a write changes:
    one of the ``named`` uuids, or one on which the ``consumers`` (uuids)
    hold allocations, which the write deletes. (The sizes of the two IN
    lists, for SizedStatement.) One statement locks both kinds, in id
    order, so that allocation writers do not deadlock each other."""
    return sa.or_(
        provider_column.in_(sa.select(_rp.c.id).where(db_api.bound_in(_rp.c.uuid, "uuids", named))),
        provider_column.in_(sa.select(_allocation.c.resource_provider_id).where(
            db_api.bound_in(_allocation.c.consumer_id, "consumer_uuids", consumers))))


# The inventories of the providers of a write, locked in id order (the
# providers themselves are not: rows a subquery reads are not locked).
_LOCK_INVENTORIES = db_api.SizedStatement(lambda uuids, consumer_uuids: (
    sa.select(_inventory.c.resource_provider_id)
    .where(changed_providers(_inventory.c.resource_provider_id, uuids, consumer_uuids))
    .order_by(_inventory.c.id).with_for_update()))

_LOCK_USAGE_SHARDS = db_api.SizedStatement(lambda shards: (
    sa.select(_usage_shards.c.shard)
    .where(db_api.bound_in(_usage_shards.c.shard, "shards", shards))
    .order_by(_usage_shards.c.shard).with_for_update()))


def lock_inventories(connection: sa.engine.Connection, provider_uuids: list[str],
                     consumer_uuids: list[str]) -> None:
    """Lock the inventories of the providers of a write (those named in
    ``provider_uuids``, and those ``consumer_uuids`` hold allocations on,
    whose usage the deletion of those allocations changes), then the
    counters of their usage changes, before the providers: the order in
    which every writer of allocations takes them, the original service
    too (the triggers of its allocation rows update the inventories'
    usage, then it moves the provider's generation). In the other order, a
    claim of ours and one of the original's on the same provider deadlock
    during a rolling switch, and the original answers 500; and a release
    whose triggers lock the inventories of what it deletes only when it
    deletes them deadlocks with the claims on those providers. The usage
    counters are shared by the providers of a shard: taken in shard order
    here rather than in the order of the rows the triggers update, two
    writes of different providers of two shards cannot deadlock."""
    provider_ids = connection.execute(*_LOCK_INVENTORIES(
        uuids=provider_uuids, consumer_uuids=consumer_uuids)).scalars()
    shards = sorted({provider_changes.shard_of(provider_id) for provider_id in provider_ids})
    if shards and connection.dialect.name != "sqlite":  # SQLite: one writer at a time
        connection.execute(*_LOCK_USAGE_SHARDS(shards=shards))
