"""Engine creation and transactions.

Every request works inside ``reader()`` or ``writer()`` transactions. Readers
see one snapshot (REPEATABLE READ on the servers); writers run in READ
COMMITTED and are guarded by compare-and-swap updates of generations. Writers
that lose a race with another writer (deadlock, Galera certification failure,
serialization failure, lost connection) are retried by ``retry_on_db_error``
in a new transaction, never inside the old one.
"""

from __future__ import annotations

import contextlib
import functools
import logging as std_logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import sqlalchemy as sa
from oslo_config import cfg
from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import exc_filters
from oslo_log import log as logging
from sqlalchemy import event, pool

from placement import conf as placement_conf
from placement import metrics
from placement.db import server_errors, sqlite_writers, tracing

LOG = logging.getLogger(__name__)

T = TypeVar("T")

# Seconds before the first retry of a transaction that lost a race; later
# retries wait up to twice as long each time (randomly, for deadlocks, so that
# the losers do not collide again), at most MAX_RETRY_INTERVAL.
RETRY_INTERVAL = 0.1
MAX_RETRY_INTERVAL = 2.0

# How long a SQLite writer waits for another writer's lock before failing.
SQLITE_BUSY_TIMEOUT_MS = 30000

# Tries at switching a SQLite file to WAL mode before giving up (see
# _use_wal), and the pause between them.
WAL_SWITCH_ATTEMPTS = 10
WAL_SWITCH_PAUSE = 0.01


# Drivers used for URLs that name only the database (the ones installed
# with the service).
DEFAULT_DRIVERS = {"mysql": "mysql+pymysql", "postgresql": "postgresql+psycopg"}


def _defaults() -> cfg.ConfigOpts.GroupAttr:
    """``[placement_database]`` as it is when nothing is configured."""
    defaults = cfg.ConfigOpts()
    defaults.register_opts(placement_conf.database_opts, group="placement_database")
    return defaults.placement_database


def _pool_options(db_conf: cfg.ConfigOpts.GroupAttr) -> dict:
    """SQLAlchemy pool arguments from ``[placement_database]``."""
    return {
        "pool_size": db_conf.max_pool_size,
        "max_overflow": db_conf.max_overflow,
        "pool_timeout": db_conf.pool_timeout,
        "pool_recycle": db_conf.connection_recycle_time,
        "pool_pre_ping": db_conf.pool_pre_ping,
    }


def _use_wal(cursor: sqlite3.Cursor) -> None:
    """Put the database in WAL mode (it stays so; later switches do nothing).

    Processes opening a fresh file at once (uwsgi lazy-apps workers) all
    switch it: each holds the shared lock that the others need released to
    take the exclusive one, so SQLite answers all but one "database is
    locked" at once, without its busy handler. Tried again, the switch finds
    the file in WAL mode."""
    for attempt in range(1, WAL_SWITCH_ATTEMPTS + 1):
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError:
            if attempt == WAL_SWITCH_ATTEMPTS:
                raise
            time.sleep(WAL_SWITCH_PAUSE)


def _sqlite_path(url: sa.engine.URL) -> str | None:
    """The file of a SQLite database URL; None for an in-memory database."""
    return None if url.database in (None, "", ":memory:") else url.database


