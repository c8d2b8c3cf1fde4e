"""Many providers' inventories and usages in one read
(``GET /capacity/providers``, for monitoring): what
``GET /resource_providers/{uuid}/inventories`` and ``/usages`` say of each,
from the same rows, in one or a few statements instead of two requests per
provider.

A provider's usage of a class is the ``used`` column of its inventory (kept
by the database's triggers, ``placement.db.triggers``), so one statement
gives both, consistent with each other row by row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import tables
from placement.objects import resource_class

_inv = tables.inventories

# Ids per IN (...) list: well below every backend's limit on bound parameters.
_CHUNK = 500

# Beyond this many providers asked for, every row is read and the others
# dropped: a few long IN lists cost more than the rows they save.
READ_ALL_BEYOND = 5000


def _statement(provider_ids: int = 0) -> sa.Select:
    """The inventory rows, with their usage, of ``provider_ids`` providers
    (0: of all), by provider and class id (the order the per-provider
    routes list classes in)."""
    statement = sa.select(
        _inv.c.resource_provider_id, _inv.c.resource_class_id, _inv.c.total, _inv.c.reserved,
        _inv.c.min_unit, _inv.c.max_unit, _inv.c.step_size, _inv.c.allocation_ratio,
        _inv.c.used)
    if provider_ids:
        statement = statement.where(
            db_api.bound_in(_inv.c.resource_provider_id, "provider_ids", provider_ids))
    return statement.order_by(_inv.c.resource_provider_id, _inv.c.resource_class_id)


_ROWS = db_api.SizedStatement(_statement)

# provider id -> ({class name: inventory fields as the API shows them},
# {class name: amount allocated})
Report = dict[int, tuple[dict[str, dict], dict[str, int]]]


def _rows(connection: sa.engine.Connection, provider_ids: Sequence[int] | None) -> list[tuple]:
    if provider_ids is None or len(provider_ids) > READ_ALL_BEYOND:
        return _ROWS.driver_rows(connection)
    rows: list[tuple] = []
    ids = sorted(provider_ids)
    for start in range(0, len(ids), _CHUNK):
        rows += _ROWS.driver_rows(connection, provider_ids=ids[start:start + _CHUNK])
    return rows


def inventories_and_usages(connection: sa.engine.Connection,
                           provider_ids: Sequence[int] | None) -> Report:
    """The inventories and usages of the providers ``provider_ids`` (None:
    of every provider) that have inventories; a provider without any is
    absent. Another provider's rows read along are dropped."""
    wanted = None if provider_ids is None else set(provider_ids)
    rows = _rows(connection, provider_ids)
    names = resource_class.names_from_ids(connection, {row[1] for row in rows})
    report: Report = {}
    # One loop over tens of thousands of rows: no function call per row.
    for (provider_id, class_id, total, reserved, min_unit, max_unit, step_size, ratio,
         used) in rows:
        if wanted is not None and provider_id not in wanted:
            continue
        entry = report.get(provider_id)
        if entry is None:
            entry = report[provider_id] = ({}, {})
        name = names[class_id]
        entry[0][name] = {"total": total, "reserved": reserved, "min_unit": min_unit,
                          "max_unit": max_unit, "step_size": step_size,
                          "allocation_ratio": float(ratio)}
        entry[1][name] = int(used)
    return report
