"""Every provider's usage in memory, following the usage change record.

A candidates request used to read the usages of the trees it searched
from the database: a thousand providers named in an IN list, every
request. The database's triggers name each provider whose usage moved in
the usage change record (``placement.db.provider_changes.USAGES``),
whoever writes; a process's ``UsageMirror`` reads, at each request, only
the usages of the providers named since its last one (and all of them at
its first, or when it fell too far behind), and hands the request a
``Usages`` snapshot: never older than the request's transaction, and the
same for the whole request while other threads move the mirror on.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import defaultdict
from collections.abc import Collection, Iterable

import sqlalchemy as sa

from placement import metrics
from placement.db import api as db_api
from placement.db import provider_changes, tables

_inv = tables.inventories

def _usage_statement(provider_ids: int = 0) -> sa.Select:
    """The usages of the inventories in use, of a list of ``provider_ids``
    of this size (0: of every provider)."""
    conditions = [_inv.c.used != 0]
    if provider_ids:
        conditions.append(db_api.bound_in(_inv.c.resource_provider_id, "provider_ids",
                                          provider_ids))
    return sa.select(_inv.c.resource_provider_id, _inv.c.resource_class_id,
                     _inv.c.used).where(*conditions)


_USAGES = db_api.SizedStatement(_usage_statement)

# A provider's usage: (class id, amount used) of each of its inventories in use.
ProviderUsage = tuple[tuple[int, int], ...]


def _read(connection: sa.engine.Connection, provider_ids: Collection[int] | None
          ) -> dict[int, ProviderUsage]:
    """The usages of these providers (None: of every provider), by provider;
    those with none in use are absent."""
    rows: list[tuple[int, int, int]] = []
    if provider_ids is None:
        rows = _USAGES.driver_rows(connection)
    else:
        for chunk in db_api.chunks(provider_ids):
            rows += _USAGES.driver_rows(connection, provider_ids=chunk)
    grouped: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for provider_id, class_id, amount in rows:
        grouped[provider_id].append((class_id, amount))
    return {provider_id: tuple(sorted(used)) for provider_id, used in grouped.items()}


class Usages:
    """The usages of every provider at some moment. Kept in shards (by
    provider id): a change replaces the shards of the providers it names,
    and every other shard is shared with the snapshot before."""

    __slots__ = ("_shards",)

    def __init__(self, shards: tuple[dict[int, ProviderUsage], ...]):
        self._shards = shards

    @classmethod
    def of_providers(cls, usages: dict[int, ProviderUsage]) -> Usages:
        shards: tuple[dict[int, ProviderUsage], ...] = tuple(
            {} for _ in range(provider_changes.SHARDS))
        for provider_id, used in usages.items():
            shards[provider_id % provider_changes.SHARDS][provider_id] = used
        return cls(shards)

    def updated(self, providers: Collection[int], usages: dict[int, ProviderUsage]) -> Usages:
        """These usages with those of ``providers`` replaced by ``usages``
        (a provider absent from it has nothing in use)."""
        shards = list(self._shards)
        copied: set[int] = set()
        for provider_id in providers:
            index = provider_id % provider_changes.SHARDS
            if index not in copied:
                shards[index] = dict(shards[index])
                copied.add(index)
            used = usages.get(provider_id)
            if used:
                shards[index][provider_id] = used
            else:
                shards[index].pop(provider_id, None)
        return Usages(tuple(shards))

    def of_provider(self, provider_id: int) -> ProviderUsage:
        """The usage of one provider (() when nothing is in use)."""
        shards = self._shards
        return shards[provider_id % len(shards)].get(provider_id, ())

    def changed_since(self, older: Usages) -> set[int]:
        """The providers whose usage differs in ``older``: only the shards
        that are not the same object are compared (a change replaces the
        shards of the providers it names, see ``updated``)."""
        changed: set[int] = set()
        for mine, theirs in zip(self._shards, older._shards, strict=True):
            if mine is not theirs:
                changed.update(provider_id for provider_id, _ in mine.items() ^ theirs.items())
        return changed

    def of(self, provider_ids: Iterable[int] | None, class_ids: Collection[int] | None
           ) -> dict[tuple[int, int], int]:
        """(provider id, class id) -> amount used, of these providers (None:
        of every provider) and classes (None: of every class), where any is."""
        wanted = None if class_ids is None else frozenset(class_ids)
        shards = self._shards
        if provider_ids is None:
            found: Iterable[tuple[int, ProviderUsage]] = (
                item for shard in shards for item in shard.items())
        else:
            count = len(shards)
            found = ((provider_id, shards[provider_id % count].get(provider_id))
                     for provider_id in provider_ids)
        return {(provider_id, class_id): amount
                for provider_id, used in found if used
                for class_id, amount in used if wanted is None or class_id in wanted}


EMPTY = Usages.of_providers({})


@dataclasses.dataclass(frozen=True)
class _State:
    usages: Usages
    versions: dict[int, int]  # shard -> version the usages are as new as
    total: int  # their sum; -1 before the first read


class UsageMirror:
    """The newest usages of one database, brought up to date by ``current``."""

    def __init__(self) -> None:
        self._state = _State(EMPTY, {}, -1)
        # one refresh at a time: concurrent requests would read the same rows
        self._lock = threading.Lock()

    def current(self, connection: sa.engine.Connection, total: int | None = None) -> Usages:
        """The usages as ``connection``'s transaction sees them, or newer;
        ``total``: the usage record's total as the caller already read it
        in that transaction."""
        if total is None:
            total = provider_changes.total(connection, provider_changes.USAGES)
        state = self._state
        if total <= state.total:
            return state.usages
        with self._lock:
            state = self._state
            if total <= state.total:
                return state.usages
            versions = provider_changes.versions(connection, provider_changes.USAGES)
            changed = (None if state.total < 0 else provider_changes.changed_since(
                connection, state.versions, versions, provider_changes.USAGES))
            if changed is None:  # the first read, or too far behind
                read = _read(connection, None)
                usages = Usages.of_providers(read)
                metrics.count_usage_mirror_refresh("full", len(read))
            else:
                usages = state.usages.updated(changed, _read(connection, changed))
                metrics.count_usage_mirror_refresh("incremental", len(changed))
            self._state = _State(usages, versions, sum(versions.values()))
            return usages
