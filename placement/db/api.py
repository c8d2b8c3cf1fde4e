"""Engine creation and transactions.

Every request works inside ``reader()`` or ``writer()`` transactions. Writers
that lose a race with another writer (deadlock, lost connection) are retried
by ``retry_on_db_error`` in a new transaction, never inside the old one.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import sqlalchemy as sa
from oslo_config import cfg
from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import exc_filters
from oslo_log import log as logging
from sqlalchemy import event, pool

LOG = logging.getLogger(__name__)

T = TypeVar("T")

# How long a SQLite writer waits for another writer's lock before failing.
SQLITE_BUSY_TIMEOUT_MS = 30000


def _sqlite_engine(url: sa.engine.URL) -> sa.engine.Engine:
    in_memory = url.database in (None, "", ":memory:")
    engine = sa.create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        poolclass=pool.StaticPool if in_memory else pool.QueuePool,
        **({} if in_memory else {"pool_size": 8, "max_overflow": 32}),
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection, _record):
        # Let us issue BEGIN ourselves, so that writers can take the write
        # lock up front (BEGIN IMMEDIATE) instead of failing on lock upgrade.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection):
        connection.exec_driver_sql(connection.info.pop("sqlite_begin", "BEGIN"))

    return engine


def create_engine(url: str, db_conf: cfg.ConfigOpts.GroupAttr | None = None
                  ) -> sa.engine.Engine:
    """An engine for ``url`` with the pool options of ``[placement_database]``."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = _sqlite_engine(parsed)
    else:
        options: dict = {}
        if db_conf is not None:
            options = {
                "pool_size": db_conf.max_pool_size,
                "max_overflow": db_conf.max_overflow,
                "pool_timeout": db_conf.pool_timeout,
                "pool_recycle": db_conf.connection_recycle_time,
                "pool_pre_ping": db_conf.pool_pre_ping,
            }
        if parsed.get_backend_name() == "mysql":
            parsed = parsed.update_query_dict({"charset": "utf8mb4"})
        engine = sa.create_engine(parsed, **options)
        if parsed.get_backend_name() == "mysql":
            @event.listens_for(engine, "connect")
            def _mysql_mode(dbapi_connection, _record):
                cursor = dbapi_connection.cursor()
                cursor.execute("SET SESSION sql_mode = 'TRADITIONAL'")
                cursor.close()
    # Translate driver errors into oslo.db's (DBDuplicateEntry, DBDeadlock,
    # DBConnectionError...) so the object layer sees one vocabulary.
    exc_filters.register_engine(engine)
    return engine


class Database:
    """One engine and the transactions made from it."""

    def __init__(self, engine: sa.engine.Engine, max_retries: int = 5):
        self.engine = engine
        self.max_retries = max_retries
        self.is_sqlite = engine.dialect.name == "sqlite"
        # Per-process caches of data that only grows (resource classes, traits).
        self.cache_lock = threading.Lock()
        self.caches: dict[str, object] = {}

    @contextlib.contextmanager
    def reader(self) -> Iterator[sa.engine.Connection]:
        with self.engine.connect() as connection, connection.begin():
            yield connection

    @contextlib.contextmanager
    def writer(self) -> Iterator[sa.engine.Connection]:
        with self.engine.connect() as connection:
            if self.is_sqlite:
                connection.info["sqlite_begin"] = "BEGIN IMMEDIATE"
            with connection.begin():
                yield connection

    def retry_on_db_error(self, function: Callable[..., T]) -> Callable[..., T]:
        """Run ``function`` again (in a new transaction) after a deadlock or
        a lost connection. ``function`` must open its own transaction."""
        return oslo_db_api.wrap_db_retry(
            max_retries=self.max_retries,
            retry_on_deadlock=True,
            retry_on_disconnect=True,
            exception_checker=lambda exc: isinstance(exc, db_exc.DBConnectionError),
        )(function)

    def dispose(self) -> None:
        self.engine.dispose()


def retrying(function: Callable[..., T]) -> Callable[..., T]:
    """Decorator for object-layer functions taking ``db`` first: retries the
    whole call on deadlocks and lost connections."""

    @functools.wraps(function)
    def wrapper(db: Database, *args, **kwargs):
        return db.retry_on_db_error(function)(db, *args, **kwargs)

    return wrapper


def write(db: Database, function: Callable[..., T], *args, **kwargs) -> T:
    """``function(connection, *args, **kwargs)`` in a writer transaction,
    run again in a new transaction after a deadlock or a lost connection."""

    @db.retry_on_db_error
    def attempt() -> T:
        with db.writer() as connection:
            return function(connection, *args, **kwargs)

    return attempt()
