"""The application mounted under a prefix (WSGI SCRIPT_NAME), as behind
a web server at ``/placement``: the root answers on ``''`` and ``'/'``, and
every link and Location carries the mount point."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import webob

from tests.db import FreshDatabase
from tests.fixtures.base import build_app
from tests.fixtures.seed import create_provider

MOUNT = "/placement"


@pytest.fixture
def app() -> Iterator:
    database = FreshDatabase()
    yield build_app(database), database.db
    database.close()


def _call(app, method: str, path_info: str, body: dict | None = None,
          version: str = "1.0", token: str | None = "admin") -> webob.Response:
    request = webob.Request.blank(path_info, method=method, base_url="http://example.com")
    request.script_name = MOUNT
    request.path_info = path_info
    request.headers["OpenStack-API-Version"] = f"placement {version}"
    if token is not None:
        request.headers["X-Auth-Token"] = token
    if body is not None:
        request.content_type = "application/json"
        request.body = json.dumps(body).encode()
    return request.get_response(app)


def test_root_on_both_mount_paths(app):
    application, _ = app
    for path_info in ("", "/"):
        response = _call(application, "GET", path_info)
        assert response.status_int == 200, path_info
        assert response.json["versions"][0]["id"] == "v1.0"


def test_noauth2_exempts_only_the_slash_root(app):
    application, _ = app
    assert _call(application, "GET", "/", token=None).status_int == 200
    assert _call(application, "GET", "", token=None).status_int == 401


def test_resource_class_links_and_location_carry_the_mount(app):
    application, _ = app
    created = _call(application, "POST", "/resource_classes", {"name": "CUSTOM_MOUNTED"},
                    version="1.2")
    assert created.status_int == 201
    assert created.location == "http://example.com/placement/resource_classes/CUSTOM_MOUNTED"
    shown = _call(application, "GET", "/resource_classes/CUSTOM_MOUNTED", version="1.2")
    assert shown.json["links"] == [
        {"rel": "self", "href": "/placement/resource_classes/CUSTOM_MOUNTED"}]
    put = _call(application, "PUT", "/resource_classes/CUSTOM_PUT", version="1.7")
    assert put.status_int == 201
    assert put.location == "http://example.com/placement/resource_classes/CUSTOM_PUT"


def test_inventory_location_carries_the_mount(app):
    application, db = app
    provider_uuid = str(uuid.uuid4())
    with db.writer() as connection:
        create_provider(connection, provider_uuid, "mounted")
    created = _call(application, "POST", f"/resource_providers/{provider_uuid}/inventories",
                    {"resource_class": "VCPU", "total": 4})
    assert created.status_int == 201
    assert created.location == (
        f"http://example.com/placement/resource_providers/{provider_uuid}/inventories/VCPU")
