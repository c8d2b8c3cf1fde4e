"""Databases for tests, on every backend the service supports.

Backends are named ``sqlite``, ``mysql`` (MariaDB/MySQL through PyMySQL) and
``postgresql`` (through psycopg). ``PLACEMENT_TEST_BACKENDS`` (comma
separated) narrows the run to some of them; by default all three run. The
servers are found at ``PLACEMENT_TEST_MYSQL_URL`` and
``PLACEMENT_TEST_POSTGRESQL_URL`` (an administrative connection; the URL's
database part is ignored for MySQL and used for PostgreSQL's maintenance
connection).

A fresh database per gabbi file must be cheap:

- SQLite: every fresh database is a copy of one migrated template file.
- MySQL and PostgreSQL: each test run creates one database per server with a
  unique name, migrates it once, and ``FreshDatabase`` wipes every row the
  standard data does not hold before handing it out (a few DELETEs instead of
  a migration). ``drop_run_databases`` drops them when the run ends.

``empty_database_url`` gives a database without any schema (for migration
tests); it too is dropped at the end of the run.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import uuid

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from placement.db import api as db_api
from placement.db import migration, server_databases, tables, triggers

ALL_BACKENDS = ("sqlite", "mysql", "postgresql")

SERVER_URLS = {
    "mysql": os.environ.get("PLACEMENT_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/"),
    "postgresql": os.environ.get(
        "PLACEMENT_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
}

# Seconds to wait for a server that does not answer before calling it down.
CONNECT_TIMEOUT = server_databases.CONNECT_TIMEOUT


def in_ci() -> bool:
    """Under CI (``CI=true``) a missing database server fails the run."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def selected_backends() -> tuple[str, ...]:
    """The backends this run asks for (all of them unless narrowed)."""
    requested = os.environ.get("PLACEMENT_TEST_BACKENDS", "")
    names = tuple(name.strip() for name in requested.split(",") if name.strip())
    unknown = set(names) - set(ALL_BACKENDS)
    if unknown:
        raise ValueError(f"PLACEMENT_TEST_BACKENDS names unknown backends: {sorted(unknown)}; "
                         f"known: {', '.join(ALL_BACKENDS)}")
    return names or ALL_BACKENDS


_workdir = tempfile.mkdtemp(prefix="placement-tests-")
atexit.register(shutil.rmtree, _workdir, ignore_errors=True)
_lock = threading.Lock()
# Per backend: the SQLite template file's URL, or the run's server database URL.
_migrated: dict[str, str] = {}
_created_server_databases: list[tuple[str, str]] = []


def _unique_name(prefix: str) -> str:
    # The pid keeps parallel runs (and pytest-xdist workers) apart.
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def admin_engine(backend: str, admin_url: str | None = None) -> sa.engine.Engine:
    return server_databases.admin_engine(admin_url or SERVER_URLS[backend])


def server_unavailable_reason(backend: str, admin_url: str | None = None) -> str | None:
    """Why the server of ``backend`` (the run's, or the one of ``admin_url``)
    cannot be used, or None when it can."""
    if backend == "sqlite":
        return None
    engine = admin_engine(backend, admin_url)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
    except sa.exc.DBAPIError as error:
        return f"{admin_url or SERVER_URLS[backend]}: {error.orig}"
    finally:
        engine.dispose()
    return None


def _create_server_database(backend: str, prefix: str) -> str:
    name = _unique_name(prefix)
    url = server_databases.create_database(SERVER_URLS[backend], name)
    with _lock:
        _created_server_databases.append((backend, name))
    return url


def _drop_server_database(backend: str, name: str) -> None:
    server_databases.drop_database(SERVER_URLS[backend], name)


def drop_run_databases() -> None:
    """Drop every server database this run created."""
    with _lock:
        created = list(_created_server_databases)
        _created_server_databases.clear()
        for backend in [backend for backend in _migrated if backend != "sqlite"]:
            del _migrated[backend]
    for backend, name in created:
        _drop_server_database(backend, name)


atexit.register(drop_run_databases)


def empty_database_url(backend: str) -> str:
    """The URL of a new database without any schema."""
    if backend == "sqlite":
        handle, path = tempfile.mkstemp(suffix=".sqlite", dir=_workdir)
        os.close(handle)
        return "sqlite:///" + path
    return _create_server_database(backend, "placement_test_empty")


def _migrated_url(backend: str) -> str:
    """The run's migrated database of ``backend`` (the template for SQLite)."""
    with _lock:
        url = _migrated.get(backend)
    if url is not None:
        return url
    url = empty_database_url(backend)
    engine = db_api.create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    with _lock:
        _migrated[backend] = url
    return url


