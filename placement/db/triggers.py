"""Database triggers that keep placement's derived state, whoever writes.

Two things in the database are derived from other rows, and the service
relies on both being right at every commit:

- ``inventories.used``: the sum of the inventory's allocations, which the
  capacity checks and usages read instead of summing allocations;
- the provider change record (``placement.db.provider_changes``): which
  providers changed what they *are* (the provider row, its inventories,
  traits and aggregates), which every process's provider copy follows;
  and the usage change record beside it: which providers' ``used`` moved,
  which every process's usage mirror follows.

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
    for trigger in triggers(connection.dialect.name):
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