def _sqlite_engine(url: sa.engine.URL, pool_options: dict, synchronous: bool
                   ) -> sa.engine.Engine:
    in_memory = _sqlite_path(url) is None
    if in_memory:
        # One connection is the whole database.
        pool_options = {"poolclass": pool.StaticPool}
    else:
        # A file has no server to restart or connection to lose: a ping
        # would be a statement more on every request for nothing.
        pool_options = {**pool_options, "pool_pre_ping": False}
    engine = sa.create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        **pool_options,
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection, _record):
        # Let us issue BEGIN ourselves (_begin), so that writers can take
        # the write lock up front (BEGIN IMMEDIATE) instead of failing on
        # lock upgrade.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not in_memory:
            _use_wal(cursor)
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        if not synchronous:  # [placement_database] sqlite_synchronous
            cursor.execute("PRAGMA synchronous=OFF")
        cursor.close()

    def _begin(connection: pool.PoolProxiedConnection) -> None:
        connection.driver_connection.execute(connection.info.pop("sqlite_begin", "BEGIN"))

    # The dialect's own begin does nothing (the driver would begin by
    # itself). Issued here on the driver's connection, rather than from a
    # "begin" event through exec_driver_sql, BEGIN costs no statement
    # execution of SQLAlchemy (a tenth of a small request); errors are
    # still translated like those of any statement.
    engine.dialect.do_begin = _begin
    return engine


def _mysql_engine(url: sa.engine.URL, pool_options: dict, sql_mode: str
                  ) -> sa.engine.Engine:
    # utf8mb4: provider names and other user strings may hold any character.
    # READ COMMITTED, as on PostgreSQL: under InnoDB's default REPEATABLE READ
    # the "delete a consumer's allocations, insert the new ones" write takes
    # gap locks, and concurrent claims for different consumers deadlock on
    # them all the time. Correctness does not need REPEATABLE READ: every
    # write is guarded by compare-and-swap updates of provider and consumer
    # generations, which read the latest committed row in either level.
    engine = sa.create_engine(url.update_query_dict({"charset": "utf8mb4"}),
                              isolation_level="READ COMMITTED", **pool_options)

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection, record):
        cursor = dbapi_connection.cursor()
        # By default TRADITIONAL: reject out-of-range or truncated values
        # instead of silently storing something else (as oslo.db does).
        if sql_mode:
            cursor.execute("SET SESSION sql_mode = %s", (sql_mode,))
        # A node of a Galera cluster (see _CAUSAL_WAIT); the variable is
        # OFF on a server on its own, and unknown to MySQL.
        cursor.execute("SHOW VARIABLES LIKE 'wsrep_on'")
        record.info[_GALERA] = cursor.fetchone() in (("wsrep_on", "ON"),)
        cursor.close()

    return engine


def create_engine(url: str, db_conf: cfg.ConfigOpts.GroupAttr | None = None
                  ) -> sa.engine.Engine:
    """An engine for ``url`` with the options of ``[placement_database]``
    (its defaults when none is given)."""
    db_conf = db_conf if db_conf is not None else _defaults()
    parsed = sa.engine.make_url(url)
    backend = parsed.get_backend_name()
    if parsed.drivername in DEFAULT_DRIVERS:
        parsed = parsed.set(drivername=DEFAULT_DRIVERS[parsed.drivername])
    if db_conf.connection_parameters:
        parsed = parsed.update_query_string(db_conf.connection_parameters, append=True)
    pool_options = _pool_options(db_conf)
    if backend == "sqlite":
        engine = _sqlite_engine(parsed, pool_options, db_conf.sqlite_synchronous)
    elif backend == "mysql":
        engine = _mysql_engine(parsed, pool_options, db_conf.mysql_sql_mode)
    else:
        engine = sa.create_engine(parsed, **pool_options)
    tracing.log_statements(db_conf.connection_debug)
    if db_conf.connection_trace:
        # Only when asked: any cursor listener makes SQLAlchemy dispatch
        # events on every statement (see the error listeners below).
        tracing.trace_statements(engine)
    # Translate driver errors into oslo.db's (DBDuplicateEntry, DBDeadlock,
    # DBConnectionError...) so the object layer sees one vocabulary; this
    # also marks lost connections as disconnects, so that the pool drops
    # them and the retry gets a new one. Our own listener comes first: it
    # marks what oslo.db does not recognize as a server that went away.
    # Only oslo.db's error filter, not its register_engine: that also
    # listens to every commit, rollback and pool check-in (to attach the
    # error that rolled back a savepoint to a later one, which nothing here
    # reads), and any such listener makes SQLAlchemy dispatch seven events
    # on each connection and statement, a tenth of a small request.
    event.listen(engine, "handle_error", server_errors.mark_server_gone_as_disconnect)
    event.listen(engine, "handle_error", exc_filters.handler, retval=True)
    # last: sees the oslo.db exception the error became
    event.listen(engine, "handle_error", server_errors.count_database_error)
    return engine


