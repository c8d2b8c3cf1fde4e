"""``/healthcheck``: answered before authentication, 200 while the database
can be read, 503 while it cannot, back to 200 when it returns."""

from __future__ import annotations

import json
import os

import pytest
import webob

from tests.db import FreshDatabase
from tests.fixtures.base import build_app


@pytest.fixture
def database():
    # The backend the test runs on (see the backend marker), not a parameter.
    database = FreshDatabase()
    yield database
    database.close()


def probe(application, method="GET", accept="application/json", path="/healthcheck"):
    return webob.Request.blank(path, method=method, headers={"Accept": accept}).get_response(
        application)


def test_healthy_without_credentials(database):
    application = build_app(database)
    response = probe(application)
    assert response.status_int == 200
    assert json.loads(response.body) == {"detailed": False, "reasons": ["OK"]}
    assert response.headers["x-openstack-request-id"].startswith("req-")
    assert probe(application, accept="text/plain").body == b"OK"
    assert probe(application, method="HEAD").status_int == 204


@pytest.mark.backend("sqlite")  # moves the SQLite file away
def test_unhealthy_while_the_database_is_gone(database):
    application = build_app(database)
    moved = database.path + ".moved"
    os.rename(database.path, moved)
    try:
        response = probe(application)
        assert response.status_int == 503
        assert json.loads(response.body)["reasons"] == ["The database cannot be reached."]
        assert probe(application, method="HEAD").status_int == 503
        # The probe must not leave an empty database in its place.
        assert not os.path.exists(database.path)
    finally:
        os.rename(moved, database.path)
    assert probe(application).status_int == 200


@pytest.mark.backend("sqlite")  # moves the SQLite file away
def test_details_only_when_configured(database):
    application = build_app(database, {("healthcheck", "detailed"): True})
    os.rename(database.path, database.path + ".moved")
    try:
        body = json.loads(probe(application).body)
    finally:
        os.rename(database.path + ".moved", database.path)
    assert body["detailed"] is True
    assert body["reasons"][0]["reason"] == "The database cannot be reached."
    assert body["reasons"][0]["details"] == "OperationalError"


def test_operator_backends_are_honoured(database, tmp_path):
    disable_file = tmp_path / "disabled"
    application = build_app(database, {("healthcheck", "backends"): ["disable_by_file"],
                                   ("healthcheck", "disable_by_file_path"): str(disable_file)})
    assert probe(application).status_int == 200
    disable_file.write_text("draining")
    assert probe(application).status_int == 503


def test_other_methods_and_paths_go_to_the_api(database):
    application = build_app(database)
    assert probe(application, method="POST").status_int == 401
    assert probe(application, path="/healthcheck/more").status_int == 401
