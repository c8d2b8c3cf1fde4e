"""A per-process copy of what providers are: trees, inventories, traits.

The allocation-candidate search reads these for thousands of providers on
every request, but they change rarely, and every change of them moves the
provider generation (inventories, traits, reshapes, allocations), the parent
or root (re-parenting), or the uuid (a provider deleted and another created
with its id). So each request reads only ``(id, uuid, generation, parent,
root)`` of every provider, one cheap query, and reloads the providers whose
row differs from the copy. Data read after that row is at least as new as
the row, so a copy is never older than the generation it is filed under: a
later change always shows as a new generation and is reloaded.

What is not kept here, because it changes without a generation: usages
(deleting allocations leaves generations alone) and aggregates (set below
microversion 1.19 without a generation). Callers read those per request.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import sqlalchemy as sa

from placement.db import tables
from placement.objects.inventory import InventoryUsage

_rp = tables.resource_providers
_inv = tables.inventories
_trait = tables.traits
_rp_trait = tables.resource_provider_traits

# Ids per IN (...) list: well below every backend's limit on bound parameters.
CHUNK = 500


def chunks(ids: Iterable, size: int = CHUNK) -> Iterator[list]:
    ids = sorted(ids)
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def among(column: sa.ColumnElement, ids: list[int]) -> sa.ColumnElement:
    """``column IN (ids)`` with one expanding parameter: in_() of a list
    coerces every element, which costs milliseconds for long lists."""
    return column.in_(sa.bindparam(None, ids, type_=column.type, expanding=True))


def plain_rows(connection: sa.engine.Connection, statement: sa.Select) -> list[tuple]:
    """The rows of ``statement`` as the driver's own tuples, for columns
    that need no conversion (integers, strings): SQLAlchemy rows cost
    several times more to make and to compare."""
    result = connection.execute(statement)
    try:
        return result.cursor.fetchall()
    finally:
        result.close()


class ProviderRow(NamedTuple):
    """What every request reads of every provider to validate the copy (a
    tuple: compared with the database rows as they come, thousands of
    times per request)."""

    id: int
    uuid: str
    generation: int
    parent_id: int | None
    root_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class CachedProvider:
    row: ProviderRow
    # resource class id -> the inventory, with ``used`` 0 (usages are per request)
    inventories: dict[int, InventoryUsage]
    # trait names in trait id order (the order provider summaries list them)
    trait_names: tuple[str, ...]
    traits: frozenset[str]
    # what readers derive from this provider alone, by a key of theirs: it
    # lives as long as this record (until the provider changes)
    derived: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def id(self) -> int:
        return self.row.id


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Every provider at one moment, with the indexes the search needs.
    Never modified once built: requests running on other threads may be
    reading it."""

    providers: dict[int, CachedProvider]
    # root id -> the providers of its tree, in id order
    trees: dict[int, list[int]]
    # resource class id -> roots of the trees with an inventory of it
    holder_roots: dict[int, set[int]]
    # uuid -> provider id
    ids_by_uuid: dict[str, int]
    has_nesting: bool

    @classmethod
    def build(cls, providers: dict[int, CachedProvider]) -> Snapshot:
        trees: dict[int, list[int]] = defaultdict(list)
        holder_roots: dict[int, set[int]] = defaultdict(set)
        for provider_id in sorted(providers):
            provider = providers[provider_id]
            trees[provider.row.root_id].append(provider_id)
            for class_id in provider.inventories:
                holder_roots[class_id].add(provider.row.root_id)
        return cls(providers, dict(trees), dict(holder_roots),
                   {provider.row.uuid: provider.id for provider in providers.values()},
                   any(provider.row.parent_id is not None for provider in providers.values()))

    def updated(self, changed: dict[int, CachedProvider]) -> Snapshot:
        """This snapshot with ``changed`` providers (all of them in it)
        replaced. When they keep their place and classes (an allocation, an
        inventory total: the usual changes), the indexes stay as they are
        instead of being rebuilt over every provider."""
        providers = {**self.providers, **changed}
        if all(_same_place(self.providers[provider_id], provider)
               for provider_id, provider in changed.items()):
            return dataclasses.replace(self, providers=providers)
        return Snapshot.build(providers)


