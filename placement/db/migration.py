"""Schema migrations (alembic) and the standard data every database holds."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable, Iterator

import os_resource_classes
import os_traits
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_utils import timeutils

from placement.db import provider_changes, tables, triggers

LOG = logging.getLogger(__name__)

ALEMBIC_INI = os.path.join(os.path.dirname(__file__), "alembic.ini")


def _alembic_config(connection: sa.engine.Connection) -> Config:
    config = Config(ALEMBIC_INI)
    config.attributes["connection"] = connection
    return config


# Any constant shared by every placement process: names the advisory lock.
_MIGRATION_LOCK = 0x706C6163


# The original placement service's alembic revisions (in its own
# ``alembic_version`` table), as the schema of each release leaves them.
ORIGINAL_REVISIONS = {
    "b4ed3a175331": "1.0.0, the first release (no consumer types)",
    "b5c396305c25": "2.0.0 to 5.0.0 (no consumer types)",
    "422ece571366": "6.0.0 (consumer types)",
    "a082b8bb98d0": "16.0.0",
}
# The original's revision whose schema ours holds (with tables, columns and
# triggers of our own that the original ignores): what ``alembic_version``
# says once we have taken a database over, so that the original can be
# started on it again.
ORIGINAL_HEAD = "a082b8bb98d0"
ORIGINAL_VERSION_TABLE = "alembic_version"
# Our revisions, which databases made before our version table had its own
# name keep in ``alembic_version``.
_OUR_REVISIONS = ("0001", "0002", "0002_binary_collation", "0003", "0004", "0005")
_LEGACY_RENAMED = {"0002": "0003"}  # the provider changes before the renumbering


class UnknownSchema(Exception):
    """The database holds tables this code does not know how to take over."""


@dataclasses.dataclass
class Found:
    """What a database holds: ``kind`` is "empty", "ours" (our revision in our
    version table), "ours-legacy" (our revision in ``alembic_version``) or
    "original" (a revision of the original service)."""

    kind: str
    revision: str | None
    original_revision: str | None


def _version(connection: sa.engine.Connection, table: str, names: set[str]) -> str | None:
    if table not in names:
        return None
    return connection.scalar(sa.text(f"SELECT version_num FROM {table}"))


def inspect_database(connection: sa.engine.Connection) -> Found:
    names = set(sa.inspect(connection).get_table_names())
    ours = _version(connection, tables.VERSION_TABLE, names)
    theirs = _version(connection, ORIGINAL_VERSION_TABLE, names)
    if ours is not None:
        return Found("ours", ours, theirs)
    if theirs in _OUR_REVISIONS:
        return Found("ours-legacy", _LEGACY_RENAMED.get(theirs, theirs), None)
    if theirs in ORIGINAL_REVISIONS:
        return Found("original", None, theirs)
    if theirs is not None:
        raise UnknownSchema(
            f"The database's alembic_version is {theirs!r}: neither a revision of ours nor "
            "one of the original placement service's that this release knows "
            f"({', '.join(f'{rev}: {release}' for rev, release in ORIGINAL_REVISIONS.items())}). "
            "Nothing was changed.")
    if "resource_providers" in names:
        raise UnknownSchema("The database has placement tables but no schema revision "
                            "(no alembic_version table): nothing was changed.")
    return Found("empty", None, None)


# -- Taking over the original's database -------------------------------------
#
# The original's schema at 16.0.0 is our first revision's (our tables
# declare the same names, columns, keys and indexes), so a database of the
# original is brought to our revision 0001 by what older releases lack,
# then migrated like ours. Each step looks at the database, not at the
# revision: it is done only where needed.

def _index_names(connection: sa.engine.Connection, table: str) -> set[str]:
    """The plain indexes of ``table`` (not those of unique constraints,
    which MySQL reports as indexes too)."""
    return {index["name"] for index in sa.inspect(connection).get_indexes(table)
            if not index.get("unique") and not index.get("duplicates_constraint")}


def _extra_indexes(connection: sa.engine.Connection) -> list[tuple[str, str]]:
    """(table, index) of the original's older releases that our schema (and
    the original's own newer releases) do not have: they only slow writes."""
    extra = []
    for table in tables.metadata.sorted_tables:
        if not sa.inspect(connection).has_table(table.name):
            continue
        ours = {index.name for index in table.indexes}
        extra += [(table.name, name) for name in sorted(_index_names(connection, table.name) - ours)
                  if not name.startswith("sqlite_autoindex")]
    return extra