def _wipe(engine: sa.engine.Engine) -> None:
    """Delete every row but the standard resource classes and traits."""
    custom = "CUSTOM\\_%"
    with engine.begin() as connection:
        # Providers refer to each other; unlink them so that no delete order
        # matters to the foreign key checks.
        connection.execute(tables.resource_providers.update().values(
            root_provider_id=None, parent_provider_id=None))
        for table in reversed(tables.metadata.sorted_tables):
            if table is tables.provider_change_shards or table is tables.usage_change_shards:
                continue  # standard data, which writers only ever update
            if table is tables.resource_classes or table is tables.traits:
                connection.execute(table.delete().where(table.c.name.like(custom, escape="\\")))
            else:
                connection.execute(table.delete())
        # last: the deletes above were recorded as changes (the triggers)
        connection.execute(tables.provider_changes.delete())
        connection.execute(tables.usage_changes.delete())
    # Puts back a standard row a test may have removed behind the API's back.
    migration.sync_standard_data(engine)


def _collation_differences(connection: sa.engine.Connection) -> list[tuple]:
    """MySQL tables and text columns whose collation is not the models'
    (alembic does not compare collations)."""
    wanted = tables.MYSQL_TABLE_OPTIONS["mysql_collate"]
    rows = connection.execute(sa.text(
        "SELECT table_name, table_collation FROM information_schema.tables "
        "WHERE table_schema = DATABASE() AND table_name NOT IN :version_tables "
        "UNION ALL SELECT CONCAT(table_name, '.', column_name), collation_name "
        "FROM information_schema.columns WHERE table_schema = DATABASE() "
        "AND table_name NOT IN :version_tables AND collation_name IS NOT NULL"
    ).bindparams(sa.bindparam("version_tables", expanding=True)),
        {"version_tables": [tables.VERSION_TABLE, migration.ORIGINAL_VERSION_TABLE]})
    found = {name: collation for name, collation in rows}
    assert set(tables.metadata.tables) <= set(found)
    return [(name, collation) for name, collation in found.items() if collation != wanted]


def schema_differences(url: str) -> list:
    """How the schema of the database at ``url`` differs from the models of
    placement/db/tables.py (alembic's comparison, collations on MySQL, our
    triggers), leaving out the original service's own version table."""
    engine = db_api.create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "compare_server_default": True,
                                  "version_table": tables.VERSION_TABLE})
            differences = [
                difference for difference in compare_metadata(context, tables.metadata)
                if not (difference[0] == "remove_table"
                        and difference[1].name == migration.ORIGINAL_VERSION_TABLE)]
            if connection.dialect.name == "mysql":
                differences += _collation_differences(connection)
            if not triggers.complete(connection):
                differences.append(("missing triggers", sorted(triggers.installed(connection))))
    finally:
        engine.dispose()
    return differences


# The backend of a FreshDatabase() that names none. tests/conftest.py sets it
# per test, so that a module using FreshDatabase() runs on every backend.
default_backend = "sqlite"


class FreshDatabase:
    """A migrated database of ``backend`` holding only the standard data.

    On MySQL and PostgreSQL all fresh databases of a run are the same
    database, wiped: close one before asking for the next.
    """

    def __init__(self, backend: str | None = None) -> None:
        backend = backend or default_backend
        if backend not in ALL_BACKENDS:
            raise ValueError(f"unknown test backend {backend!r}")
        self.backend = backend
        # The SQLite file (None on the servers).
        self.path: str | None = None
        migrated_url = _migrated_url(backend)
        if backend == "sqlite":
            handle, self.path = tempfile.mkstemp(suffix=".sqlite", dir=_workdir)
            os.close(handle)
            shutil.copyfile(sa.engine.make_url(migrated_url).database, self.path)
            self.url = "sqlite:///" + self.path
        else:
            self.url = migrated_url
        self.db = db_api.Database(db_api.create_engine(self.url))
        if backend != "sqlite":
            _wipe(self.db.engine)

    def close(self) -> None:
        self.db.dispose()
        if self.path is not None:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.unlink(self.path + suffix)


def kill_connections(url: str, admin_url: str | None = None) -> int:
    """Kill every server-side connection to the database of ``url``, as a
    failing or restarting server would; returns how many were killed.
    ``admin_url`` names the server's administrative connection when it is
    not the run's server (see tests/db_servers.py)."""
    parsed = sa.engine.make_url(url)
    backend = parsed.get_backend_name()
    engine = admin_engine(backend, admin_url)
    with engine.connect() as connection:
        if backend == "mysql":
            ids = connection.exec_driver_sql(
                "SELECT id FROM information_schema.processlist "
                "WHERE db = %s AND id <> CONNECTION_ID()", (parsed.database,)).scalars().all()
            killed = 0
            for connection_id in ids:
                try:
                    connection.exec_driver_sql(f"KILL {int(connection_id)}")
                    killed += 1
                except sa.exc.OperationalError:
                    pass  # it ended by itself meanwhile
        else:
            killed = connection.exec_driver_sql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %(name)s AND pid <> pg_backend_pid()",
                {"name": parsed.database}).scalar()
    engine.dispose()
    return killed