def replica_engine(db_conf: cfg.ConfigOpts.GroupAttr) -> sa.engine.Engine | None:
    """The engine of ``[placement_database] slave_connection``, the read
    replica that ``Database.reader()`` reads from; None when unset."""
    if not db_conf.slave_connection:
        return None
    return create_engine(db_conf.slave_connection, db_conf)


def is_serialization_failure(error: Exception) -> bool:
    """PostgreSQL's "could not serialize access" (SQLSTATE 40001), which
    oslo.db does not translate: it happens under REPEATABLE READ or
    SERIALIZABLE isolation, which a server may be configured to default to."""
    original = getattr(error, "orig", None) or getattr(
        getattr(error, "inner_exception", None), "orig", None)
    return getattr(original, "sqlstate", None) == "40001"


class CommitOutcomeUnknown(db_exc.DBError):
    """The connection was lost during COMMIT: the transaction may have been
    committed or not. Unlike a connection lost before, this is not retried,
    since running the writes again could repeat them or, guarded by
    generations, report a conflict for a write that did happen."""


# The first statement of a reader's transaction (MySQL: of the next one).
_REPEATABLE_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"

# Connection info key: the connection is to a node of a Galera cluster.
_GALERA = "placement.galera"

# A Galera node applies the other nodes' writes asynchronously: read at
# once, a transaction could miss a write another service host has already
# acknowledged (a claim a DELETE must find, a provider change the
# per-process provider copy must follow, a generation a client read
# elsewhere). So every transaction on Galera first waits until its node has
# applied everything the cluster committed before it began (a causal read:
# one exchange in the cluster). Once per transaction is enough: a reader's
# snapshot is taken after the wait (its first table read), and a writer's
# READ COMMITTED statements see at least as much.
_CAUSAL_WAIT = "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1"


def _wait_for_cluster_writes(connection: sa.engine.Connection) -> None:
    """On a Galera node, the first statement of a transaction: see
    _CAUSAL_WAIT."""
    if connection.info.get(_GALERA):
        connection.exec_driver_sql(_CAUSAL_WAIT)


# engine -> the process whose connections its pool holds (see _connect);
# kept per engine, since several Database objects may share one
# (Database.primary_only).
_engine_pids: weakref.WeakKeyDictionary[sa.engine.Engine, int] = weakref.WeakKeyDictionary()
# the pools a forked child found its engines with: referenced, never closed
_inherited_pools: list[pool.Pool] = []
_pool_swap = threading.Lock()


def _connect(engine: sa.engine.Engine) -> sa.engine.Connection:
    """A connection of ``engine`` from this process's own pool.

    A process forked once the engine had connections (gunicorn --preload;
    uwsgi without lazy-apps, which runs no Python fork hooks) finds them in
    its pool: used from both processes, one server connection would carry
    two conversations. The child starts a pool of its own and leaves the
    inherited one alone, referenced, since closing its connections would
    end the parent's sessions (MySQL's QUIT). SQLite connections must not
    cross a fork at all (SQLite's lock bookkeeping is per process):
    ``deploy`` closes them before handing the application to the server."""
    pid = os.getpid()
    if _engine_pids.get(engine) != pid:
        with _pool_swap:
            known = _engine_pids.get(engine)
            if known is not None and known != pid:
                _inherited_pools.append(engine.pool)
                engine.dispose(close=False)
            _engine_pids[engine] = pid
    return engine.connect()


