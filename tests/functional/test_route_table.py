"""Adding a route is one entry of the route table (and its handler): the
entry alone makes the service serve it within its microversions, ask its
policy rule (whose default the policy defaults gain), and list it in the
OpenAPI document and in the API reference."""

from __future__ import annotations

import pytest
import webob

from placement import openapi, policies, router, versions, wsgi_util
from placement.endpoint import ADMIN, Endpoint, Operation, Policy, ok, protected, since
from placement.handlers import openapi as openapi_handler
from placement.schemas.responses import Variant
from tests.db import FreshDatabase
from tests.fixtures import ops
from tests.fixtures.base import build_app

WIDGETS = [{"min_version": "1.30", "max_version": None,
            "schema": {"type": "object", "properties": {"widgets": {"type": "array"}},
                       "required": ["widgets"], "additionalProperties": False}}]


def list_widgets(request: webob.Request) -> webob.Response:
    wsgi_util.authorize(request)
    return wsgi_util.json_response(request, {"widgets": []})


def _table() -> dict:
    """The service's route table and one entry more: GET /widgets from
    1.30, admin only."""
    routes = {**router.ROUTES, "/widgets": {"GET": Endpoint(list_widgets, Operation(
        "List widgets.", (ok([Variant(**variant) for variant in WIDGETS]),),
        available=since(versions.RESHAPER), errors=protected(),
        policy=Policy("placement:widgets:list", ADMIN, "List the widgets.")))}}
    # the document describes the table it is served from
    routes["/openapi.json"] = {"GET": Endpoint(openapi_handler.document_handler(routes),
                                               router.ROUTES["/openapi.json"]["GET"].operation)}
    return routes


@pytest.fixture
def app():
    database = FreshDatabase()
    yield build_app(database, routes=_table())
    database.close()


def _get(app, path: str, version: str, token: str = "admin") -> webob.Response:
    return webob.Request.blank(path, headers={
        "X-Auth-Token": token, "OpenStack-API-Version": f"placement {version}"}).get_response(app)


def test_the_entry_is_served_within_its_microversions(app):
    assert _get(app, "/widgets", "1.30").json == {"widgets": []}
    assert _get(app, "/widgets", "1.29").status_int == 404
    # the service's own table does not have it
    assert "/widgets" not in router.ROUTES


def test_the_entry_asks_its_policy_rule(app):
    """Its default (admin only) comes with the table: a member is refused."""
    response = _get(app, "/widgets", "1.30", token="member:project")
    assert response.status_int == 403
    assert "placement:widgets:list" in response.json["errors"][0]["detail"]


def test_the_entry_is_in_the_policy_defaults():
    rules = {rule.name: rule for rule in policies.api_rules(_table())}
    widgets = rules["placement:widgets:list"]
    assert (widgets.check_str, widgets.operations) == (ADMIN, [{"method": "GET",
                                                                "path": "/widgets"}])
    assert "placement:widgets:list" not in {rule.name for rule in policies.list_rules()}


def test_the_entry_is_in_the_openapi_document(app):
    document = _get(app, "/openapi.json", "1.0").json
    operation = document["paths"]["/widgets"]["get"]
    assert operation["operationId"] == "list_widgets"
    assert operation[openapi.EXTENSION] == {"min": "1.30", "max": str(versions.MAX_VERSION)}
    assert operation["responses"]["200"]["content"]["application/json"]["schema"][
        "required"] == ["widgets"]


def test_the_entry_is_in_the_api_reference():
    apiref = ops.api_reference_module()
    reference = apiref.render_reference(_table())
    assert "GET /widgets" in reference
    assert "List widgets." in reference
    assert "GET /widgets" not in apiref.render_reference()
