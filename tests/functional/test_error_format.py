"""Every error status the application gives, whichever layer answers it
(request body limit, authentication, routing, microversion, handlers,
fault wrapper, database), comes in the API's JSON error format:
``{"errors": [{"status", "title", "detail", "request_id", "code"}]}``,
``code`` once the request's microversion, from 1.23 on, is known."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import webob
from oslo_db import exception as db_exc

from placement import conf as placement_conf
from placement import deploy
from tests.db import FreshDatabase
from tests.fixtures import ops
from tests.fixtures.base import build_app
from tests.fixtures.silent_identity import keystone_authtoken

JSON = "application/json"
RP = "5a5c5d3e-0000-4000-8000-000000000001"


@pytest.fixture
def app() -> Iterator:
    database = FreshDatabase()
    application = build_app(database)
    assert _send(application, "POST", "/resource_providers",
                 {"name": "rp", "uuid": RP}).status_int == 200
    yield application
    database.close()


def _send(application, method: str, path: str, body: object = None, token: str | None = "admin",
          version: str = "latest", **headers: str) -> webob.Response:
    request = webob.Request.blank(path, method=method, headers={
        "OpenStack-API-Version": f"placement {version}", **headers})
    if token is not None:
        request.headers["X-Auth-Token"] = token
    if body is not None:
        request.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        request.headers.setdefault("Content-Type", JSON)
    return request.get_response(application)


def assert_json_error(response: webob.Response, status: int, has_code: bool) -> dict:
    assert response.status_int == status, response.text
    assert response.content_type == JSON, response.text
    (error,) = response.json["errors"]
    assert error["status"] == status
    assert error["title"] == response.status.split(" ", 1)[1]
    assert isinstance(error["detail"], str) and error["detail"]
    assert error["request_id"] == response.headers["x-openstack-request-id"]
    assert ("code" in error) is has_code, error
    return error


# (what, status, method, path, body, extra request arguments, code shown)
CASES = [
    ("malformed body", 400, "POST", "/resource_providers", b"{", {}, True),
    ("no token", 401, "GET", "/resource_providers", None, {"token": None}, False),
    ("policy", 403, "GET", "/resource_providers", None, {"token": "mere-user"}, True),
    ("unknown route", 404, "GET", "/nowhere", None, {}, True),
    ("unknown provider", 404, "GET", "/resource_providers/" + RP[:-1] + "2", None, {}, True),
    ("method", 405, "GET", "/allocations", None, {}, True),
    ("microversion", 406, "GET", "/resource_providers", None, {"version": "1.99"}, False),
    ("generation", 409, "PUT", f"/resource_providers/{RP}/traits",
     {"resource_provider_generation": 7, "traits": []}, {}, True),
    ("body too large", 413, "POST", "/resource_providers", b" " * (1024 * 1024 + 1), {}, False),
    ("media type", 415, "POST", "/resource_providers", b"{}", {"Content-Type": "text/plain"},
     True),
]


@pytest.mark.parametrize("what, status, method, path, body, extra, has_code", CASES,
                         ids=[case[0] for case in CASES])
def test_errors_are_json(app, what, status, method, path, body, extra, has_code):
    assert_json_error(_send(app, method, path, body, **extra), status, has_code)


def test_an_old_microversion_has_no_code(app):
    assert_json_error(_send(app, "GET", "/nowhere", version="1.22"), 404, False)


@pytest.mark.parametrize("raised, status", [
    (RuntimeError("bug"), 500),
    (db_exc.DBConnectionError("gone"), 503),
], ids=["unexpected", "database unavailable"])
def test_server_errors_are_json(app, monkeypatch, raised, status):
    def broken(request):
        raise raised

    ops.broken_route(monkeypatch, "/traits", "GET", broken)
    assert_json_error(_send(app, "GET", "/traits"), status, True)


def test_keystone_401_and_misconfiguration_503_are_json(tmp_path):
    """keystonemiddleware's own 401 (no identity service is asked for it),
    and the 503 of a service with no usable [keystone_authtoken] (keystone
    is the default strategy)."""
    identity = "http://127.0.0.1:9"  # the discard port: never asked here
    config = tmp_path / "placement.conf"
    config.write_text(keystone_authtoken(identity))
    database = FreshDatabase()

    def application(config_files: list[str]):
        return deploy.build_app(placement_conf.build_conf(config_files=config_files),
                                db=database.db)

    try:
        response = _send(application([str(config)]), "GET", "/resource_providers", token=None)
        assert "X-Auth-Token" in assert_json_error(response, 401, False)["detail"]
        assert response.headers["WWW-Authenticate"] == f'Keystone uri="{identity}/v3"'
        response = _send(application([]), "GET", "/resource_providers")
        assert "[keystone_authtoken]" in assert_json_error(response, 503, False)["detail"]
    finally:
        database.close()