@dataclasses.dataclass
class Step:
    """One change a takeover makes; ``rows`` it touches, for the estimate."""

    description: str
    rows: int = 0
    cost: str = "default"  # the kind of work, for _SECONDS_PER_ROW


def _count(connection: sa.engine.Connection, table: str) -> int:
    return connection.scalar(sa.text(f"SELECT COUNT(*) FROM {table}"))


def _adoption_steps(connection: sa.engine.Connection) -> list[tuple[Step, Callable | None]]:
    """What brings a database of the original to our revision 0001, each
    with the function that does it."""
    inspector = sa.inspect(connection)
    dialect = connection.dialect.name
    steps: list[tuple[Step, Callable | None]] = []
    if not inspector.has_table("consumer_types"):
        steps.append((Step("create table consumer_types (consumer types, 1.38)"),
                      lambda: tables.consumer_types.create(connection)))
    if "consumer_type_id" not in {column["name"] for column in inspector.get_columns("consumers")}:
        def add_consumer_type() -> None:
            if dialect == "sqlite":
                connection.exec_driver_sql(
                    "ALTER TABLE consumers ADD COLUMN consumer_type_id INTEGER "
                    "REFERENCES consumer_types (id)")
            else:
                connection.exec_driver_sql(
                    "ALTER TABLE consumers ADD COLUMN consumer_type_id INTEGER NULL")
                connection.exec_driver_sql(
                    "ALTER TABLE consumers ADD CONSTRAINT consumers_consumer_type_id_fkey "
                    "FOREIGN KEY (consumer_type_id) REFERENCES consumer_types (id)")
            connection.exec_driver_sql(
                "CREATE INDEX consumers_consumer_type_id_idx ON consumers (consumer_type_id)")
        steps.append((Step("add column consumers.consumer_type_id, its index and foreign key",
                           _count(connection, "consumers")), add_consumer_type))
    for table, index in _extra_indexes(connection):
        statement = (f"DROP INDEX {index} ON {table}" if dialect == "mysql"
                     else f"DROP INDEX {index}")
        steps.append((Step(f"drop index {index} of {table} (not in the current schema)",
                           _count(connection, table)),
                      functools.partial(connection.exec_driver_sql, statement)))
    rootless = connection.execute(sa.text(
        "SELECT id, parent_provider_id FROM resource_providers "
        "WHERE root_provider_id IS NULL")).all()
    if rootless:
        steps.append((Step(f"give the {len(rootless)} providers without a root provider "
                           "their root (written before trees had roots)", len(rootless)),
                      functools.partial(_set_missing_roots, connection)))
    nulls = connection.scalar(sa.text(
        "SELECT COUNT(*) FROM resource_providers WHERE generation IS NULL"))
    if nulls:
        steps.append((Step(f"set the generation of {nulls} providers without one to 0", nulls),
                      functools.partial(connection.exec_driver_sql,
                                        "UPDATE resource_providers SET generation = 0 "
                                        "WHERE generation IS NULL")))
    return steps


