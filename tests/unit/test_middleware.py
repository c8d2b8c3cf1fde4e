"""The middleware stack of ``deploy.build_app`` around a dispatcher that
misbehaves on purpose: the fault wrapper, proxy headers and noauth2."""

from __future__ import annotations

import json

import pytest
import webob

from placement import router
from tests.db import FreshDatabase
from tests.fixtures.base import build_app

SECRET = "password=hunter2 at db.example.com"


@pytest.fixture
def database():
    # The backend the test runs on (see the backend marker), not a parameter.
    database = FreshDatabase()
    yield database
    database.close()


def call(application, path, **kwargs):
    headers = {"X-Auth-Token": "admin", **kwargs.pop("headers", {})}
    return webob.Request.blank(path, headers=headers, **kwargs).get_response(application)


def test_unexpected_errors_become_a_json_500_that_leaks_nothing(database, monkeypatch):
    def explode(self, request):
        raise RuntimeError(SECRET)

    monkeypatch.setattr(router.Dispatcher, "__call__", explode)
    response = call(build_app(database), "/resource_classes",
                    headers={"OpenStack-API-Version": "placement 1.23"})
    assert response.status_int == 500
    assert response.content_type == "application/json"
    error = json.loads(response.body)["errors"][0]
    assert error["title"] == "Internal Server Error"
    assert error["code"] == "placement.undefined_code"
    assert error["request_id"] == response.headers["x-openstack-request-id"]
    assert "hunter2" not in response.text and "RuntimeError" not in response.text


def location_of_new_class(application, headers):
    response = call(application, "/resource_classes/CUSTOM_PROXIED", method="PUT",
                    headers={"OpenStack-API-Version": "placement 1.7", **headers})
    assert response.status_int == 201
    return response.headers["location"]


PROXY_HEADERS = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "placement.example.com"}


def test_proxy_headers_ignored_by_default(database):
    location = location_of_new_class(build_app(database), PROXY_HEADERS)
    assert location == "http://localhost/resource_classes/CUSTOM_PROXIED"


def test_proxy_headers_honoured_when_enabled(database):
    application = build_app(database, {("oslo_middleware", "enable_proxy_headers_parsing"): True})
    location = location_of_new_class(application, PROXY_HEADERS)
    assert location == "https://placement.example.com/resource_classes/CUSTOM_PROXIED"


@pytest.mark.parametrize("token", [None, ""])
def test_noauth2_without_token_is_a_json_401_naming_the_header(database, token):
    headers = {} if token is None else {"X-Auth-Token": token}
    response = webob.Request.blank("/resource_classes", headers=headers).get_response(
        build_app(database))
    assert response.status_int == 401
    error = json.loads(response.body)["errors"][0]
    assert (error["status"], error["title"]) == (401, "Unauthorized")
    assert "X-Auth-Token" in error["detail"]
    assert error["request_id"] == response.headers["x-openstack-request-id"]
    assert "openstack-api-version" not in response.headers
    assert response.headers["x-openstack-request-id"].startswith("req-")


def test_incoming_request_id_is_not_echoed(database):
    response = call(build_app(database), "/", headers={"X-OpenStack-Request-ID": "req-mine"})
    assert response.headers["x-openstack-request-id"] != "req-mine"
