"""A write that loses a race and is retried logs one WARNING line (no
ERROR, no traceback): a deadlock, or a Galera certification failure (which
the driver reports as a deadlock), resolved by a new transaction is routine."""

from __future__ import annotations

import logging

import sqlalchemy as sa
from oslo_db import exception as db_exc

from placement.db import api as db_api
from placement.db import tables

providers = tables.resource_providers


def _insert(connection: sa.engine.Connection, attempts: list[int]) -> int:
    """Reads the row count (a retry must read it again, in a new
    transaction), inserts a provider, and loses to a deadlock the first
    time."""
    seen = connection.scalar(sa.select(sa.func.count()).select_from(providers))
    attempts.append(seen)
    connection.execute(providers.insert(), [
        {"uuid": f"{len(attempts):036d}", "name": f"rp{len(attempts)}", "generation": 0}])
    if len(attempts) == 1:
        raise db_exc.DBDeadlock(Exception(
            "(1213, 'WSREP detected deadlock/conflict and aborted the transaction. "
            "Try restarting the transaction')"))
    return seen


def _logged(caplog) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_a_deadlock_resolved_by_a_retry_is_one_warning_line(database, caplog):
    attempts: list[int] = []
    with caplog.at_level(logging.DEBUG):
        assert db_api.write(database.db, _insert, attempts) == 0

    # The retry ran in a new transaction: the first one's insert was rolled
    # back, and the count read again.
    assert attempts == [0, 0]
    with database.db.reader() as connection:
        assert connection.scalar(sa.select(sa.func.count()).select_from(providers)) == 1
    logged = _logged(caplog)
    assert [(record.name, record.levelname) for record in logged] == [
        ("placement.db.api", "WARNING")]
    (record,) = logged
    assert record.exc_info is None
    message = record.getMessage()
    assert "\n" not in message
    assert "deadlock" in message and "retry 1 of" in message


def test_a_deadlock_every_time_logs_no_error_nor_traceback(database, caplog, monkeypatch):
    monkeypatch.setattr(database.db, "max_retries", 1)
    monkeypatch.setattr(db_api, "RETRY_INTERVAL", 0)

    def always_deadlocks(connection: sa.engine.Connection) -> None:
        raise db_exc.DBDeadlock(Exception("(1213, 'Deadlock found when trying to get lock')"))

    with caplog.at_level(logging.DEBUG):
        try:
            db_api.write(database.db, always_deadlocks)
        except db_exc.DBDeadlock:
            pass
        else:
            raise AssertionError("the deadlock was not raised")

    logged = _logged(caplog)
    assert [record.levelname for record in logged] == ["WARNING", "WARNING"]
    assert all(record.exc_info is None and "\n" not in record.getMessage()
               for record in logged)
    assert logged[1].getMessage().startswith("DB exceeded retry limit: ")