def _set_missing_roots(connection: sa.engine.Connection) -> None:
    """Each provider without a root gets the root of its tree (itself when
    it has no parent)."""
    parents = dict(connection.execute(sa.text(
        "SELECT id, parent_provider_id FROM resource_providers")).all())
    roots = dict(connection.execute(sa.text(
        "SELECT id, root_provider_id FROM resource_providers")).all())

    def root_of(provider_id: int) -> int:
        seen = set()
        while parents.get(provider_id) is not None and provider_id not in seen:
            seen.add(provider_id)
            provider_id = parents[provider_id]
        return provider_id

    rp = tables.resource_providers
    for provider_id, root_id in roots.items():
        if root_id is None:
            connection.execute(sa.update(rp).where(rp.c.id == provider_id)
                               .values(root_provider_id=root_of(provider_id)))


def _set_original_revision(connection: sa.engine.Connection, revision: str) -> None:
    """``alembic_version`` says ``revision``, created if missing."""
    if not sa.inspect(connection).has_table(ORIGINAL_VERSION_TABLE):
        connection.exec_driver_sql(
            f"CREATE TABLE {ORIGINAL_VERSION_TABLE} (version_num VARCHAR(32) NOT NULL, "
            f"CONSTRAINT {ORIGINAL_VERSION_TABLE}_pkc PRIMARY KEY (version_num))")
    connection.execute(sa.text(f"DELETE FROM {ORIGINAL_VERSION_TABLE}"))
    connection.execute(sa.text(f"INSERT INTO {ORIGINAL_VERSION_TABLE} (version_num) "
                               "VALUES (:revision)"), {"revision": revision})


