"""Errors produced outside the handlers' own checks: an unexpected
exception (the fault layer's 500) and the headers each layer's errors
carry, through the whole application as deployed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import webob

from placement import router
from tests.db import FreshDatabase
from tests.fixtures.base import build_app


@pytest.fixture
def app() -> Iterator:
    database = FreshDatabase()
    yield build_app(database)
    database.close()


def _broken_handler(request: webob.Request) -> webob.Response:
    raise RuntimeError("secret internal detail")


def _get(app, path: str, **headers: str) -> webob.Response:
    request = webob.Request.blank(path, headers={"X-Auth-Token": "admin", **headers})
    return request.get_response(app)


@pytest.mark.parametrize("version, has_code", [("1.22", False), ("1.23", True)])
def test_unexpected_exception_is_a_json_500(app, monkeypatch, version, has_code):
    monkeypatch.setitem(router.ROUTES["/traits"], "GET", _broken_handler)
    response = _get(app, "/traits", **{"OpenStack-API-Version": f"placement {version}"})
    assert response.status_int == 500
    assert response.content_type == "application/json"
    error = response.json["errors"][0]
    assert error["status"] == 500
    assert error["title"] == "Internal Server Error"
    assert error["request_id"] == response.headers["x-openstack-request-id"]
    assert ("code" in error) is has_code
    assert "secret internal detail" not in response.text


def test_unexpected_exception_as_html(app, monkeypatch):
    monkeypatch.setitem(router.ROUTES["/traits"], "GET", _broken_handler)
    response = _get(app, "/traits", Accept="text/html")
    assert response.status_int == 500
    assert response.content_type == "text/html"
    assert "secret internal detail" not in response.text
