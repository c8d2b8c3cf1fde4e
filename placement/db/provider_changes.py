"""Which providers changed: the record per-process provider caches follow.

Every transaction that changes what a provider *is* (created, deleted,
moved in a tree, its inventories, traits or aggregates changed) names the
provider in this record; allocation writes do not, since no cache keeps
usages. The database's own triggers write it (``placement.db.triggers``), in
the transaction of the change, whoever the writer is: no code path has to
remember. A cache then asks at each request whether anything changed and,
only if something did, which providers: its work follows the changes, not
the number of providers.

Providers are spread over ``SHARDS`` shards (provider id modulo SHARDS).
Each shard has a counter in ``provider_change_shards`` and each change is a
row of ``provider_changes`` (shard, version, provider id). The counter's
row lock, taken by the change and held until COMMIT (MySQL, PostgreSQL;
SQLite has a single writer), makes the versions of a shard commit in order
and without gaps, so a reader that sees version v of a shard also sees
every change of it up to v. No row takes every write: writers of providers
in different shards never meet, allocation writers never touch these
tables.

Only the last ``KEPT`` changes of each shard are kept; a reader further
behind than that (a process idle while thousands of providers changed)
reloads everything. So does every reader when the counter of
``RELOAD_SHARD``, which has no changes of its own, moves: a resource class
renamed (kept summaries name classes), or ``placement-manage reload`` after
a restore or any other change made without the triggers.

``USAGES`` is a second record of the same making (its own tables): the
providers whose usage moved (an inventory's ``used``, which the triggers of
the allocation rows keep), which every process's usage mirror
(``placement.candidates.usage_mirror``) follows instead of reading usages
at each request. The functions below take the record to read (the
providers' by default); ``request_reload`` moves both reload counters.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Mapping

import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import tables

SHARDS = 256
KEPT = 256
RELOAD_SHARD = SHARDS


@dataclasses.dataclass(frozen=True, eq=False)
class ChangeRecord:
    """A record of changes: a counter per shard, the last changes of each."""

    shards: sa.Table
    changes: sa.Table

    def total_statement(self) -> sa.Select:
        return sa.select(sa.func.coalesce(sa.func.sum(self.shards.c.version), 0))


PROVIDERS = ChangeRecord(tables.provider_change_shards, tables.provider_changes)
USAGES = ChangeRecord(tables.usage_change_shards, tables.usage_changes)
# built once: every request reads a total
_TOTALS = {record: record.total_statement() for record in (PROVIDERS, USAGES)}
_BOTH_TOTALS = sa.select(*(statement.scalar_subquery() for statement in _TOTALS.values()))


def shard_of(provider_id: int) -> int:
    """The shard a provider's changes are counted in (the triggers compute
    the same)."""
    return provider_id % SHARDS


def request_reload(connection: sa.engine.Connection) -> None:
    """Make every process reload its whole copy and usage mirror at its
    next request. Each record's reload counter jumps to the current time in
    microseconds: the sum of the versions then differs from any a process
    saw before, even one that saw a database later restored from an older
    backup."""
    now = int(time.time() * 1_000_000)
    for record in (PROVIDERS, USAGES):
        shards = record.shards
        version = connection.scalar(sa.select(shards.c.version)
                                    .where(shards.c.shard == RELOAD_SHARD).with_for_update())
        if version is None:
            connection.execute(sa.insert(shards).values(shard=RELOAD_SHARD, version=now))
        else:
            connection.execute(sa.update(shards).where(shards.c.shard == RELOAD_SHARD)
                               .values(version=max(now, version + 1)))


# -- Reading -----------------------------------------------------------------

def total(connection: sa.engine.Connection, record: ChangeRecord = PROVIDERS) -> int:
    """The sum of every shard's version: versions only grow, so two
    snapshots of the database with the same total have the same versions
    (one snapshot is never ahead in one shard and behind in another)."""
    # int(): SUM is a DECIMAL on MySQL. The driver's own row: every
    # candidates request asks, and SQLAlchemy's result costs more than the
    # database's sum.
    return int(db_api.driver_rows(connection, _TOTALS[record], {})[0][0])


def totals(connection: sa.engine.Connection) -> tuple[int, int]:
    """The ``total`` of the providers' record and of the usages', in one
    statement (a search reads both)."""
    providers, usages = db_api.driver_rows(connection, _BOTH_TOTALS, {})[0]
    return int(providers), int(usages)


def versions(connection: sa.engine.Connection, record: ChangeRecord = PROVIDERS
             ) -> dict[int, int]:
    """Shard -> version."""
    shards = record.shards
    return {shard: version
            for shard, version in connection.execute(sa.select(shards.c.shard, shards.c.version))}


def changed_since(connection: sa.engine.Connection, seen: Mapping[int, int],
                  now: Mapping[int, int], record: ChangeRecord = PROVIDERS) -> set[int] | None:
    """The providers changed between the versions ``seen`` and ``now`` (of
    this transaction); None when some of those changes are no longer kept."""
    if any(version < seen.get(shard, 0) for shard, version in now.items()):
        return None  # a database restored from an older backup (and reloaded since)
    behind = {shard: seen.get(shard, 0) for shard, version in now.items()
              if version > seen.get(shard, 0)}
    if not behind:
        return set()
    changed: set[int] = set()
    found: dict[int, int] = defaultdict(int)
    changes = record.changes
    rows = connection.execute(
        sa.select(changes.c.shard, changes.c.version, changes.c.resource_provider_id)
        .where(changes.c.shard.in_(sorted(behind)),
               changes.c.version > min(behind.values())))
    for shard, version, provider_id in rows:
        if behind[shard] < version <= now[shard]:
            changed.add(provider_id)
            found[shard] += 1
    if any(found[shard] != now[shard] - since for shard, since in behind.items()):
        return None
    return changed
