"""Schema migrations (alembic) and the standard data every database holds."""

from __future__ import annotations

import os

import os_resource_classes
import os_traits
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from oslo_db import exception as db_exc
from oslo_utils import timeutils

from placement.db import provider_changes, tables

ALEMBIC_INI = os.path.join(os.path.dirname(__file__), "alembic.ini")


def _alembic_config(connection: sa.engine.Connection) -> Config:
    config = Config(ALEMBIC_INI)
    config.attributes["connection"] = connection
    return config


# Any constant shared by every placement process: names the advisory lock.
_MIGRATION_LOCK = 0x706C6163


def upgrade(engine: sa.engine.Engine, revision: str = "head") -> None:
    """Create or upgrade the schema, then make sure the standard data exists.

    Several workers may start at once on a fresh database (uwsgi lazy-apps):
    they take turns, and those that come later find the schema at head."""
    backend = engine.dialect.name
    with engine.connect() as connection:
        if backend == "sqlite":
            connection.info["sqlite_begin"] = "BEGIN IMMEDIATE"
        with connection.begin():
            if backend == "postgresql":
                connection.execute(sa.text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
            elif backend == "mysql":
                connection.execute(sa.text(f"SELECT GET_LOCK('{_MIGRATION_LOCK}', 600)"))
            command.upgrade(_alembic_config(connection), revision)
        if backend == "mysql":
            connection.execute(sa.text(f"SELECT RELEASE_LOCK('{_MIGRATION_LOCK}')"))
    sync_standard_data(engine)


def stamp(engine: sa.engine.Engine, revision: str = "head") -> None:
    with engine.begin() as connection:
        command.stamp(_alembic_config(connection), revision)


def current_revision(engine: sa.engine.Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


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
    provider change shard."""
    _insert_missing(
        engine,
        tables.resource_classes,
        [{"id": index, "name": name} for index, name in enumerate(os_resource_classes.STANDARDS)],
    )
    _insert_missing(
        engine, tables.traits, [{"name": name} for name in sorted(os_traits.get_traits())]
    )
    # the counters of provider changes (placement.db.provider_changes),
    # which writers only ever update
    _insert_missing(engine, tables.provider_change_shards,
                    [{"shard": shard, "version": 0} for shard in range(provider_changes.SHARDS)],
                    key="shard")
