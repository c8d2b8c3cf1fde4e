"""Reading the provider copy (``placement.candidates.provider_copy``) from
the database and following its changes: ``current`` gives the newest copy
of a connection's database, brought up to date with the change record
(``placement.db.provider_changes``) in the caller's transaction; data read
after the change counters is at least as new as them, so the copy is never
older than the versions it is filed under. ``follow`` keeps a process's
copy following in the background. Also here: the usages the search reads
per request (``usages``), which the copy does not keep.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Iterable

import sqlalchemy as sa
from oslo_log import log as logging

from placement import metrics
from placement.candidates.kept import KEPT_CAPACITY, MEMO_BYTES_PER_PROVIDER, KeptStore
from placement.candidates.provider_copy import EMPTY, CachedProvider, ProviderCopy
from placement.candidates.usage_mirror import UsageMirror, Usages
from placement.db import api as db_api
from placement.db import provider_changes, tables
from placement.objects.inventory import InventoryUsage

LOG = logging.getLogger(__name__)

_rp = tables.resource_providers
_inv = tables.inventories
_trait = tables.traits
_rp_trait = tables.resource_provider_traits
_agg = tables.placement_aggregates
_rp_agg = tables.resource_provider_aggregates


def among(column: sa.ColumnElement, ids: list[int]) -> sa.ColumnElement:
    """``column IN (ids)`` with one expanding parameter: in_() of a list
    coerces every element, which costs milliseconds for long lists."""
    return column.in_(sa.bindparam(None, ids, type_=column.type, expanding=True))


def usages(connection: sa.engine.Connection, provider_ids: list[int] | None,
           class_ids: list[int] | None) -> dict[tuple[int, int], int]:
    """(provider id, class id) -> amount allocated, for these providers
    and classes (None: all of them), where any is: from this process's
    usage mirror, as ``connection``'s transaction sees them or newer."""
    return _cache_of(connection.engine).usages.current(connection).of(provider_ids, class_ids)


def current_with_usages(connection: sa.engine.Connection) -> tuple[ProviderCopy, Usages]:
    """``current`` and a snapshot of the usage mirror, both as
    ``connection``'s transaction sees them or newer (one snapshot serves
    a whole search), their change totals read at once."""
    provider_total, usage_total = provider_changes.totals(connection)
    cache = _cache_of(connection.engine)
    return cache.current(connection, provider_total), cache.usages.current(connection,
                                                                            usage_total)


def _load(connection: sa.engine.Connection, ids: Iterable[int] | None
          ) -> dict[int, CachedProvider]:
    """The providers ``ids`` that exist (None: all of them), with their
    inventories, traits and aggregates."""
    conditions = ([sa.true()] if ids is None
                  else [among(_rp.c.id, chunk) for chunk in db_api.chunks(ids)])
    rows: list[tuple] = []
    inventories: dict[int, dict[int, InventoryUsage]] = defaultdict(dict)
    traits: dict[int, list[str]] = defaultdict(list)
    aggregates: dict[int, list[str]] = defaultdict(list)
    for condition in conditions:
        rows += db_api.plain_rows(connection, sa.select(
            _rp.c.id, _rp.c.uuid, _rp.c.parent_provider_id, _rp.c.root_provider_id)
            .where(condition))
        for (provider_id, class_id, total, reserved, min_unit, max_unit, step_size,
             allocation_ratio) in connection.execute(
                sa.select(_inv.c.resource_provider_id, _inv.c.resource_class_id,
                          _inv.c.total, _inv.c.reserved, _inv.c.min_unit, _inv.c.max_unit,
                          _inv.c.step_size, _inv.c.allocation_ratio)
                .join(_rp, _rp.c.id == _inv.c.resource_provider_id).where(condition)):
            inventories[provider_id][class_id] = InventoryUsage(
                total, reserved, min_unit, max_unit, step_size, allocation_ratio, 0)
        for provider_id, name in db_api.plain_rows(connection, (
                sa.select(_rp_trait.c.resource_provider_id, _trait.c.name)
                .join(_trait, _trait.c.id == _rp_trait.c.trait_id)
                .join(_rp, _rp.c.id == _rp_trait.c.resource_provider_id)
                .where(condition).order_by(_trait.c.id))):
            traits[provider_id].append(sys.intern(name))
        for provider_id, uuid in db_api.plain_rows(connection, (
                sa.select(_rp_agg.c.resource_provider_id, _agg.c.uuid)
                .join(_agg, _agg.c.id == _rp_agg.c.aggregate_id)
                .join(_rp, _rp.c.id == _rp_agg.c.resource_provider_id)
                .where(condition))):
            aggregates[provider_id].append(sys.intern(uuid))
    return {provider_id: CachedProvider(
                provider_id, uuid, parent_id, root_id, inventories.get(provider_id, {}),
                tuple(traits.get(provider_id, ())), frozenset(traits.get(provider_id, ())),
                frozenset(aggregates.get(provider_id, ())))
            for provider_id, uuid, parent_id, root_id in rows}