@contextlib.contextmanager
def _migrating(engine: sa.engine.Engine) -> Iterator[sa.engine.Connection]:
    """A transaction holding the migration lock: several workers may start
    at once on a fresh database (uwsgi lazy-apps); they take turns, and
    those that come later find the schema at head."""
    backend = engine.dialect.name
    with engine.connect() as connection:
        if backend == "sqlite":
            connection.info["sqlite_begin"] = "BEGIN IMMEDIATE"
        with connection.begin():
            if backend == "postgresql":
                connection.execute(sa.text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
            elif backend == "mysql":
                connection.execute(sa.text(f"SELECT GET_LOCK('{_MIGRATION_LOCK}', 600)"))
            yield connection
        if backend == "mysql":
            connection.execute(sa.text(f"SELECT RELEASE_LOCK('{_MIGRATION_LOCK}')"))


def upgrade(engine: sa.engine.Engine, revision: str = "head") -> None:
    """Create, upgrade or take over the schema, then make sure the standard
    data exists and the derived state is right.

    A database of the original service is taken over in place (its rows
    untouched, its ``alembic_version`` left at the original's revision of
    the same schema); one of ours made before our version table had its own
    name gets it. Triggers found missing (a dump restored without them) are
    made again. Then the kept usages are checked against the allocations,
    and recomputed (every process reloading its copy) when the triggers may
    have missed writes: after a takeover, when they were missing, or when
    a usage is found wrong."""
    with _migrating(engine) as connection:
        found = inspect_database(connection)
        if engine.dialect.name == "mysql" and found.kind != "empty" and _collation_steps(
                connection):
            collisions = _collisions(connection)
            if collisions:
                raise CollationCollision(
                    "These rows would collide under the binary collation, nothing was "
                    "changed: " + "; ".join(collisions))
        config = _alembic_config(connection)
        if found.kind == "original":
            for step, change in _adoption_steps(connection):
                LOG.info("Taking over the original's database: %s", step.description)
                change()
            command.stamp(config, "0001")
        elif found.kind == "ours-legacy":
            connection.execute(sa.text(f"DELETE FROM {ORIGINAL_VERSION_TABLE}"))
            command.stamp(config, found.revision)
        command.upgrade(config, revision)
        if found.kind == "original":
            _set_original_revision(connection, ORIGINAL_HEAD)
        at_head = revision == "head" or revision == head_revision()
        missing_triggers = at_head and not triggers.complete(connection)
        if missing_triggers:
            LOG.warning("The derived state's triggers were missing: made again, usages "
                        "recomputed.")
            triggers.install(connection)
    sync_standard_data(engine)
    if at_head and found.kind != "empty":
        recompute_derived(engine, force=found.kind != "ours" or missing_triggers)


# Rough costs on 2 cores, from the takeover of databases of 20 000
# computes (README "Switching from the original service"): per row, a
# MariaDB table copy for the collation change, the usage recompute (the
# slowest backend's, PostgreSQL's), an index build or drop; and the start.
_SECONDS_PER_ROW = {"collation": 8e-6, "usages": 1e-5, "default": 2e-6}
_SECONDS_TO_START = 1.0


def _collation_steps(connection: sa.engine.Connection) -> list[Step]:
    """MariaDB: the tables whose collation the change to binary copies."""
    wanted = tables.MYSQL_TABLE_OPTIONS["mysql_collate"]
    rows = connection.execute(sa.text(
        "SELECT table_name, table_collation FROM information_schema.tables "
        "WHERE table_schema = DATABASE()")).all()
    return [Step(f"convert table {table} from {collation} to {wanted} (copies the table; "
                 "reads go on, writes wait)", _count(connection, table), "collation")
            for table, collation in rows
            if table in tables.metadata.tables and collation != wanted]


def _collisions(connection: sa.engine.Connection) -> list[str]:
    """Unique text values that would become equal under the binary
    collation (none can: a binary collation tells apart every pair of
    strings any other tells apart; checked all the same)."""
    wanted = tables.MYSQL_TABLE_OPTIONS["mysql_collate"]
    found = []
    for table in tables.metadata.sorted_tables:
        for constraint in table.constraints:
            if not isinstance(constraint, sa.UniqueConstraint):
                continue
            columns = [column.name for column in constraint.columns
                       if isinstance(column.type, sa.String)]
            if len(columns) != 1 or not sa.inspect(connection).has_table(table.name):
                continue
            column = columns[0]
            duplicates = connection.execute(sa.text(
                f"SELECT CONVERT({column} USING utf8mb4) COLLATE {wanted} AS value, COUNT(*) "
                f"FROM {table.name} GROUP BY value HAVING COUNT(*) > 1")).all()
            found += [f"{table.name}.{column} = {value!r} ({count} rows)"
                      for value, count in duplicates]
    return found


@dataclasses.dataclass
class Plan:
    """What ``upgrade`` would do to a database, and how long it should take."""

    found: Found
    steps: list[Step]
    refusals: list[str]

    @property
    def seconds(self) -> float:
        return _SECONDS_TO_START + sum(step.rows * _SECONDS_PER_ROW[step.cost]
                                       for step in self.steps)

    def report(self) -> str:
        found = self.found
        if found.kind == "original":
            head = (f"Found a database of the original placement service at revision "
                    f"{found.original_revision} ({ORIGINAL_REVISIONS[found.original_revision]}).")
        elif found.kind == "empty":
            head = "Found an empty database: the schema would be created."
        else:
            head = f"Found a database of ours at revision {found.revision}."
            if found.original_revision:
                head += (f" Its alembic_version says the original's revision "
                         f"{found.original_revision}: it was taken over from, or handed "
                         "back to, the original service.")
        lines = [head]
        if self.refusals:
            lines.append("Refused: these rows would collide under the new collation:")
            lines += [f"  - {refusal}" for refusal in self.refusals]
            return "\n".join(lines)
        lines.append("It would:" if self.steps else "Nothing to change.")
        lines += [f"  - {step.description}" + (f" [{step.rows} rows]" if step.rows else "")
                  for step in self.steps]
        lines.append(f"Expected time: about {self.seconds:.0f} s.")
        return "\n".join(lines)


def _pending_revisions(connection: sa.engine.Connection, since: str | None) -> list[str]:
    script = ScriptDirectory.from_config(_alembic_config(connection))
    revisions = list(script.iterate_revisions("head", since))
    def summary(doc: str) -> str:
        first_paragraph = " ".join(doc.split("\n\n")[0].split())
        return first_paragraph.split(". ")[0].rstrip(".")

    return [f"migration {revision.revision}: {summary(revision.doc)}"
            for revision in reversed(revisions)]


def plan(engine: sa.engine.Engine) -> Plan:
    """What ``upgrade`` would change, without changing anything."""
    with engine.connect() as connection:
        found = inspect_database(connection)
        steps: list[Step] = []
        refusals: list[str] = []
        if found.kind == "original":
            steps += [step for step, _ in _adoption_steps(connection)]
        since = {"original": "0001", "empty": None}.get(found.kind, found.revision)
        steps += [Step(description) for description in _pending_revisions(connection, since)]
        if engine.dialect.name == "mysql" and found.kind != "empty":
            converted = _collation_steps(connection)
            steps += converted
            refusals = _collisions(connection) if converted else []
        rows = (_count(connection, "allocations") + _count(connection, "inventories")
                if found.kind != "empty" else 0)
        if found.kind == "ours":
            steps.append(Step("check the kept usages (inventories.used, the projects') "
                              "against the allocations; recompute them and make every "
                              "process reload its provider copy only if one is wrong",
                              rows, "usages"))
        elif found.kind != "empty":
            steps.append(Step("recompute the kept usages (inventories.used, the projects') "
                              "from the allocations (writers of allocations wait meanwhile) "
                              "and make every process reload its provider copy",
                              rows, "usages"))
        return Plan(found, steps, refusals)


class CollationCollision(UnknownSchema):
    """Rows that the collation change would make equal: nothing was changed."""


def hand_back(engine: sa.engine.Engine) -> list[str]:
    """Leave the database so that the original service (16.0.0) starts on
    it and serves everything in it; returns what was done. Our triggers
    and tables stay: the original does not read them, and the triggers keep
    our derived state right while it writes (``db sync`` recomputes it
    anyway when we take the database over again)."""
    with _migrating(engine) as connection:
        found = inspect_database(connection)
        if found.kind != "ours" or found.revision != head_revision():
            raise UnknownSchema(f"The schema is not at our head revision ({found.kind}, "
                                f"{found.revision}): run placement-manage db sync first.")
        _set_original_revision(connection, ORIGINAL_HEAD)
        done = [f"{ORIGINAL_VERSION_TABLE} says {ORIGINAL_HEAD}, the original's revision of "
                "this schema (its db sync and its start-up find nothing to migrate)."]
        if engine.dialect.name == "postgresql":
            for table in tables.metadata.sorted_tables:
                sequence = connection.scalar(sa.text("SELECT pg_get_serial_sequence(:t, 'id')"),
                                             {"t": table.name}) if "id" in table.c else None
                if sequence:
                    connection.execute(sa.text(
                        f"SELECT setval(:sequence, GREATEST((SELECT MAX(id) FROM {table.name}), "
                        "1))"), {"sequence": sequence})
            done.append("Every id sequence is past the ids in its table.")
        done.append("Kept: our tables and triggers, which the original ignores (the "
                    "triggers keep our derived state right while it writes).")
    return done


_inv = tables.inventories
_alloc = tables.allocations
_SUM_OF_ALLOCATIONS = (sa.select(sa.func.coalesce(sa.func.sum(_alloc.c.used), 0))
                       .where(_alloc.c.resource_provider_id == _inv.c.resource_provider_id,
                              _alloc.c.resource_class_id == _inv.c.resource_class_id)
                       .scalar_subquery())


def _wrong_usages(connection: sa.engine.Connection) -> int:
    return connection.scalar(sa.select(sa.func.count()).select_from(_inv)
                             .where(_inv.c.used != _SUM_OF_ALLOCATIONS))


def recompute_derived(engine: sa.engine.Engine, force: bool = True) -> int:
    """Compute ``inventories.used`` and the project usages from the
    allocations (and consumers), and make every process reload its
    provider copy: whatever wrote the database before
    (the original service without our triggers, an operator), our derived
    state is then right. Writers of allocations wait meanwhile (the
    triggers keep the usages from the next write on). Unless ``force``d,
    first looks without locking, and does it only if a usage is wrong.
    Returns how many usages were wrong."""
    backend = engine.dialect.name
    if not force:
        with engine.connect() as connection, connection.begin():
            if not _wrong_usages(connection) and not triggers.project_usages_wrong(connection):
                return 0
    options = {"isolation_level": "REPEATABLE READ"} if backend == "mysql" else {}
    with engine.connect().execution_options(**options) as connection:
        if backend == "sqlite":
            connection.info["sqlite_begin"] = "BEGIN IMMEDIATE"
        with connection.begin():
            if backend == "postgresql":
                connection.exec_driver_sql("LOCK TABLE allocations IN SHARE MODE")
            elif backend == "mysql":
                # next-key locks over the whole table: no allocation row
                # can be added, changed or removed until COMMIT
                connection.exec_driver_sql("SELECT COUNT(*) FROM allocations LOCK IN SHARE MODE")
            count = _wrong_usages(connection)
            if count:
                connection.execute(sa.update(_inv).where(_inv.c.used != _SUM_OF_ALLOCATIONS)
                                   .values(used=_SUM_OF_ALLOCATIONS))
                LOG.warning("Recomputed %d kept usages that were not the sum of their "
                            "allocations.", count)
            triggers.recompute_project_usages(connection)
            provider_changes.request_reload(connection)
    return count


def stamp(engine: sa.engine.Engine, revision: str = "head") -> None:
    with engine.begin() as connection:
        command.stamp(_alembic_config(connection), revision)


def current_revision(engine: sa.engine.Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(
            connection, opts={"version_table": tables.VERSION_TABLE}).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(Config(ALEMBIC_INI)).get_current_head()


def _insert_missing(engine: sa.engine.Engine, table: sa.Table, rows: list[dict],
                    key: str = "name") -> None:
    """Insert the rows whose ``key`` is not there yet. Several workers may
    start at once, so a row another process inserted meanwhile is not an
    error."""
    with engine.begin() as connection:
        existing = set(connection.scalars(sa.select(table.c[key])))
    missing = [row for row in rows if row[key] not in existing]
    if not missing:
        return
    if "created_at" in table.c:
        now = timeutils.utcnow().replace(tzinfo=None)
        missing = [dict(row, created_at=now) for row in missing]
    try:
        with engine.begin() as connection:
            connection.execute(table.insert(), missing)
    except (sa.exc.IntegrityError, db_exc.DBDuplicateEntry):
        for row in missing:
            try:
                with engine.begin() as connection:
                    connection.execute(table.insert(), row)
            except (sa.exc.IntegrityError, db_exc.DBDuplicateEntry):
                pass


def sync_standard_data(engine: sa.engine.Engine) -> None:
    """Every standard resource class (id = its index), standard trait and
    provider and usage change shard (the reload shards included)."""
    _insert_missing(
        engine,
        tables.resource_classes,
        [{"id": index, "name": name} for index, name in enumerate(os_resource_classes.STANDARDS)],
    )
    _insert_missing(
        engine, tables.traits, [{"name": name} for name in sorted(os_traits.get_traits())]
    )
    # the counters of provider and usage changes (placement.db.provider_changes),
    # which writers only ever update (of those a schema of an older
    # revision has)
    with engine.connect() as connection:
        schema = sa.inspect(connection)
        records = [record for record in (provider_changes.PROVIDERS, provider_changes.USAGES)
                   if schema.has_table(record.shards.name)]
    for record in records:
        _insert_missing(engine, record.shards,
                        [{"shard": shard, "version": 0}
                         for shard in range(provider_changes.RELOAD_SHARD + 1)],
                        key="shard")