def _same_place(old: CachedProvider, new: CachedProvider) -> bool:
    """Does ``new`` sit in the indexes exactly where ``old`` does?"""
    return (old.row.uuid == new.row.uuid and old.row.parent_id == new.row.parent_id
            and old.row.root_id == new.row.root_id
            and old.inventories.keys() == new.inventories.keys())


EMPTY = Snapshot.build({})


_SCAN = sa.select(_rp.c.id, _rp.c.uuid, _rp.c.generation, _rp.c.parent_provider_id,
                  _rp.c.root_provider_id)


class ProviderCache:
    """The newest snapshot of one database, refreshed by ``current``."""

    def __init__(self) -> None:
        self._snapshot = EMPTY
        # one refresh at a time: concurrent requests would load the same rows
        self._lock = threading.Lock()

    def current(self, connection: sa.engine.Connection) -> Snapshot:
        """The providers as ``connection``'s transaction sees them (data
        possibly newer, never older)."""
        # compared by the thousand: the driver's own tuples (see plain_rows)
        rows = plain_rows(connection, _SCAN)
        with self._lock:
            snapshot = self._snapshot
            kept = snapshot.providers
            stale = [ProviderRow(*row) for row in rows
                     if row[0] not in kept or kept[row[0]].row != row]
            if not stale and len(rows) == len(kept):
                return snapshot
            loaded = _load(connection, stale, every=len(stale) == len(rows))
            if len(rows) == len(kept) and all(row.id in kept for row in stale):
                # the same providers as the snapshot's (none went, none came)
                self._snapshot = snapshot.updated(loaded)
            else:
                providers = {row[0]: kept[row[0]] for row in rows
                             if row[0] in kept and kept[row[0]].row == row}
                self._snapshot = Snapshot.build({**providers, **loaded})
            return self._snapshot


def _load(connection: sa.engine.Connection, rows: list[ProviderRow], every: bool
          ) -> dict[int, CachedProvider]:
    """Inventories and traits of the providers of ``rows`` (``every``: all
    providers, read without naming them)."""
    inventories: dict[int, dict[int, InventoryUsage]] = defaultdict(dict)
    traits: dict[int, list[str]] = defaultdict(list)
    conditions = [sa.true()] if every else [
        among(_rp.c.id, chunk) for chunk in chunks(row.id for row in rows)]
    for condition in conditions:
        for (provider_id, class_id, total, reserved, min_unit, max_unit, step_size,
             allocation_ratio) in connection.execute(
                sa.select(_inv.c.resource_provider_id, _inv.c.resource_class_id,
                          _inv.c.total, _inv.c.reserved, _inv.c.min_unit, _inv.c.max_unit,
                          _inv.c.step_size, _inv.c.allocation_ratio)
                .join(_rp, _rp.c.id == _inv.c.resource_provider_id).where(condition)):
            inventories[provider_id][class_id] = InventoryUsage(
                total, reserved, min_unit, max_unit, step_size, allocation_ratio, 0)
        for provider_id, name in connection.execute(
                sa.select(_rp_trait.c.resource_provider_id, _trait.c.name)
                .join(_trait, _trait.c.id == _rp_trait.c.trait_id)
                .join(_rp, _rp.c.id == _rp_trait.c.resource_provider_id)
                .where(condition).order_by(_trait.c.id)):
            traits[provider_id].append(name)
    return {row.id: CachedProvider(row, inventories.get(row.id, {}),
                                   tuple(traits.get(row.id, ())),
                                   frozenset(traits.get(row.id, ())))
            for row in rows}


_caches: weakref.WeakKeyDictionary[sa.engine.Engine, ProviderCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def snapshot(connection: sa.engine.Connection) -> Snapshot:
    """The providers of ``connection``'s database, from this process's copy."""
    engine = connection.engine
    cache = _caches.get(engine)
    if cache is None:
        with _caches_lock:
            cache = _caches.setdefault(engine, ProviderCache())
    return cache.current(connection)