@dataclasses.dataclass(frozen=True)
class _State:
    copy: ProviderCopy
    versions: dict[int, int]  # shard -> version the copy is as new as
    total: int  # their sum; -1 before the first load


class Follower:
    """The newest copy of one database, refreshed by ``current``."""

    def __init__(self) -> None:
        self._state = _State(EMPTY, {}, -1)
        # one refresh at a time: concurrent requests would load the same rows
        self._lock = threading.Lock()
        self._kept_capacity = KEPT_CAPACITY
        self.usages = UsageMirror()

    def current_total(self) -> int:
        """The change total the copy is as new as (-1: never read)."""
        return self._state.total

    def keep_within(self, capacity: int) -> None:
        """Bound what requests keep (the copies' ``KeptStore``) to
        ``capacity`` bytes, from now on."""
        with self._lock:
            self._kept_capacity = capacity
            if self._state.total >= 0:  # EMPTY's store is not this database's
                self._state.copy.kept.resize(capacity)

    def current(self, connection: sa.engine.Connection, total: int | None = None
                ) -> ProviderCopy:
        """The providers as ``connection``'s transaction sees them (or
        newer, never older); ``total``: ``provider_changes.total`` as the
        caller already read it in that transaction."""
        if total is None:
            total = provider_changes.total(connection)
        state = self._state
        if total <= state.total:
            # nothing changed (or this transaction is older than the copy)
            return state.copy
        with self._lock:
            state = self._state
            if total <= state.total:
                return state.copy
            versions = provider_changes.versions(connection)
            changed = (None if state.total < 0 else
                       provider_changes.changed_since(connection, state.versions, versions))
            if changed is None:  # the first load, or too far behind
                # every record is new: nothing kept from the old ones holds
                loaded = _load(connection, None)
                copy = dataclasses.replace(
                    EMPTY.updated(loaded, ()),
                    kept=KeptStore(self._kept_capacity, self._empty_provider_memos))
                metrics.count_provider_cache_refresh("full", len(loaded))
            else:
                loaded = _load(connection, changed)
                copy = state.copy.updated(loaded, changed - loaded.keys())
                metrics.count_provider_cache_refresh("incremental", len(loaded))
            copy.kept.allow_memos(MEMO_BYTES_PER_PROVIDER * len(copy.providers))
            self._state = _State(copy, versions, total)
            return copy

    def _empty_provider_memos(self) -> None:
        """Empty the memos of the newest copy's providers (older
        copies share almost all their records with it)."""
        for provider in self._state.copy.providers.values():
            provider.memo.clear()


_caches: weakref.WeakKeyDictionary[sa.engine.Engine, Follower] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()

# How often a process's copy follows the change record in the background.
FOLLOW_INTERVAL = 1.0
# engine -> the process whose thread follows its copy (a fork leaves the
# thread behind: the child starts its own)
_followers: weakref.WeakKeyDictionary[sa.engine.Engine, int] = weakref.WeakKeyDictionary()


def _cache_of(engine: sa.engine.Engine) -> Follower:
    cache = _caches.get(engine)
    if cache is None:
        with _caches_lock:
            cache = _caches.setdefault(engine, Follower())
    return cache


def current(connection: sa.engine.Connection, total: int | None = None) -> ProviderCopy:
    """The providers of ``connection``'s database, from this process's copy
    (``total`` as for ``Follower.current``)."""
    return _cache_of(connection.engine).current(connection, total)


def follow(engine: sa.engine.Engine, interval: float = FOLLOW_INTERVAL) -> None:
    """Keep this process's copy of ``engine``'s database following the
    change record in the background, every ``interval`` seconds, once per
    process. Requests still bring the copy up to date themselves, but
    find it current or nearly so: without this, a worker idle while
    thousands of providers changed (or forked from a process that read the
    copy long ago) makes its next candidates request read them all, as
    much as a second of it at 20 000 computes."""
    with _caches_lock:
        if _followers.get(engine) == os.getpid():
            return
        _followers[engine] = os.getpid()
    threading.Thread(target=_follow, args=(weakref.ref(engine), interval),
                     name="placement-provider-copy", daemon=True).start()


def _follow(engine_ref: weakref.ref[sa.engine.Engine], interval: float) -> None:
    failing = False
    while True:
        time.sleep(interval)
        engine = engine_ref()
        if engine is None or _followers.get(engine) != os.getpid():
            return  # the engine is gone, or this thread was left behind by a fork
        try:
            with engine.connect() as connection:
                cache = _cache_of(engine)
                cache.current(connection)
                cache.usages.current(connection)
            failing = False
        except Exception as error:  # the database away: requests will say so
            if not failing:
                LOG.warning("The provider copy could not follow the database: %s", error)
            failing = True
        del engine


def keep_within(engine: sa.engine.Engine, capacity: int) -> None:
    """Bound what requests keep for ``engine``'s database to ``capacity``
    bytes in this process."""
    _cache_of(engine).keep_within(capacity)

