"""A process forked after the database was used (gunicorn --preload, uwsgi
without lazy-apps) works with connections of its own and leaves its
parent's alone; the SQLite writers of different processes take turns."""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Callable

import sqlalchemy as sa

from placement import deploy
from placement.candidates import follower
from placement.db import api as db_api
from placement.db import sqlite_writers, tables
from tests.fixtures import provider_api
from tests.fixtures.base import make_conf
from tests.fixtures.seed import create_provider, provider_with

_SESSION_ID = {
    "mysql": "SELECT CONNECTION_ID()",
    "postgresql": "SELECT pg_backend_pid()",
}


def _session(db: db_api.Database) -> list:
    """Which connection a reader gets: the driver's connection object and,
    on a database server, the server's session."""
    with db.reader() as connection:
        statement = _SESSION_ID.get(db.engine.dialect.name)
        server_session = connection.scalar(sa.text(statement)) if statement else None
        return [id(connection.connection.dbapi_connection), server_session]


def _in_child(db: db_api.Database, provider_uuid: str) -> list:
    """Run in a forked child: write a provider, say which session wrote."""
    with db.writer() as connection:
        create_provider(connection, provider_uuid, "created-by-the-child")
    return _session(db)


def _in_forked_child(work: Callable[[], object]) -> object:
    """What ``work`` returns (JSON) when run in a forked child process."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child reports through the pipe)
        status = 1
        try:
            os.close(read_end)
            with os.fdopen(write_end, "w") as report:
                json.dump(work(), report)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as report:
        reported = json.loads(report.read() or "null")
    _, wait_status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 0
    return reported


def test_a_forked_process_opens_its_own_connections(database):
    db = database.db
    parent_session = _session(db)
    provider_uuid = str(uuid.uuid4())
    child_session = _in_forked_child(lambda: _in_child(db, provider_uuid))
    assert child_session[0] != parent_session[0]
    if parent_session[1] is not None:
        assert child_session[1] != parent_session[1]
    # The parent's connection still works, as the same session: the child
    # neither used nor closed it.
    assert _session(db) == parent_session
    with db.reader() as connection:
        assert connection.scalar(sa.select(tables.resource_providers.c.name).where(
            tables.resource_providers.c.uuid == provider_uuid)) == "created-by-the-child"


def test_workers_start_with_the_provider_copy_of_their_server(database, monkeypatch):
    """Built to serve, the application reads the provider copy before the
    server forks: a worker's first request reads only the providers changed
    since, and sees them."""
    with database.db.writer() as connection:
        provider_with(connection, str(uuid.uuid4()), "there-at-start-up", VCPU=4)
    application = deploy.build_app(make_conf(database), db=database.db,
                                   load_provider_copy=True)
    assert database.db.engine.pool.checkedin() == 0  # nothing crosses the fork
    with database.db.writer() as connection:
        created_since = provider_with(connection, str(uuid.uuid4()), "created-since", VCPU=4)
    loaded: list = []
    reading = follower._load

    def recording(connection, ids):
        loaded.append(None if ids is None else sorted(ids))
        return reading(connection, ids)

    def first_request() -> dict:
        monkeypatch.setattr(follower, "_load", recording)
        status, body = provider_api.in_process(application)(
            "GET", "/resource_providers?resources=VCPU:1", None, provider_api.MICROVERSION)
        return {"status": status, "names": sorted(rp["name"] for rp in body["resource_providers"]),
                "loaded": loaded}

    assert _in_forked_child(first_request) == {
        "status": 200, "names": ["created-since", "there-at-start-up"],
        "loaded": [[created_since]]}


def test_the_database_of_a_new_application_holds_no_connection(database):
    """What the server forks its workers from: the start-up migration's
    connections are closed, so that no worker inherits one."""
    conf = make_conf(database, {("placement_database", "sync_on_startup"): True})
    db = deploy.database_from_conf(conf)
    try:
        assert db.engine.pool.checkedin() == 0
        assert db.engine.pool.checkedout() == 0
    finally:
        db.dispose()


def test_a_writer_turn_holds_off_the_writers_of_other_processes(tmp_path):
    database_path = str(tmp_path / "placement.sqlite")
    with sqlite_writers.turn(database_path):  # the parent wrote before the fork
        pass
    in_turn_read, in_turn_write = os.pipe()
    go_read, go_write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child reports through the pipes)
        status = 1
        try:
            with sqlite_writers.turn(database_path):
                os.write(in_turn_write, b"in")
                os.read(go_read, 2)
            status = 0
        finally:
            os._exit(status)
    assert os.read(in_turn_read, 2) == b"in"
    lock_file = os.open(sqlite_writers.lock_path(database_path), os.O_RDONLY)
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held_off = False
    except BlockingIOError:
        held_off = True
    finally:
        os.close(lock_file)
        os.write(go_write, b"go")
    _, wait_status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 0
    assert held_off
    with sqlite_writers.turn(database_path):  # and the parent's turn comes
        pass
    for descriptor in (in_turn_read, in_turn_write, go_read, go_write):
        os.close(descriptor)