class Database:
    """One engine and the transactions made from it; with a ``replica``
    engine (``[placement_database] slave_connection``), read-only
    transactions come from that one."""

    def __init__(self, engine: sa.engine.Engine, max_retries: int = 5,
                 replica: sa.engine.Engine | None = None):
        self.engine = engine
        # What reader() reads from: the process's provider copy and its
        # kept answers follow this engine (placement.candidates.follower).
        self.reader_engine = replica if replica is not None else engine
        self.max_retries = max_retries
        self.is_sqlite = engine.dialect.name == "sqlite"
        self._sqlite_path = _sqlite_path(engine.url) if self.is_sqlite else None
        for known in {engine, self.reader_engine}:
            _engine_pids.setdefault(known, os.getpid())
        self._primary_only = (self if replica is None
                              else Database(engine, max_retries=max_retries))

    def primary_only(self) -> Database:
        """This database with its readers on the primary too: what a request
        that writes reads (a replica lags: a provider created a moment ago
        may not be there yet)."""
        return self._primary_only

    @contextlib.contextmanager
    def reader(self) -> Iterator[sa.engine.Connection]:
        """A read-only transaction that sees one snapshot throughout, so that
        e.g. a provider generation and its inventories read by separate
        statements belong together (writers run in READ COMMITTED)."""
        with _connect(self.reader_engine) as connection, connection.begin():
            if not self.is_sqlite:  # SQLite transactions are serializable anyway
                # A statement rather than the isolation_level execution
                # option, whose SET SESSION (MySQL) goes to the driver
                # untranslated: a connection killed since the pool checked
                # it must fail as a lost connection, to be read again.
                connection.exec_driver_sql(_REPEATABLE_READ)
                _wait_for_cluster_writes(connection)
            yield connection

    @contextlib.contextmanager
    def writer(self) -> Iterator[sa.engine.Connection]:
        # SQLite has one writer at a time; writers of every thread and
        # process queue instead of polling in SQLite's busy handler.
        with (sqlite_writers.turn(self._sqlite_path) if self.is_sqlite
              else contextlib.nullcontext()), \
                _connect(self.engine) as connection:
            if self.is_sqlite:
                connection.info["sqlite_begin"] = "BEGIN IMMEDIATE"
            committing = False
            try:
                with connection.begin():
                    _wait_for_cluster_writes(connection)
                    yield connection
                    committing = True
            except db_exc.DBConnectionError as error:
                if committing:
                    raise CommitOutcomeUnknown(error) from error
                raise

    def retry_on_db_error(self, function: Callable[..., T]) -> Callable[..., T]:
        """Run ``function`` again (in a new transaction) after a deadlock, a
        Galera certification failure (reported as a deadlock), a
        serialization failure or a lost connection. ``function`` must open
        its own transaction. Wrap it for one call (as ``write`` does): the
        retries the metrics count are the wrapper's."""
        return oslo_db_api.wrap_db_retry(
            max_retries=self.max_retries,
            retry_interval=RETRY_INTERVAL,
            max_retry_interval=MAX_RETRY_INTERVAL,
            retry_on_deadlock=True,
            retry_on_disconnect=True,
            exception_checker=is_serialization_failure,
        )(_counting_retries(function, self.max_retries))

    def dispose(self) -> None:
        for engine in {self.engine, self.reader_engine}:
            engine.dispose()


def _retry_reason(error: Exception) -> str:
    if isinstance(error, db_exc.DBDeadlock):
        return "deadlock"
    if isinstance(error, db_exc.DBConnectionError):
        return "disconnect"
    if is_serialization_failure(error):
        return "serialization_failure"
    return type(error).__name__


def _is_retried(error: Exception) -> bool:
    """Whether ``retry_on_db_error`` runs the function again after ``error``
    (as oslo.db's retry decorator, configured there, decides)."""
    return (isinstance(error, db_exc.DBDeadlock | db_exc.DBConnectionError
                       | db_exc.RetryRequest)
            or is_serialization_failure(error))


