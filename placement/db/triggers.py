"""Database triggers that keep placement's derived state, whoever writes.

Three things in the database are derived from other rows, and the service
relies on them being right at every commit:

- ``inventories.used``: the sum of the inventory's allocations, which the
  capacity checks and usages read instead of summing allocations;
- the provider change record (``placement.db.provider_changes``): which
  providers changed what they *are* (the provider row, its inventories,
  traits and aggregates), which every process's provider copy follows;
  and the usage change record beside it: which providers' ``used`` moved,
  which every process's usage mirror follows;
- a project's usages (``project_usages``, ``consumer_allocations``,
  ``project_consumers``): per project, user, consumer type and class the
  sum of the consumers' allocations, and how many consumers have one,
  which ``GET /usages`` reads instead of joining every consumer of the
  project to its allocations.

And one invariant: no allocation row may take an inventory's usage past
its capacity, ``(total - reserved) * allocation_ratio``. The triggers that
add an allocation to its inventory's usage refuse the row (the statement
fails with ``CAPACITY_REFUSAL``) when it adds to a usage that is then over
capacity, unless the transaction named that usage in
``allocation_allowances``: a write that the service checked makes an
inventory already over capacity (a ratio lowered, ``reserved`` raised) no
worse, so that its consumers can shrink, move or leave. Rows that remove
usage, and inventory changes (the API has its own rules for those), are
never refused.

They are kept by the database itself, in the transaction of the change:
our writes, the original placement service writing the same database
during a rolling switch, an operator's SQL and ``placement-manage audit
--fix`` all keep them alike, and no writer has to remember anything. Renaming
a resource class moves the reload counter (every copy reloads: kept
summaries name classes).

The statements differ by dialect (SQLite, MySQL/MariaDB, PostgreSQL) but say
the same thing. ``install`` replaces any older version of them.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import sqlalchemy as sa

from placement.db.provider_changes import KEPT, RELOAD_SHARD, SHARDS

# Every trigger (and PostgreSQL function) this module makes starts so.
PREFIX = "placement_"

# The provider facts each table holds (by the name its triggers take, the
# column naming the provider, the columns of facts): a change of one of
# these columns is a change of the provider (generation and ``used`` are
# not: claims move them).
_WATCHED = {
    "resource_providers": ("provider", "id",
                           ("uuid", "name", "parent_provider_id", "root_provider_id")),
    "inventories": ("inventory", "resource_provider_id",
                    ("resource_provider_id", "resource_class_id", "total", "reserved",
                     "min_unit", "max_unit", "step_size", "allocation_ratio")),
    "resource_provider_traits": ("trait", "resource_provider_id",
                                 ("resource_provider_id", "trait_id")),
    "resource_provider_aggregates": ("aggregate", "resource_provider_id",
                                     ("resource_provider_id", "aggregate_id")),
}

# The message of the statement a trigger refuses for capacity: what the
# service recognises (``refused_over_capacity``).
CAPACITY_REFUSAL = "placement: allocation over capacity"

_SUM_OF_ALLOCATIONS = (
    "(SELECT COALESCE(SUM(a.used), 0) FROM allocations a "
    "WHERE a.resource_provider_id = NEW.resource_provider_id "
    "AND a.resource_class_id = NEW.resource_class_id)")


@dataclasses.dataclass(frozen=True)
class Trigger:
    """One trigger: ``body`` (SQL statements, each ending in ``;``, naming
    the row as NEW or OLD) runs for each row of ``table`` after ``event``;
    for an UPDATE, only when one of ``columns`` changed."""

    name: str
    event: str  # INSERT, UPDATE or DELETE
    table: str
    body: str
    columns: tuple[str, ...] = ()
    # where the backend can (MySQL, PostgreSQL), the body is instead this
    # value given to NEW.used before the INSERT
    new_used: str | None = None
    # an SQL condition on the row: the body runs only when it holds
    when: str | None = None
    # the tables of ours it reads or writes (its own among them): before
    # the migration making them, it is not installed
    needs: tuple[str, ...] = ()

    def conditions(self, changed: str, joined: str) -> list[str]:
        """The conditions of the body: one of ``columns`` changed (each
        compared by ``changed``, a format of the column, joined with
        ``joined``), and ``when``."""
        conditions = []
        if self.columns:
            conditions.append("(" + f" {joined} ".join(
                changed.format(column=column) for column in self.columns) + ")")
        if self.when:
            conditions.append(f"({self.when})")
        return conditions


def _add_usage(row: str, sign: str) -> str:
    return (f"UPDATE inventories SET used = used {sign} {row}.used "
            f"WHERE resource_provider_id = {row}.resource_provider_id "
            f"AND resource_class_id = {row}.resource_class_id;")


def _ratio(dialect: str) -> str:
    """``i.allocation_ratio`` as the clients of the database see it. MySQL
    keeps it as a single precision FLOAT, which its drivers read with 6
    significant digits (0.7, not 0.699999988): so do the triggers, or a
    usage the service accepts (as the original service does) would be
    refused here."""
    if dialect != "mysql":
        return "i.allocation_ratio"
    return ("(CASE WHEN i.allocation_ratio > 0 THEN ROUND(i.allocation_ratio, "
            "5 - FLOOR(LOG10(i.allocation_ratio))) ELSE i.allocation_ratio END)")


def _refuse_over_capacity(dialect: str, adds: str) -> str:
    """Refuse the allocation row NEW when it ``adds`` to its inventory's
    usage (an SQL condition) and that usage, already updated, is over
    capacity, unless this transaction allows it (``allocation_allowances``)."""
    refused = (
        f"({adds}) AND EXISTS (SELECT 1 FROM inventories i "
        "WHERE i.resource_provider_id = NEW.resource_provider_id "
        "AND i.resource_class_id = NEW.resource_class_id "
        f"AND i.used > (i.total - i.reserved) * {_ratio(dialect)} "
        "AND NOT EXISTS (SELECT 1 FROM allocation_allowances a "
        "WHERE a.resource_provider_id = i.resource_provider_id "
        "AND a.resource_class_id = i.resource_class_id AND i.used <= a.used))")
    if dialect == "sqlite":
        return f"SELECT RAISE(ABORT, '{CAPACITY_REFUSAL}') WHERE {refused};"
    if dialect == "mysql":
        return (f"IF {refused} THEN SIGNAL SQLSTATE '45000' "
                f"SET MESSAGE_TEXT = '{CAPACITY_REFUSAL}'; END IF;")
    return (f"IF {refused} THEN RAISE EXCEPTION '{CAPACITY_REFUSAL}' "
            "USING ERRCODE = 'check_violation'; END IF;")


def refused_over_capacity(error: BaseException) -> bool:
    """Is ``error`` (any database error) a trigger refusing an allocation
    row for capacity?"""
    return CAPACITY_REFUSAL in str(error)


def _record_change(provider: str, dialect: str, condition: str = "TRUE",
                   record: str = "provider") -> str:
    """Name ``provider`` (an expression) in its shard's ``record`` (the
    tables ``<record>_change_shards`` and ``<record>_changes``): the shard's
    counter moves on (its row stays locked until COMMIT, so versions commit
    in order), the change is kept under the new version, and the shard keeps
    only its last KEPT changes. Nothing when ``condition`` is false."""
    # SQLite has no MOD() everywhere; a driver may read % as a placeholder
    shard = f"({provider} % {SHARDS})" if dialect == "sqlite" else f"MOD({provider}, {SHARDS})"
    shards, changes = f"{record}_change_shards", f"{record}_changes"
    return (
        f"UPDATE {shards} SET version = version + 1 "
        f"WHERE shard = {shard} AND {condition}; "
        f"INSERT INTO {changes} (shard, version, resource_provider_id) "
        f"SELECT shard, version, {provider} FROM {shards} "
        f"WHERE shard = {shard} AND {condition}; "
        f"DELETE FROM {changes} WHERE shard = {shard} AND version <= "
        f"(SELECT version - {KEPT} FROM {shards} WHERE shard = {shard});")


def _usage_triggers(dialect: str) -> list[Trigger]:
    """The usage change record: an inventory whose ``used`` moves (the
    allocation triggers above, an operator's SQL), or that comes or goes
    while in use, names its provider."""
    new, old = "NEW.resource_provider_id", "OLD.resource_provider_id"
    return [
        Trigger("usage_inserted", "INSERT", "inventories",
                _record_change(new, dialect, record="usage"), when="NEW.used <> 0"),
        Trigger("usage_deleted", "DELETE", "inventories",
                _record_change(old, dialect, record="usage"), when="OLD.used <> 0"),
        Trigger("usage_updated", "UPDATE", "inventories",
                _record_change(new, dialect, record="usage") + " "
                + _record_change(old, dialect, condition=f"{old} <> {new}", record="usage"),
                ("used", "resource_provider_id", "resource_class_id")),
    ]


def _upsert(dialect: str, table: str, keys: tuple[str, ...], sums: tuple[str, ...],
            rows: str) -> str:
    """Insert ``rows`` (a SELECT with a WHERE, or VALUES: ``keys`` then
    ``sums``) into ``table``, or add their ``sums`` to the row of the same
    keys."""
    columns = ", ".join(keys + sums)
    if dialect == "mysql":
        added = ", ".join(f"{name} = {name} + VALUES({name})" for name in sums)
        return f"INSERT INTO {table} ({columns}) {rows} ON DUPLICATE KEY UPDATE {added};"
    added = ", ".join(f"{name} = {table}.{name} + excluded.{name}" for name in sums)
    return (f"INSERT INTO {table} ({columns}) {rows} "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {added};")


# A project's usages (tables.project_usages, consumer_allocations and
# project_consumers) are keyed by the group of the consumers: their
# project, user and type (0: none).
def _group_values(row: str) -> list[tuple[str, str]]:
    """The group's columns and their values for the consumers row ``row``
    (NEW, OLD or an alias)."""
    return [("project_id", f"{row}.project_id"), ("user_id", f"{row}.user_id"),
            ("consumer_type_id", f"COALESCE({row}.consumer_type_id, 0)")]


def _group_selected(row: str) -> str:
    """The group of the consumers row ``row``, as a SELECT list."""
    return ", ".join(value for _, value in _group_values(row))


_GROUP = tuple(column for column, _ in _group_values("c"))
_GROUP_OF_CONSUMER = _group_selected("c")


def _group_of(consumer: str) -> str:
    """The condition naming the rows of the group of the consumer whose
    uuid is ``consumer`` (an expression): three scalar subqueries of the
    consumers' uuid index, so that the rows are found by their primary
    key on every backend. No row when that consumer row is missing."""
    return " AND ".join(f"{column} = (SELECT {value} FROM consumers c WHERE c.uuid = {consumer})"
                        for column, value in _group_values("c"))


def _group_is(row: str) -> str:
    """The condition naming the rows of the group of the consumers row
    ``row`` (NEW or OLD)."""
    return " AND ".join(f"{column} = {value}" for column, value in _group_values(row))


def _allocation_added(dialect: str, row: str) -> str:
    """The allocation ``row`` added to its consumer's group (when the
    consumer row is there: else the consumer's own trigger adds it) and
    counted among its consumer's allocation rows."""
    return (_upsert(dialect, "project_usages", _GROUP + ("resource_class_id",),
                    ("used", "allocations"),
                    f"SELECT {_GROUP_OF_CONSUMER}, "
                    f"{row}.resource_class_id, {row}.used, 1 FROM consumers c "
                    f"WHERE c.uuid = {row}.consumer_id")
            + " " + _upsert(dialect, "consumer_allocations", ("consumer_id",), ("allocations",),
                            f"VALUES ({row}.consumer_id, 1)"))


def _allocation_removed(row: str) -> str:
    """The allocation ``row`` taken out of its consumer's group and count
    (a consumer without allocation rows has no count row)."""
    return (f"UPDATE project_usages SET used = used - {row}.used, "
            f"allocations = allocations - 1 WHERE {_group_of(f'{row}.consumer_id')} "
            f"AND resource_class_id = {row}.resource_class_id; "
            "UPDATE consumer_allocations SET allocations = allocations - 1 "
            f"WHERE consumer_id = {row}.consumer_id; "
            "DELETE FROM consumer_allocations "
            f"WHERE consumer_id = {row}.consumer_id AND allocations = 0;")


def _consumer_added(dialect: str, row: str) -> str:
    """The allocations the consumers row ``row`` already has, added to its
    group, and the consumer counted in it if it has any."""
    return (_upsert(dialect, "project_usages", _GROUP + ("resource_class_id",),
                    ("used", "allocations"),
                    f"SELECT {_group_selected(row)}, a.resource_class_id, SUM(a.used), "
                    f"COUNT(*) FROM allocations a WHERE a.consumer_id = {row}.uuid "
                    "GROUP BY a.resource_class_id")
            + " " + _upsert(dialect, "project_consumers", _GROUP, ("consumers",),
                            f"SELECT {_group_selected(row)}, 1 FROM consumer_allocations n "
                            f"WHERE n.consumer_id = {row}.uuid"))


def _consumer_removed(row: str) -> str:
    """The allocations the consumers row ``row`` still has, taken out of
    its group, and the consumer uncounted if it has any."""
    of_class = (f"FROM allocations a WHERE a.consumer_id = {row}.uuid "
                "AND a.resource_class_id = project_usages.resource_class_id")
    return (f"UPDATE project_usages SET used = used - (SELECT COALESCE(SUM(a.used), 0) "
            f"{of_class}), allocations = allocations - (SELECT COUNT(*) {of_class}) "
            f"WHERE {_group_is(row)}; "
            f"UPDATE project_consumers SET consumers = consumers - 1 WHERE {_group_is(row)} "
            "AND EXISTS (SELECT 1 FROM consumer_allocations n "
            f"WHERE n.consumer_id = {row}.uuid);")


_PROJECT_TABLES = ("project_usages", "consumer_allocations", "project_consumers")


def _project_usage_triggers(dialect: str) -> list[Trigger]:
    """A project's usages, whoever writes allocations or consumers, in
    whichever order. A consumer's count of allocation rows moves by one
    per row (exact however a backend orders the row triggers of one
    statement: PostgreSQL runs them after the statement), and its group's
    consumer count moves when that count comes or goes."""
    counted = _upsert(dialect, "project_consumers", _GROUP, ("consumers",),
                      f"SELECT {_GROUP_OF_CONSUMER}, 1 "
                      "FROM consumers c WHERE c.uuid = NEW.consumer_id")
    uncounted = ("UPDATE project_consumers SET consumers = consumers - 1 "
                 f"WHERE {_group_of('OLD.consumer_id')};")
    made = [
        Trigger("project_allocation_added", "INSERT", "allocations",
                _allocation_added(dialect, "NEW")),
        Trigger("project_allocation_removed", "DELETE", "allocations",
                _allocation_removed("OLD")),
        Trigger("project_allocation_changed", "UPDATE", "allocations",
                _allocation_removed("OLD") + " " + _allocation_added(dialect, "NEW"),
                ("consumer_id", "resource_class_id", "used")),
        # a consumer's count comes (its first allocation row) or goes (at 0,
        # before _allocation_removed deletes it; or deleted by an operator)
        Trigger("consumer_counted", "INSERT", "consumer_allocations", counted,
                when="NEW.allocations > 0"),
        Trigger("consumer_count_rose", "UPDATE", "consumer_allocations", counted,
                ("allocations",), when="OLD.allocations <= 0 AND NEW.allocations > 0"),
        Trigger("consumer_count_fell", "UPDATE", "consumer_allocations", uncounted,
                ("allocations",), when="OLD.allocations > 0 AND NEW.allocations <= 0"),
        Trigger("consumer_uncounted", "DELETE", "consumer_allocations", uncounted,
                when="OLD.allocations > 0"),
        Trigger("project_consumer_added", "INSERT", "consumers",
                _consumer_added(dialect, "NEW")),
        Trigger("project_consumer_removed", "DELETE", "consumers", _consumer_removed("OLD")),
        Trigger("project_consumer_changed", "UPDATE", "consumers",
                _consumer_removed("OLD") + " " + _consumer_added(dialect, "NEW"),
                ("uuid", "project_id", "user_id", "consumer_type_id")),
    ]
    return [dataclasses.replace(trigger, needs=_PROJECT_TABLES) for trigger in made]


# What the project usages must be: per group and class, the sum of the
# allocations and their number; per group, how many consumers have one.
_PROJECT_SUMS = (f"SELECT {_GROUP_OF_CONSUMER}, a.resource_class_id, SUM(a.used), COUNT(*) "
                 "FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id "
                 f"GROUP BY {_GROUP_OF_CONSUMER}, a.resource_class_id")
_PROJECT_COUNTS = (f"SELECT {_GROUP_OF_CONSUMER}, COUNT(*) FROM consumers c "
                   "WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = c.uuid) "
                   f"GROUP BY {_GROUP_OF_CONSUMER}")


class ProjectUsageDifference(NamedTuple):
    """A kept project usage that is not what the allocations make it."""

    # (project id, user id, consumer type id (0: none)) and, for a sum, the
    # resource class id: internal ids
    key: tuple[int, ...]
    # (used, allocations) of a sum, (consumers,) of a count; 0 where no
    # row is
    kept: tuple[int, ...]
    actual: tuple[int, ...]


def project_usage_differences(connection: sa.engine.Connection
                              ) -> list[ProjectUsageDifference]:
    """The project usages other than the allocations and consumers make
    them (groups without allocations aside): the sums, then the counts of
    consumers, each in key order."""
    differences = []
    for actual_query, kept_query, values in (
            (_PROJECT_SUMS, "SELECT project_id, user_id, consumer_type_id, resource_class_id, "
                            "used, allocations FROM project_usages", 2),
            (_PROJECT_COUNTS, "SELECT project_id, user_id, consumer_type_id, consumers "
                              "FROM project_consumers", 1)):
        actual = _keyed(connection, actual_query, values)
        kept = _keyed(connection, kept_query, values)
        none = (0,) * values
        differences += [ProjectUsageDifference(key, kept.get(key, none), actual.get(key, none))
                        for key in sorted(actual.keys() | kept.keys())
                        if kept.get(key, none) != actual.get(key, none)]
    return differences


def project_usages_wrong(connection: sa.engine.Connection) -> bool:
    """Are the project usages other than the allocations and consumers
    make them?"""
    return bool(project_usage_differences(connection))


def _keyed(connection: sa.engine.Connection, query: str, values: int) -> dict[tuple, tuple]:
    """The rows of ``query`` by their columns before the last ``values``,
    those whose values are all 0 left out."""
    return {tuple(row[:-values]): tuple(int(value) for value in row[-values:])
            for row in connection.exec_driver_sql(query) if any(row[-values:])}


def recompute_project_usages(connection: sa.engine.Connection) -> None:
    """Make the project usages again from the allocations and consumers,
    in the caller's transaction, the triggers installed (they count the
    consumers as their allocation counts are inserted)."""
    for table in ("project_consumers", "consumer_allocations", "project_usages"):
        connection.exec_driver_sql(f"DELETE FROM {table}")
    connection.exec_driver_sql(
        "INSERT INTO consumer_allocations (consumer_id, allocations) "
        "SELECT consumer_id, COUNT(*) FROM allocations GROUP BY consumer_id")
    connection.exec_driver_sql(
        "INSERT INTO project_usages (project_id, user_id, consumer_type_id, "
        f"resource_class_id, used, allocations) {_PROJECT_SUMS}")


def triggers(dialect: str) -> list[Trigger]:
    """Every trigger, its statements in ``dialect``'s SQL."""
    result = [
        Trigger("allocation_added", "INSERT", "allocations",
                _add_usage("NEW", "+") + " " + _refuse_over_capacity(dialect, "NEW.used > 0")),
        Trigger("allocation_removed", "DELETE", "allocations", _add_usage("OLD", "-")),
        Trigger("allocation_changed", "UPDATE", "allocations",
                _add_usage("OLD", "-") + " " + _add_usage("NEW", "+") + " "
                + _refuse_over_capacity(
                    dialect, "NEW.resource_provider_id <> OLD.resource_provider_id "
                    "OR NEW.resource_class_id <> OLD.resource_class_id "
                    "OR NEW.used > OLD.used"),
                ("resource_provider_id", "resource_class_id", "used")),
        # an inventory created where allocations already are (by a reshape,
        # or by a writer that is not us) starts with their sum
        Trigger("inventory_usage", "INSERT", "inventories",
                f"UPDATE inventories SET used = {_SUM_OF_ALLOCATIONS} WHERE id = NEW.id;",
                new_used=_SUM_OF_ALLOCATIONS),
        Trigger("class_renamed", "UPDATE", "resource_classes",
                f"UPDATE provider_change_shards SET version = version + 1 "
                f"WHERE shard = {RELOAD_SHARD};", ("name",)),
    ]
    result += _usage_triggers(dialect)
    result += _project_usage_triggers(dialect)
    for table, (name, provider_column, columns) in _WATCHED.items():
        new, old = f"NEW.{provider_column}", f"OLD.{provider_column}"
        result += [
            Trigger(f"{name}_inserted", "INSERT", table, _record_change(new, dialect)),
            Trigger(f"{name}_deleted", "DELETE", table, _record_change(old, dialect)),
            # a row moved to another provider (only SQL of an operator does
            # that) changes both
            Trigger(f"{name}_updated", "UPDATE", table,
                    _record_change(new, dialect) + " "
                    + _record_change(old, dialect, condition=f"{old} <> {new}"), columns),
        ]
    return result


def _sqlite(trigger: Trigger) -> list[str]:
    conditions = trigger.conditions("OLD.{column} IS NOT NEW.{column}", "OR")
    when = (" WHEN " + " AND ".join(conditions)) if conditions else ""
    return [f"CREATE TRIGGER {PREFIX}{trigger.name} AFTER {trigger.event} ON {trigger.table} "
            f"FOR EACH ROW{when} BEGIN {trigger.body} END"]


def _mysql(trigger: Trigger) -> list[str]:
    body = trigger.body
    if trigger.new_used:
        # MySQL cannot update the table whose trigger runs: set the new row
        return [f"CREATE TRIGGER {PREFIX}{trigger.name} BEFORE INSERT ON {trigger.table} "
                f"FOR EACH ROW SET NEW.used = {trigger.new_used}"]
    conditions = trigger.conditions("NOT (OLD.{column} <=> NEW.{column})", "OR")
    if conditions:  # MySQL triggers have no WHEN
        body = f"IF {' AND '.join(conditions)} THEN {body} END IF;"
    return [f"CREATE TRIGGER {PREFIX}{trigger.name} AFTER {trigger.event} ON {trigger.table} "
            f"FOR EACH ROW BEGIN {body} END"]


def _postgresql(trigger: Trigger) -> list[str]:
    function = f"{PREFIX}{trigger.name}"
    timing, body, result = "AFTER", trigger.body, "NULL"
    if trigger.new_used:
        timing, body, result = "BEFORE", f"NEW.used := {trigger.new_used};", "NEW"
    conditions = trigger.conditions("OLD.{column} IS DISTINCT FROM NEW.{column}", "OR")
    when = (" WHEN (" + " AND ".join(conditions) + ")") if conditions else ""
    return [
        f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN {body} RETURN {result}; END $$",
        f"CREATE TRIGGER {function} {timing} {trigger.event} ON {trigger.table} "
        f"FOR EACH ROW{when} EXECUTE FUNCTION {function}()",
    ]


_RENDER = {"sqlite": _sqlite, "mysql": _mysql, "postgresql": _postgresql}


def drop(connection: sa.engine.Connection) -> None:
    """Remove every trigger of ours (any version of them)."""
    if connection.dialect.name == "postgresql":
        # dropping a function drops the triggers that call it
        functions = connection.scalars(sa.text(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = current_schema() AND p.proname LIKE :prefix"),
            {"prefix": PREFIX + "%"}).all()
        for name in functions:
            connection.exec_driver_sql(f"DROP FUNCTION {name}() CASCADE")
        return
    for name in installed(connection):
        connection.exec_driver_sql(f"DROP TRIGGER {name}")


def install(connection: sa.engine.Connection) -> None:
    """(Re)create every trigger, in the caller's transaction."""
    drop(connection)
    render = _RENDER[connection.dialect.name]
    present = set(sa.inspect(connection).get_table_names())
    for trigger in triggers(connection.dialect.name):
        if not present.issuperset(trigger.needs):
            continue
        for statement in render(trigger):
            connection.exec_driver_sql(statement)


def installed(connection: sa.engine.Connection) -> set[str]:
    """The names of our triggers the database has."""
    dialect = connection.dialect.name
    if dialect == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE :prefix"
    elif dialect == "mysql":
        query = ("SELECT trigger_name FROM information_schema.triggers "
                 "WHERE trigger_schema = DATABASE() AND trigger_name LIKE :prefix")
    else:
        query = ("SELECT DISTINCT tgname FROM pg_trigger WHERE NOT tgisinternal "
                 "AND tgname LIKE :prefix")
    return set(connection.scalars(sa.text(query), {"prefix": PREFIX + "%"}))


def complete(connection: sa.engine.Connection) -> bool:
    """Does the database have every trigger of ours?"""
    wanted = {PREFIX + trigger.name for trigger in triggers(connection.dialect.name)}
    return wanted <= installed(connection)
