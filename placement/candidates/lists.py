"""Provider lists that ask for capacity (``GET /resource_providers`` with
``resources``), kept whole for the next request asking the same.

Such a list tests the remaining capacity of every provider with the
requested classes (milliseconds per thousand providers), and the tools
asking for it ask again and again. Besides the request, its answer is
made of:

* what providers are: which exist, their names and trees, inventories,
  traits and aggregates. The database's triggers count every change of
  these, whoever makes it (``placement.db.provider_changes``): equal
  counters, equal facts;
* the usages of the requested classes, which claims and deletes move
  without counting;
* the generations and update times of the listed providers, which claims
  move too (those of every provider are read).

An answer is kept with the three as its transaction read them. A request
asking the same reads them in its own transaction and, when all are
equal, is given the kept answer: the one its own transaction would have
made. Reading them costs a fraction of making the list.

Lists without ``resources`` are made every time: most are of one tree or
one name (the report clients' lookups), an index lookup that costs less
than the reads above, and thousands of them would crowd the kept
candidates answers out of the store they share.
"""

from __future__ import annotations

import sqlalchemy as sa

from placement import metrics
from placement.candidates.follower import current, usages
from placement.candidates.kept import kept_bytes
from placement.candidates.memo import Key, Memo
from placement.db import api as db_api
from placement.db import provider_changes, tables
from placement.objects import resource_provider as rp_obj

__all__ = ["ProviderList", "list_providers"]

_rp = tables.resource_providers

# What a kept list costs, in bytes, besides the entry and its usages
# (kept_bytes), as measured (tests/functional/test_kept_memory.py): per
# provider of the database, its row of versions; per listed provider, its
# record and its share of the list's JSON (``rendered``, about 1 kB at the
# latest version).
_VERSION_BYTES = 150
_LISTED_BYTES = 1800


class ProviderList:
    """The providers a list request matched, in creation order, and what
    the API makes of them (``rendered``, by format): a kept list serves
    several requests, the JSON is made once per format."""

    __slots__ = ("providers", "rendered")

    def __init__(self, providers: list[rp_obj.ResourceProvider]) -> None:
        self.providers = providers
        self.rendered = Memo(8)


class _List(Key["_KeptList"]):
    """The answer to the list requests of one kind."""
    # filters (rp_obj.ProviderFilters, with class and trait ids)
    __slots__ = ()


class _KeptList:
    """A list and what it was made from besides the request (see the
    module's docstring)."""

    __slots__ = ("changes", "used", "versions", "listed")

    def __init__(self, changes: int, used: dict[tuple[int, int], int], versions: list[tuple],
                 listed: ProviderList) -> None:
        self.changes = changes
        self.used = used
        self.versions = versions
        self.listed = listed


# Every provider's: reading them all costs less than naming the listed ones
# (a thousand bound parameters cost SQLAlchemy more than the rows), and
# what moves them, a claim, moves the usages read beside them anyway.
_VERSIONS = sa.select(_rp.c.id, _rp.c.generation, _rp.c.updated_at).order_by(_rp.c.id)


def list_providers(connection: sa.engine.Connection,
                   filters: rp_obj.ProviderFilters) -> ProviderList:
    """The providers matching ``filters`` (``resource_provider.list_providers``),
    kept for the next request asking the same when ``filters`` ask for
    capacity."""
    if not filters.resources:
        return ProviderList(rp_obj.list_providers(connection, filters))
    changes = provider_changes.total(connection)
    store = current(connection, changes).kept
    key = _List(filters)
    kept = store.get(key)
    used = usages(connection, None, sorted(class_id for class_id, _ in filters.resources))
    # as the driver gives them: compared only
    versions = db_api.plain_rows(connection, _VERSIONS)
    if (kept is not None and kept.changes == changes and kept.used == used
            and kept.versions == versions):
        metrics.count_kept_answer("resource_providers", "given")
        return kept.listed
    metrics.count_kept_answer("resource_providers", "none" if kept is None else "stale")
    listed = ProviderList(rp_obj.list_providers(connection, filters))
    store.put(key, _KeptList(changes, used, versions, listed),
              kept_bytes(len(used)) + _VERSION_BYTES * len(versions)
              + _LISTED_BYTES * len(listed.providers))
    return listed
