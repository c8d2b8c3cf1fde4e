"""placement.db.api under database trouble: pool options, deadlocks and lost
connections, on real servers."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from oslo_db import exception as db_exc

from placement import conf as placement_conf
from placement.db import api as db_api
from placement.db import tables
from tests import db as test_db

providers = tables.resource_providers


def test_pool_options_of_the_configuration_are_honoured(backend):
    conf = placement_conf.build_conf(config_files=[])
    for option, value in (("max_pool_size", 3), ("max_overflow", 7), ("pool_timeout", 9),
                          ("connection_recycle_time", 11), ("pool_pre_ping", False)):
        conf.set_override(option, value, group="placement_database")
    database = test_db.FreshDatabase(backend)
    engine = db_api.create_engine(database.url, conf.placement_database)
    try:
        assert engine.pool.size() == 3
        assert engine.pool._max_overflow == 7
        assert engine.pool._timeout == 9
        assert engine.pool._recycle == 11
        assert engine.pool._pre_ping is False
    finally:
        engine.dispose()
        database.close()


def test_without_configuration_the_option_defaults_apply(backend):
    database = test_db.FreshDatabase(backend)
    try:
        assert database.db.engine.pool.size() == 5
        # a SQLite file has no server to restart: nothing to ping
        assert database.db.engine.pool._pre_ping is (backend != "sqlite")
    finally:
        database.close()


@pytest.fixture
def server_database(server_backend):
    fresh = test_db.FreshDatabase(server_backend)
    with fresh.db.writer() as connection:
        connection.execute(providers.insert(), [
            {"id": 1, "uuid": "1" * 36, "name": "one", "generation": 0},
            {"id": 2, "uuid": "2" * 36, "name": "two", "generation": 0},
        ])
    yield fresh
    fresh.close()


def _bump(connection: sa.engine.Connection, provider_id: int) -> None:
    connection.execute(providers.update().where(providers.c.id == provider_id).values(
        generation=providers.c.generation + 1))


def _generations(database: db_api.Database) -> list[int]:
    with database.reader() as connection:
        return list(connection.scalars(sa.select(providers.c.generation).order_by(providers.c.id)))


def test_a_deadlock_is_retried_in_a_new_transaction(server_database):
    database = server_database.db
    both_hold_one_lock = threading.Barrier(2, timeout=30)
    attempts = {1: 0, 2: 0}
    errors = []

    def lock_both(first: int, second: int) -> None:
        attempts[first] += 1
        with database.writer() as connection:
            _bump(connection, first)
            if attempts[first] == 1:
                both_hold_one_lock.wait()
            _bump(connection, second)

    def run(first: int, second: int) -> None:
        try:
            database.retry_on_db_error(lock_both)(first, second)
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=pair) for pair in ((1, 2), (2, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    # The server chose one victim, which ran again; each transaction's two
    # updates are both there, once.
    assert sorted(attempts.values()) == [1, 2]
    assert _generations(database) == [2, 2]


def test_a_connection_lost_inside_a_transaction_is_retried(server_database):
    database = server_database.db
    attempts = []

    def bump_once(provider_id: int) -> None:
        attempts.append(provider_id)
        with database.writer() as connection:
            _bump(connection, provider_id)
            if len(attempts) == 1:
                assert test_db.kill_connections(server_database.url) >= 1
            _bump(connection, provider_id)

    database.retry_on_db_error(bump_once)(1)

    assert len(attempts) == 2
    # The killed transaction left nothing; the retry did both updates.
    assert _generations(database) == [2, 0]


def test_pooled_connections_killed_while_idle_are_replaced(server_database):
    database = server_database.db
    assert _generations(database) == [0, 0]
    assert test_db.kill_connections(server_database.url) >= 1
    # pool_pre_ping notices the dead pooled connection and opens a new one.
    assert _generations(database) == [0, 0]


def test_without_retries_a_lost_connection_is_a_connection_error(server_database):
    database = server_database.db
    with pytest.raises(db_exc.DBConnectionError):
        with database.writer() as connection:
            _bump(connection, 1)
            test_db.kill_connections(server_database.url)
            _bump(connection, 1)
    assert _generations(database) == [0, 0]


@pytest.mark.backend("postgresql")
def test_a_serialization_failure_is_retried():
    fresh = test_db.FreshDatabase("postgresql")
    database = fresh.db
    with database.writer() as connection:
        connection.execute(providers.insert(), [
            {"id": 1, "uuid": "1" * 36, "name": "one", "generation": 0}])
    attempts = []

    def bump_under_repeatable_read() -> None:
        attempts.append(True)
        with database.engine.connect() as connection:
            connection = connection.execution_options(isolation_level="REPEATABLE READ")
            with connection.begin():
                connection.scalar(sa.select(providers.c.generation))  # takes the snapshot
                if len(attempts) == 1:
                    with database.writer() as other:
                        _bump(other, 1)
                _bump(connection, 1)

    try:
        database.retry_on_db_error(bump_under_repeatable_read)()
        assert len(attempts) == 2
        assert _generations(database) == [2]
    finally:
        fresh.close()


def test_a_reader_sees_one_snapshot_while_writers_commit(server_database):
    database = server_database.db
    with database.reader() as connection:
        before = connection.scalar(sa.select(providers.c.generation).where(providers.c.id == 1))
        with database.writer() as writer:
            _bump(writer, 1)
        after = connection.scalar(sa.select(providers.c.generation).where(providers.c.id == 1))
    assert before == after == 0
    assert _generations(database) == [1, 0]


def test_a_writer_sees_what_others_committed_meanwhile(server_database):
    database = server_database.db
    with database.writer() as connection:
        before = connection.scalar(sa.select(providers.c.generation).where(providers.c.id == 1))
        with database.writer() as other:
            _bump(other, 2)
        after = connection.scalar(sa.select(providers.c.generation).where(providers.c.id == 2))
    assert (before, after) == (0, 1)


def test_a_connection_lost_during_commit_is_not_retried(server_database):
    database = server_database.db
    attempts = []

    def kill_before_the_commit_reaches_the_server(_connection) -> None:
        test_db.kill_connections(server_database.url)

    def bump_once() -> None:
        attempts.append(True)
        with database.writer() as connection:
            _bump(connection, 1)
            sa.event.listen(connection, "commit", kill_before_the_commit_reaches_the_server)

    with pytest.raises(db_api.CommitOutcomeUnknown):
        database.retry_on_db_error(bump_once)()
    # Whether a lost COMMIT happened is unknown to the service; it did not
    # run the writes again. (Here the kill came first: nothing was written.)
    assert len(attempts) == 1
    assert _generations(database) == [0, 0]
