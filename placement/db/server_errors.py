"""How database errors are told apart as they happen (the engine's
``handle_error`` listeners, see ``placement.db.api.create_engine``): a
server gone, going or not up yet is a lost connection, and every error is
counted in the metrics."""

from __future__ import annotations

import sqlalchemy as sa

from placement import metrics


def count_database_error(context: sa.engine.ExceptionContext) -> None:
    """A ``handle_error`` listener: counts the error in the metrics by the
    oslo.db exception it became (or the driver's, untranslated). A failed
    pool pre-ping is not counted: the pool replaces the connection and
    nobody sees an error (``is_pre_ping``: SQLAlchemy 2.0.5 and later)."""
    if not getattr(context, "is_pre_ping", False):
        error = context.chained_exception or context.original_exception
        metrics.count_database_error(type(error).__name__)


# Errors of a server that is gone, going or not up yet, which neither
# oslo.db nor the dialects all recognize as lost connections: MariaDB/MySQL
# error numbers (shutdown in progress, connection killed, cannot connect,
# server gone away, lost during query) and PostgreSQL SQLSTATEs (class 08,
# connection exceptions; administrator or crash shutdown; cannot connect
# now, as while the server starts or stops).
_MYSQL_SERVER_GONE = frozenset({1053, 1927, 2002, 2003, 2006, 2013,
                                # a Galera node not (or no longer) part of
                                # the cluster's primary component: "WSREP has
                                # not yet prepared node for application use"
                                1047})
_POSTGRESQL_SERVER_GONE = ("08", "57P01", "57P02", "57P03")
# A Galera node that just rejoined after a crash may answer a statement
# firing a trigger with a parse error of the trigger's body (error 1064,
# "Trigger ... has an error in its body", or "Unknown trigger ...") until
# its triggers are usable again: a node not up yet, as the errors above.
_MYSQL_PARSE_ERROR = 1064
_MYSQL_TRIGGER_NOT_READY = "has an error in its body"


def _is_server_gone(dialect: sa.engine.Dialect, error: BaseException) -> bool:
    driver_errors = dialect.loaded_dbapi
    if dialect.name == "mysql":
        if not (isinstance(error, driver_errors.Error) and error.args):
            return False
        number, text = error.args[0], str(error.args[-1])
        return number in _MYSQL_SERVER_GONE or (
            number == _MYSQL_PARSE_ERROR and _MYSQL_TRIGGER_NOT_READY in text)
    if dialect.name == "postgresql" and isinstance(error, driver_errors.OperationalError):
        # psycopg's own connection failures (refused, closed by the
        # server) carry no SQLSTATE.
        sqlstate = getattr(error, "sqlstate", None)
        return sqlstate is None or sqlstate.startswith(_POSTGRESQL_SERVER_GONE)
    return False


def mark_server_gone_as_disconnect(context: sa.engine.ExceptionContext) -> None:
    """A ``handle_error`` listener: such errors are disconnects, so that
    oslo.db raises DBConnectionError (retried, then answered 503) and the
    pool drops every connection to the server."""
    if _is_server_gone(context.dialect, context.original_exception):
        context.is_disconnect = True