def _counting_retries(function: Callable[..., T], max_retries: int) -> Callable[..., T]:
    """``function`` (of one retried call), counting each run after the
    first in the metrics, as a retry, with why the previous run failed.
    Each failure that is retried is one WARNING line, without traceback:
    a deadlock (or a Galera certification failure) that a new transaction
    resolves is routine under concurrency, not an error."""
    failures: list[str] = []

    @functools.wraps(function)
    def attempt(*args, **kwargs) -> T:
        if failures:
            metrics.count_retry(failures[-1])
        try:
            return function(*args, **kwargs)
        except Exception as error:
            failures.append(_retry_reason(error))
            if _is_retried(error) and len(failures) <= max_retries:
                cause = error.inner_exc if isinstance(error, db_exc.RetryRequest) else error
                LOG.warning("Retrying %s in a new transaction (retry %d of %d) after a %s: %s",
                            getattr(function, "__qualname__", function), len(failures),
                            max_retries, failures[-1], summary(cause))
            raise

    return attempt


class _RetryLimitAsWarning(std_logging.Filter):
    """oslo.db logs a retried call that ran out of retries at ERROR with the
    traceback ("DB exceeded retry limit."), before the error goes on to the
    caller (the router answers 409 or 503 and logs it in one line): one
    WARNING line here, without traceback."""

    def filter(self, record: std_logging.LogRecord) -> bool:
        if record.msg == "DB exceeded retry limit." and record.exc_info:
            error = record.exc_info[1]
            record.levelno, record.levelname = std_logging.WARNING, "WARNING"
            record.msg, record.args = "DB exceeded retry limit: %s", (summary(error),)
            record.exc_info = record.exc_text = None
        return True


std_logging.getLogger(oslo_db_api.__name__).addFilter(_RetryLimitAsWarning())


def summary(error: Exception) -> str:
    """A database error in one line: the driver's message, without the
    statement and parameters SQLAlchemy appends (for log lines that repeat
    during an outage)."""
    return str(error).partition("\n")[0]


def wait_until_reachable(engine: sa.engine.Engine, attempts: int, interval: float) -> None:
    """Return once the database of ``engine`` accepts a connection: a
    service may start before its database server. Tries ``attempts`` times
    (-1: until it succeeds), ``interval`` seconds apart, saying so in the
    log; the last failure is raised."""
    attempt = 1
    while True:
        try:
            with engine.connect():
                return
        except db_exc.DBConnectionError as error:
            if 0 <= attempts <= attempt:
                LOG.error("The database %s cannot be reached; gave up after %d attempts",
                          engine.url, attempt)
                raise
            LOG.warning("The database %s cannot be reached (attempt %d of %s); trying "
                        "again in %s s: %s", engine.url, attempt,
                        "unlimited" if attempts < 0 else attempts, interval, summary(error))
            time.sleep(interval)
            attempt += 1


# Ids per IN (...) list: well below every backend's limit on bound parameters.
CHUNK = 500


def chunks(ids: Iterable, size: int = CHUNK) -> Iterator[list]:
    """``ids`` sorted, in lists of at most ``size``."""
    ids = sorted(ids)
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def bound_in(column: sa.ColumnElement, name: str, size: int) -> sa.ColumnElement[bool]:
    """``column IN (:<name>_0, ..., :<name>_<size - 1>)``, for SizedStatement."""
    return column.in_([sa.bindparam(parameter, type_=column.type)
                       for parameter in _parameter_names(name, size)])


def _size_class(length: int) -> int:
    """``length`` rounded up to a power of two (0 stays 0)."""
    return 1 << (length - 1).bit_length() if length else 0


