"""Which providers changed: the record per-process provider caches follow.

Every transaction that changes what a provider *is* (created, deleted,
moved in a tree, its inventories, traits or aggregates changed) names the
provider with ``record``; allocation writes do not, since no cache keeps
usages. A cache then asks at each request whether anything changed and, only
if something did, which providers: its work follows the changes, not the
number of providers.

Providers are spread over ``SHARDS`` shards (provider id modulo SHARDS).
Each shard has a counter in ``provider_change_shards`` and each change is a
row of ``provider_changes`` (shard, version, provider id). ``Database.writer``
calls ``flush`` as the last thing before COMMIT, which counts the changes
shard by shard in shard order: the counter's row lock (MySQL, PostgreSQL;
SQLite has a single writer) makes the versions of a shard commit in order
and without gaps, so a reader that sees version v of a shard also sees
every change of it up to v. No row takes every write: writers of providers
in different shards never meet, allocation writers never touch these
tables.

Only the last ``KEPT`` changes of each shard are kept; a reader further
behind than that (a process idle while thousands of providers changed)
reloads everything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import sqlalchemy as sa

from placement.db import tables

SHARDS = 256
KEPT = 64

_shards = tables.provider_change_shards
_changes = tables.provider_changes

# Providers named by the open transaction of a connection, until flushed.
_PENDING = "placement.provider_changes"


def shard_of(provider_id: int) -> int:
    return provider_id % SHARDS


def record(connection: sa.engine.Connection, provider_ids: Iterable[int]) -> None:
    """The cached facts of these providers change in this transaction."""
    connection.info.setdefault(_PENDING, set()).update(provider_ids)


def discard(connection: sa.engine.Connection) -> None:
    """Forget what a transaction that will not commit recorded."""
    connection.info.pop(_PENDING, None)


_COUNT = (sa.update(_shards).where(_shards.c.shard == sa.bindparam("target_shard"))
          .values(version=_shards.c.version + sa.bindparam("count")))
_VERSION = sa.select(_shards.c.version).where(_shards.c.shard == sa.bindparam("target_shard"))
_PRUNE = sa.delete(_changes).where(_changes.c.shard == sa.bindparam("target_shard"),
                                   _changes.c.version <= sa.bindparam("oldest_dropped"))


def flush(connection: sa.engine.Connection) -> None:
    """Write what the transaction recorded; to be called just before COMMIT
    (the shard rows stay locked until then)."""
    pending = connection.info.pop(_PENDING, None)
    if not pending:
        return
    by_shard: dict[int, list[int]] = defaultdict(list)
    for provider_id in sorted(pending):
        by_shard[shard_of(provider_id)].append(provider_id)
    for shard in sorted(by_shard):
        provider_ids = by_shard[shard]
        parameters = {"target_shard": shard, "count": len(provider_ids)}
        if connection.execute(_COUNT, parameters).rowcount == 0:
            # a database whose shard rows were removed behind our back
            connection.execute(sa.insert(_shards).values(shard=shard, version=len(provider_ids)))
        version = connection.scalar(_VERSION, parameters)
        first = version - len(provider_ids) + 1
        connection.execute(sa.insert(_changes), [
            {"shard": shard, "version": first + offset, "resource_provider_id": provider_id}
            for offset, provider_id in enumerate(provider_ids)])
        connection.execute(_PRUNE, {"target_shard": shard, "oldest_dropped": version - KEPT})


# -- Reading -----------------------------------------------------------------

_TOTAL = sa.select(sa.func.coalesce(sa.func.sum(_shards.c.version), 0))
_VERSIONS = sa.select(_shards.c.shard, _shards.c.version)


def total(connection: sa.engine.Connection) -> int:
    """The sum of every shard's version: versions only grow, so two
    snapshots of the database with the same total have the same versions
    (one snapshot is never ahead in one shard and behind in another)."""
    # int(): SUM is a DECIMAL on MySQL
    return int(connection.scalar(_TOTAL))


def versions(connection: sa.engine.Connection) -> dict[int, int]:
    """Shard -> version."""
    return {shard: version for shard, version in connection.execute(_VERSIONS)}


def changed_since(connection: sa.engine.Connection, seen: Mapping[int, int],
                  now: Mapping[int, int]) -> set[int] | None:
    """The providers changed between the versions ``seen`` and ``now`` (of
    this transaction); None when some of those changes are no longer kept."""
    behind = {shard: seen.get(shard, 0) for shard, version in now.items()
              if version > seen.get(shard, 0)}
    if not behind:
        return set()
    changed: set[int] = set()
    found: dict[int, int] = defaultdict(int)
    rows = connection.execute(
        sa.select(_changes.c.shard, _changes.c.version, _changes.c.resource_provider_id)
        .where(_changes.c.shard.in_(sorted(behind)),
               _changes.c.version > min(behind.values())))
    for shard, version, provider_id in rows:
        if behind[shard] < version <= now[shard]:
            changed.add(provider_id)
            found[shard] += 1
    if any(found[shard] != now[shard] - since for shard, since in behind.items()):
        return None
    return changed
