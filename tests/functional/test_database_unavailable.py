"""The API while its database server cannot be reached or drops
connections, in-process on the servers of the run (nothing is stopped here;
test_database_outage.py stops servers of its own under load): 503 with
``Retry-After`` and the ``placement.database.unavailable`` code, never 500;
a read whose connection is cut is read again; a write whose connection is
cut before its commit is written again; a connection lost during the
commit is a 503 that says the outcome is unknown."""

from __future__ import annotations

import types
import uuid

import pytest
import sqlalchemy as sa
import webob

from placement import errors
from placement.db import api as db_api
from tests import db as test_db
from tests.fixtures import ops
from tests.fixtures.base import build_app

ADMIN = {"X-Auth-Token": "admin"}


def _request(app, path: str, method: str = "GET", version: str = "1.39",
             body: dict | None = None) -> webob.Response:
    request = webob.Request.blank(path, method=method, headers={
        **ADMIN, "OpenStack-API-Version": f"placement {version}"})
    if body is not None:
        request.content_type = "application/json"
        request.json = body
    return request.get_response(app)


@pytest.fixture
def unreachable_app(server_backend):
    """The application on a database server that is not there: the run's
    server URL with a port nobody listens on."""
    url = sa.engine.make_url(test_db.SERVER_URLS[server_backend]).set(
        port=ops.free_port(), database="placement").render_as_string(hide_password=False)
    # Writes are retried once, quickly, before the answer.
    db = db_api.Database(db_api.create_engine(url), max_retries=1)
    yield build_app(types.SimpleNamespace(url=url, db=db))
    db.dispose()


def assert_database_unavailable(response: webob.Response, version: str = "1.39") -> dict:
    assert response.status_int == 503, response.text
    assert response.headers["Retry-After"] == str(errors.RETRY_AFTER_SECONDS)
    assert response.headers["openstack-api-version"] == f"placement {version}"
    assert response.content_type == "application/json"
    error = response.json["errors"][0]
    assert error["status"] == 503
    assert error["title"] == "Service Unavailable"
    assert error["request_id"] == response.headers["x-openstack-request-id"]
    return error


@pytest.mark.parametrize("version, has_code", [("1.22", False), ("1.23", True)])
def test_reads_get_503_with_retry_after(unreachable_app, version, has_code):
    response = _request(unreachable_app, "/resource_providers", version=version)
    error = assert_database_unavailable(response, version)
    assert "The database cannot be reached" in error["detail"]
    assert error.get("code") == (errors.DATABASE_UNAVAILABLE if has_code else None)


def test_writes_get_503_after_their_retries(unreachable_app):
    response = _request(unreachable_app, "/resource_providers", method="POST",
                        body={"name": "nowhere"})
    error = assert_database_unavailable(response)
    assert error["code"] == errors.DATABASE_UNAVAILABLE


def test_the_health_check_fails_meanwhile_and_the_version_document_is_served(unreachable_app):
    assert _request(unreachable_app, "/healthcheck").status_int == 503
    response = _request(unreachable_app, "/")
    assert response.status_int == 200
    assert response.json["versions"][0]["max_version"] == "1.39"


class ConnectionCutter:
    """Kills the server's connections to the database the first time a
    statement matching ``pattern`` (or, with ``at_commit``, a commit) is
    about to reach it: the statement then meets a dead connection."""

    def __init__(self, database: test_db.FreshDatabase, pattern: str = "",
                 at_commit: bool = False):
        self.database = database
        self.pattern = pattern
        self.cuts = 0
        self.matching_statements = 0
        engine = database.db.engine
        if at_commit:
            sa.event.listen(engine, "commit", self._on_commit)
        else:
            sa.event.listen(engine, "before_cursor_execute", self._on_statement)

    def _cut(self) -> None:
        if self.cuts == 0:
            self.cuts += 1
            assert test_db.kill_connections(self.database.url) >= 1

    def _on_statement(self, _connection, _cursor, statement, *_args) -> None:
        if self.pattern in statement:
            self.matching_statements += 1
            self._cut()

    def _on_commit(self, _connection) -> None:
        self._cut()


@pytest.fixture
def served(server_backend):
    """A fresh database, the application on it, and a provider with VCPU."""
    database = test_db.FreshDatabase(server_backend)
    app = build_app(database)
    provider = str(uuid.uuid4())
    assert _request(app, "/resource_providers", method="POST",
                    body={"name": "cut-off", "uuid": provider}).status_int == 200
    assert _request(app, f"/resource_providers/{provider}/inventories", method="PUT", body={
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 8}}}).status_int == 200
    yield types.SimpleNamespace(database=database, app=app, provider=provider)
    database.close()


def _claim(served, consumer: str) -> webob.Response:
    return _request(served.app, f"/allocations/{consumer}", method="PUT", body={
        "allocations": {served.provider: {"resources": {"VCPU": 1}}},
        "project_id": "project", "user_id": "user", "consumer_generation": None,
        "consumer_type": "INSTANCE"})


def _held(served, consumer: str) -> dict:
    response = _request(served.app, f"/allocations/{consumer}")
    assert response.status_int == 200
    return response.json["allocations"]


def test_a_read_whose_connection_is_cut_is_read_again(served):
    cutter = ConnectionCutter(served.database, "FROM resource_providers")
    response = _request(served.app, f"/resource_providers/{served.provider}")
    assert response.status_int == 200, response.text
    assert response.json["uuid"] == served.provider
    # The cut statement, then the same read on a new connection.
    assert (cutter.cuts, cutter.matching_statements) == (1, 2)


def test_a_write_whose_connection_is_cut_before_the_commit_is_written_again(served):
    consumer = str(uuid.uuid4())
    assert _claim(served, consumer).status_int == 204
    cutter = ConnectionCutter(served.database, "DELETE FROM allocations")
    response = _request(served.app, f"/allocations/{consumer}", method="DELETE")
    assert response.status_int == 204, response.text
    assert (cutter.cuts, cutter.matching_statements) == (1, 2)
    assert _held(served, consumer) == {}


def test_a_connection_lost_during_the_commit_is_a_503_that_says_so(served):
    consumer = str(uuid.uuid4())
    cutter = ConnectionCutter(served.database, at_commit=True)
    error = assert_database_unavailable(_claim(served, consumer))
    assert cutter.cuts == 1
    assert error["code"] == errors.DATABASE_UNAVAILABLE
    assert "may or may not have been made" in error["detail"]
    # Not run again: the claim is there once or not at all (here the kill
    # came before the commit reached the server).
    assert _held(served, consumer) == {}