class SizedStatement:
    """A statement with IN lists of bind parameters, built once per size of
    its lists. SQLAlchemy's expanding IN (one parameter for a whole list)
    renders the statement again at every execution, which cost as much as
    the rest of the execution of a small statement.

    ``build(**sizes)`` returns the statement for lists of these sizes,
    using ``bound_in(column, list name, size)``. Sizes are rounded up to a
    power of two, so that few statements are built; the rest of a list is
    filled with its last value, which an IN list does not mind."""

    def __init__(self, build: Callable[..., sa.Executable]):
        self._build = functools.lru_cache(maxsize=64)(build)

    def __call__(self, **lists: list) -> tuple[sa.Executable, dict[str, object]]:
        """The statement and its parameters for these lists (by name)."""
        sizes = {name: _size_class(len(values)) for name, values in lists.items()}
        parameters: dict[str, object] = {}
        for name, values in lists.items():
            padding = sizes[name] - len(values)
            parameters.update(zip(_parameter_names(name, sizes[name]),
                                  [*values, *values[-1:] * padding] if padding else values,
                                  strict=True))
        return self._build(**sizes), parameters

    def driver_rows(self, connection: sa.engine.Connection, **lists: list) -> list[tuple]:
        """``driver_rows`` of the statement for these lists: a list of 500
        parameters handled by SQLAlchemy at each execution costs as much as
        the database's work on it (the usages of a thousand providers, read
        by every candidates request)."""
        statement, parameters = self(**lists)
        return driver_rows(connection, statement, parameters)


def driver_rows(connection: sa.engine.Connection, statement: sa.Executable,
                parameters: dict[str, object]) -> list[tuple]:
    """The rows of ``statement`` (built once, e.g. functools.cache) with
    these parameters, as the driver's own tuples: for statements whose
    columns and parameters need no conversion (integers, strings). The
    statement is compiled once per dialect to the driver's own SQL, which
    skips what SQLAlchemy does at each execution: on a small read, such as
    a project's usages, that was a fifth of the request."""
    sql, names, defaults = _driver_sql(statement, connection.dialect)
    values = {**defaults, **parameters}
    return _fetched(connection.exec_driver_sql(
        sql, tuple([values[name] for name in names]) if names is not None
        else {name: values[name] for name in defaults}))


def plain_rows(connection: sa.engine.Connection, statement: sa.Executable,
               parameters: dict | None = None) -> list[tuple]:
    """The rows of ``statement`` as the driver's own tuples, for columns
    that need no conversion (integers, strings): SQLAlchemy rows cost
    several times more to make."""
    return _fetched(connection.execute(statement, parameters))


def _fetched(result: sa.engine.CursorResult) -> list[tuple]:
    """Every row of ``result`` as the driver gave it, the result closed."""
    try:
        return list(result.cursor.fetchall())  # a tuple of rows from some drivers
    finally:
        result.close()


@functools.lru_cache(maxsize=64)
def _driver_sql(statement: sa.Executable, dialect: sa.engine.Dialect
                ) -> tuple[str, tuple[str, ...] | None, dict[str, object]]:
    """``statement`` compiled for ``dialect``: its SQL, the names of its
    parameters in order (None for a dialect taking them by name) and every
    parameter's value as SQLAlchemy bound it (the statement's literals;
    None for the others)."""
    compiled = statement.compile(dialect=dialect)
    names = tuple(compiled.positiontup) if compiled.positional else None
    return compiled.string, names, dict(compiled.params)


@functools.lru_cache(maxsize=256)
def _parameter_names(name: str, size: int) -> tuple[str, ...]:
    """The bind parameter names bound_in gives a list of ``size``."""
    return tuple(f"{name}_{index}" for index in range(size))


def write(db: Database, function: Callable[..., T], *args, **kwargs) -> T:
    """``function(connection, *args, **kwargs)`` in a writer transaction,
    run again in a new transaction after a deadlock or a lost connection."""

    @db.retry_on_db_error
    def attempt() -> T:
        with db.writer() as connection:
            return function(connection, *args, **kwargs)

    return attempt()
