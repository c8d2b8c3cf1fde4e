"""Usages: sums of allocations, per provider or per project (and user),
for the usage routes."""

from __future__ import annotations

import functools

import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import tables
from placement.objects import resource_class
from placement.objects import resource_provider as rp_obj

# consumer_type keywords of GET /usages: every consumer in one group, and
# the group of consumers without a type.
ALL = "all"
UNKNOWN = "unknown"
CONSUMER_COUNT = "consumer_count"

_rp = tables.resource_providers
_inv = tables.inventories
_sums = tables.project_usages
_counts = tables.project_consumers
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


# GET /usages reads: one statement per shape of the query, built once
# (building a statement costs as much as running it: Nova asks before every
# boot). ``by_user``: the user is named; ``types``: how consumer types
# group and filter (None: no types at all, before 1.38).
_BY_TYPE, _ALL_TYPES, _UNKNOWN_TYPE, _ONE_TYPE = "by type", "all", "unknown", "one"


@functools.cache
def _project_usages_statement(by_user: bool, types: str | None) -> sa.Executable:
    """Per group of consumers (their type's name; NULL when not grouped)
    the sum of each class, and (from 1.38) in rows without a class the
    number of consumers of the group with allocations: read off the sums
    the database keeps per project, user and consumer type (0: none), a
    few rows of the project's, instead of every consumer of the project
    joined to its allocations."""
    def of_project(table: sa.Table) -> tuple[sa.FromClause, list]:
        joined = table.join(_projects, _projects.c.id == table.c.project_id)
        where = [_projects.c.external_id == sa.bindparam("project_id")]
        if by_user:
            joined = joined.join(_users, _users.c.id == table.c.user_id)
            where.append(_users.c.external_id == sa.bindparam("user_id"))
        if types == _UNKNOWN_TYPE:
            where.append(table.c.consumer_type_id == 0)
        elif types == _ONE_TYPE:
            where.append(table.c.consumer_type_id == (
                sa.select(_types.c.id).where(_types.c.name == sa.bindparam("consumer_type"))
                .scalar_subquery()))
        return joined, where

    sums_from, sums_where = of_project(_sums)
    # rows whose allocations are gone stay, at 0: only classes with
    # allocations appear
    sums_where.append(_sums.c.allocations > 0)
    if types is None:
        return (sa.select(sa.null().label("grp"), _sums.c.resource_class_id,
                          sa.func.sum(_sums.c.used).label("used"))
                .select_from(sums_from).where(*sums_where)
                .group_by(_sums.c.resource_class_id))
    counts_from, counts_where = of_project(_counts)
    counts_where.append(_counts.c.consumers > 0)
    grouped = types != _ALL_TYPES
    sum_type = _sums.c.consumer_type_id if grouped else sa.cast(sa.null(), sa.Integer)
    count_type = _counts.c.consumer_type_id if grouped else sa.cast(sa.null(), sa.Integer)
    sums = (sa.select(sum_type.label("type_id"), _sums.c.resource_class_id,
                      sa.func.sum(_sums.c.used).label("used"))
            .select_from(sums_from).where(*sums_where)
            .group_by(*([sum_type] if grouped else []), _sums.c.resource_class_id))
    # (ungrouped, over no row: one row of 0)
    counts = (sa.select(count_type.label("type_id"), sa.null(),
                        sa.func.coalesce(sa.func.sum(_counts.c.consumers), 0))
              .select_from(counts_from).where(*counts_where)
              .group_by(*([count_type] if grouped else [])))
    groups = sa.union_all(sums, counts).subquery("groups")
    if not grouped:
        return sa.select(sa.literal(ALL).label("grp"), groups.c.resource_class_id,
                         groups.c.used)
    # type 0 (none) joins no type: "unknown"
    return (sa.select(sa.func.coalesce(_types.c.name, UNKNOWN).label("grp"),
                      groups.c.resource_class_id, groups.c.used)
            .select_from(groups.outerjoin(_types, _types.c.id == groups.c.type_id)))


def _project_usages(connection: sa.engine.Connection, project_id: str, user_id: str | None,
                    types: str | None, consumer_type: str | None = None
                    ) -> dict[str | None, dict[str, int]]:
    """{group: {class name: amount, and from 1.38 CONSUMER_COUNT}}, the
    groups as ``_project_usages_statement`` makes them."""
    rows = db_api.driver_rows(connection, _project_usages_statement(user_id is not None, types), {
        "project_id": project_id, "user_id": user_id, "consumer_type": consumer_type})
    names = resource_class.names_from_ids(
        connection, (class_id for _, class_id, _ in rows if class_id is not None))
    usages: dict[str | None, dict[str, int]] = {}
    # counts first: a group's count opens its entry (the key order of the
    # answer), then its classes in class id order
    for group, class_id, amount in sorted(rows, key=lambda row: (
            row[1] is not None, row[1] or 0)):
        key = CONSUMER_COUNT if class_id is None else names[class_id]
        usages.setdefault(group, {})[key] = int(amount)
    return usages


def get_project_usages(connection: sa.engine.Connection, project_id: str,
                       user_id: str | None = None) -> dict[str, int]:
    """{class name: amount} allocated to consumers of the project (and
    user); only classes with allocations appear."""
    return _project_usages(connection, project_id, user_id, None).get(None, {})


def get_project_usages_by_consumer_type(
        connection: sa.engine.Connection, project_id: str, user_id: str | None = None,
        consumer_type: str | None = None) -> dict[str, dict[str, int]]:
    """{consumer type: {"consumer_count": distinct consumers, class name:
    amount}} for consumers of the project (and user).

    ``consumer_type`` None groups by type, consumers without one under
    "unknown"; ALL gives one "all" group of every consumer; UNKNOWN only the
    group of consumers without a type; any other value only that type."""
    types = {None: _BY_TYPE, ALL: _ALL_TYPES, UNKNOWN: _UNKNOWN_TYPE}.get(consumer_type,
                                                                         _ONE_TYPE)
    usages = _project_usages(connection, project_id, user_id, types, consumer_type)
    return {group: usage for group, usage in usages.items() if usage.get(CONSUMER_COUNT)}
