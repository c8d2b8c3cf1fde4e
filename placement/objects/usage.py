"""Usages: sums of allocations, per provider or per project (and user),
for the usage routes."""

from __future__ import annotations

import sqlalchemy as sa

from placement.db import tables
from placement.objects import resource_class
from placement.objects import resource_provider as rp_obj

# consumer_type keywords of GET /usages: every consumer in one group, and
# the group of consumers without a type.
ALL = "all"
UNKNOWN = "unknown"
CONSUMER_COUNT = "consumer_count"

_alloc = tables.allocations
_rp = tables.resource_providers
_inv = tables.inventories
_consumers = tables.consumers
_projects = tables.projects
_users = tables.users
_types = tables.consumer_types


# The provider's generation, and per inventory, in class id order, its
# class and the amount allocated of it (a provider without inventory: one
# row without class). One statement, built once: the resource trackers
# read the usages of their providers often.
_PROVIDER_USAGES = (
    sa.select(_rp.c.generation, _inv.c.resource_class_id, _inv.c.used)
    .select_from(_rp)
    .outerjoin(_inv, _inv.c.resource_provider_id == _rp.c.id)
    .where(_rp.c.uuid == sa.bindparam("uuid"))
    .order_by(_inv.c.resource_class_id))


def get_provider_usages(connection: sa.engine.Connection, uuid: str
                        ) -> tuple[int, dict[str, int]]:
    """The generation of provider ``uuid`` and {class name: amount
    allocated} for every class it has inventory of (0 when nothing is
    allocated), in class id order. NotFound when there is no such provider."""
    rows = connection.execute(_PROVIDER_USAGES, {"uuid": uuid}).all()
    if not rows:
        raise rp_obj.missing(uuid)
    inventories = [row for row in rows if row.resource_class_id is not None]
    names = resource_class.names_from_ids(
        connection, [row.resource_class_id for row in inventories])
    return rows[0].generation, {names[row.resource_class_id]: int(row.used)
                                for row in inventories}


def _project_allocations(project_id: str, user_id: str | None) -> tuple[sa.FromClause, list]:
    """The join of allocations to their consumers' project, user and type,
    and the WHERE clauses selecting one project (and user)."""
    joined = (
        _alloc.join(_consumers, _consumers.c.uuid == _alloc.c.consumer_id)
        .join(_projects, _projects.c.id == _consumers.c.project_id)
        .outerjoin(_types, _types.c.id == _consumers.c.consumer_type_id)
    )
    where = [_projects.c.external_id == project_id]
    if user_id is not None:
        joined = joined.join(_users, _users.c.id == _consumers.c.user_id)
        where.append(_users.c.external_id == user_id)
    return joined, where


def _sums_by_class(connection: sa.engine.Connection, joined: sa.FromClause, where: list,
                   group: sa.ColumnElement | None) -> dict[str | None, dict[str, int]]:
    """{group value: {class name: amount}}; a single ``None`` group when
    ``group`` is None."""
    group_column = group if group is not None else sa.null()
    rows = connection.execute(
        sa.select(group_column.label("grp"), _alloc.c.resource_class_id,
                  sa.func.sum(_alloc.c.used).label("used"))
        .select_from(joined).where(*where)
        .group_by(*([group] if group is not None else []), _alloc.c.resource_class_id)
        .order_by(_alloc.c.resource_class_id)).all()
    names = resource_class.names_from_ids(connection, (row.resource_class_id for row in rows))
    sums: dict[str | None, dict[str, int]] = {}
    for row in rows:
        sums.setdefault(row.grp, {})[names[row.resource_class_id]] = int(row.used)
    return sums


def get_project_usages(connection: sa.engine.Connection, project_id: str,
                       user_id: str | None = None) -> dict[str, int]:
    """{class name: amount} allocated to consumers of the project (and
    user); only classes with allocations appear."""
    joined, where = _project_allocations(project_id, user_id)
    return _sums_by_class(connection, joined, where, None).get(None, {})


def get_project_usages_by_consumer_type(
        connection: sa.engine.Connection, project_id: str, user_id: str | None = None,
        consumer_type: str | None = None) -> dict[str, dict[str, int]]:
    """{consumer type: {"consumer_count": distinct consumers, class name:
    amount}} for consumers of the project (and user).

    ``consumer_type`` None groups by type, consumers without one under
    "unknown"; ALL gives one "all" group of every consumer; UNKNOWN only the
    group of consumers without a type; any other value only that type."""
    joined, where = _project_allocations(project_id, user_id)
    type_name = sa.func.coalesce(_types.c.name, UNKNOWN)
    group: sa.ColumnElement | None = type_name
    if consumer_type == ALL:
        group = None
    elif consumer_type == UNKNOWN:
        where.append(_consumers.c.consumer_type_id.is_(None))
    elif consumer_type is not None:
        where.append(_types.c.name == consumer_type)
    sums = _sums_by_class(connection, joined, where, group)
    group_column = group if group is not None else sa.null()
    counts = connection.execute(
        sa.select(group_column.label("grp"),
                  sa.func.count(sa.distinct(_alloc.c.consumer_id)).label("consumers"))
        .select_from(joined).where(*where)
        .group_by(*([group] if group is not None else []))).all()
    usages = {}
    for row in counts:
        if row.consumers:
            key = ALL if group is None else row.grp
            usages[key] = {CONSUMER_COUNT: row.consumers, **sums.get(row.grp, {})}
    return usages
