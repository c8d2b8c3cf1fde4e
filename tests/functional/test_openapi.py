"""The OpenAPI document: valid OpenAPI 3.1, served without a token, in
step with the route table, and built from the handlers' own schemas."""

from __future__ import annotations

import json
import os
import pathlib
import re

import jsonschema
import pytest
import webob
from openapi_spec_validator import validate

from placement import conf as placement_conf
from placement import deploy, openapi, router, versions
from tests.db import FreshDatabase
from tests.fixtures import ops

# The document the service serves, of its route table.
DOCUMENT = openapi.document(router.ROUTES)

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@pytest.fixture(scope="module")
def database():
    database = FreshDatabase()
    yield database
    database.close()


def _app(database, auth_strategy: str):
    conf = placement_conf.build_conf(config_files=[])
    conf.set_override("auth_strategy", auth_strategy, group="api")
    return deploy.build_app(conf, db=database.db)


def _documented_operations():
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def test_document_is_valid_openapi_3_1():
    document = DOCUMENT
    assert document["openapi"].startswith("3.1")
    validate(document)


@pytest.mark.parametrize("auth_strategy", ["noauth2", "keystone"])
def test_served_without_token_or_policy(database, auth_strategy):
    response = webob.Request.blank("/openapi.json").get_response(_app(database, auth_strategy))
    assert response.status_int == 200, response.text
    assert response.content_type == "application/json"
    assert json.loads(response.body) == json.loads(json.dumps(DOCUMENT))


def test_other_paths_still_need_a_token(database):
    response = webob.Request.blank("/resource_providers").get_response(
        _app(database, "noauth2"))
    assert response.status_int == 401


def test_covers_every_route_and_method():
    documented = {(path, method.upper()) for path, method, _ in _documented_operations()}
    # '' is the mount point itself, served as '/' (OpenAPI paths start with '/').
    routed = {(path, method) for path, methods in router.ROUTES.items() if path
              for method in methods}
    assert documented == routed


def test_every_path_variable_is_a_parameter():
    for path, _, operation in _documented_operations():
        names = {parameter["name"] for parameter in operation["parameters"]
                 if parameter.get("in") == "path"}
        assert names == set(openapi.PATH_VARIABLE.findall(path)), path


def test_every_operation_takes_the_microversion_header():
    for path, method, operation in _documented_operations():
        assert {"$ref": "#/components/parameters/OpenStackAPIVersion"} in \
            operation["parameters"], (path, method)


def _ranges_of(schema: dict) -> list[tuple[versions.Version, versions.Version]]:
    variants = schema.get("anyOf", [schema])
    return sorted((versions.parse(v[openapi.EXTENSION]["min"]),
                   versions.parse(v[openapi.EXTENSION]["max"]))
                  for v in variants if openapi.EXTENSION in v)


def _assert_tiles(ranges, first: str, last: str, where: str) -> None:
    """The variant ranges follow each other without gap or overlap, from
    ``first`` to ``last``."""
    assert ranges, where
    assert ranges[0][0] == versions.parse(first), where
    assert ranges[-1][1] == versions.parse(last), where
    for (_, previous_end), (start, _) in zip(ranges, ranges[1:], strict=False):
        assert start == (previous_end.major, previous_end.minor + 1), where


def test_body_variants_cover_the_operation_range_exactly():
    for path, method, operation in _documented_operations():
        available = operation[openapi.EXTENSION]
        for status, response in operation["responses"].items():
            if "$ref" in response or "content" not in response:
                continue
            schema = response["content"]["application/json"]["schema"]
            if not _ranges_of(schema):
                continue
            span = response.get(openapi.EXTENSION, available)
            _assert_tiles(_ranges_of(schema), span["min"], span["max"],
                          f"{method} {path} {status}")


def test_success_statuses_tile_the_operation_range():
    """Each version of an operation has its success answer documented."""
    for path, method, operation in _documented_operations():
        available = operation[openapi.EXTENSION]
        first = versions.parse(available["min"])
        last = versions.parse(available["max"])
        for minor in range(first.minor, last.minor + 1):
            version = versions.Version(1, minor)
            successes = [
                status for status, response in operation["responses"].items()
                if status.startswith("2") and (
                    openapi.EXTENSION not in response
                    or version.matches(response[openapi.EXTENSION]["min"],
                                       response[openapi.EXTENSION]["max"]))]
            assert successes, (path, method, str(version))


def test_error_schema_follows_the_code_microversion():
    error = {"status": 404, "title": "Not Found", "detail": "x", "request_id": "req-1"}
    old = openapi.response_schema(DOCUMENT, "/traits", "GET", 404, versions.Version(1, 22))
    new = openapi.response_schema(DOCUMENT, "/traits", "GET", 404, versions.Version(1, 23))
    jsonschema.validate({"errors": [error]}, old)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"errors": [error]}, new)
    jsonschema.validate({"errors": [{**error, "code": "placement.undefined_code"}]}, new)


def test_response_schema_refuses_undocumented_answers():
    with pytest.raises(LookupError):
        openapi.response_schema(DOCUMENT, "/resource_providers", "POST", 201,
                                versions.Version(1, 20))
    with pytest.raises(LookupError):
        openapi.response_schema(DOCUMENT, "/resource_providers", "GET", 418,
                                versions.Version(1, 0))


def _variant_at(schema: dict, version: versions.Version) -> dict | None:
    for variant in schema.get("anyOf", [schema]):
        span = variant[openapi.EXTENSION]
        if version.matches(span["min"], span["max"]):
            return {key: value for key, value in variant.items() if key != openapi.EXTENSION}
    return None


def _operations() -> list:
    """(path, method, operation) of every endpoint the document lists."""
    return [(path, method, endpoint.operation) for path, endpoints in router.ROUTES.items()
            if path for method, endpoint in endpoints.items()]


def test_request_bodies_are_the_handlers_schemas_at_every_version():
    """No second copy: at each version the documented body is exactly the
    schema the handler validates with."""
    paths = DOCUMENT["paths"]
    for path, method, operation in _operations():
        if operation.body is None:
            continue
        body = paths[path][method.lower()]["requestBody"]["content"]["application/json"]
        for version in openapi.versions_in(operation.available):
            assert _variant_at(body["schema"], version) == operation.body(version), \
                (path, method, str(version))


def test_query_parameters_are_the_handlers_query_schemas():
    paths = DOCUMENT["paths"]
    for path, method, operation in _operations():
        if operation.query is None:
            continue
        parameters = {parameter["name"]: parameter
                      for parameter in paths[path][method.lower()]["parameters"]
                      if parameter.get("in") == "query"}
        for version in openapi.versions_in(operation.available):
            for name, schema in operation.query(version).get("properties", {}).items():
                assert parameters[name]["schema"] == schema, (path, name)
                span = parameters[name][openapi.EXTENSION]
                assert version.matches(span["min"], span["max"]), (path, name)


# The original Placement API's routes, as the spec's route table lists them
# (root-and-microversions.md): every other operation is an extension of ours.
ORIGINAL_ROUTES = {
    "/": "GET",
    "/resource_classes": "GET, POST",
    "/resource_classes/{name}": "GET, PUT, DELETE",
    "/resource_providers": "GET, POST",
    "/resource_providers/{uuid}": "GET, DELETE, PUT",
    "/resource_providers/{uuid}/inventories": "GET, POST, PUT, DELETE",
    "/resource_providers/{uuid}/inventories/{resource_class}": "GET, PUT, DELETE",
    "/resource_providers/{uuid}/usages": "GET",
    "/resource_providers/{uuid}/aggregates": "GET, PUT",
    "/resource_providers/{uuid}/allocations": "GET",
    "/resource_providers/{uuid}/traits": "GET, PUT, DELETE",
    "/allocations": "POST",
    "/allocations/{consumer_uuid}": "GET, PUT, DELETE",
    "/allocation_candidates": "GET",
    "/traits": "GET",
    "/traits/{name}": "GET, PUT, DELETE",
    "/usages": "GET",
    "/reshaper": "POST",
}
SPEC_ROUTE_TABLE = pathlib.Path(
    os.environ.get("PLACEMENT_SPEC_DIR", pathlib.Path(__file__).resolve().parents[3]
                   / "shared" / "spec"), "root-and-microversions.md")


def test_original_routes_are_the_spec_route_table():
    if not SPEC_ROUTE_TABLE.exists():
        pytest.skip("the spec is not beside the checkout")
    rows = re.findall(r"^\| `(/[^`]*)`(?: and `''`)? \| ([A-Z, ]+) \|$",
                      SPEC_ROUTE_TABLE.read_text(), re.MULTILINE)
    assert dict(rows) == ORIGINAL_ROUTES


def test_exactly_the_extensions_are_marked():
    """``x-placement-extension: true`` on every operation the original
    lacks, on no other; the API reference says so of each."""
    original = {(path, method.lower()) for path, methods in ORIGINAL_ROUTES.items()
                for method in methods.split(", ")}
    marked = {(path, method) for path, method, operation in _documented_operations()
              if operation.get(openapi.PLACEMENT_EXTENSION) is True}
    unmarked = {(path, method) for path, method, operation in _documented_operations()
                if openapi.PLACEMENT_EXTENSION not in operation}
    assert unmarked == original
    assert marked == {(path, method) for path, method, _ in _documented_operations()} - original
    assert {("/capacity", "get"), ("/capacity/providers", "get"),
            ("/allocation_candidates/explain", "get"), ("/openapi.json", "get")} <= marked
    placement_apiref = ops.api_reference_module()
    reference = placement_apiref.render_reference()
    for path, method in marked:
        title = f"``{method.upper()} {path}``"
        section = reference.split(title + "\n" + "-" * len(title), 1)[1]
        assert section.lstrip().startswith(placement_apiref.EXTENSION_NOTE.strip()), title
    assert reference.count(placement_apiref.EXTENSION_NOTE) == 2 * len(marked)


@pytest.mark.parametrize("path", ["/capacity", "/capacity/providers"])
def test_the_capacity_routes_exist_at_every_microversion(path):
    operation = openapi.document(router.ROUTES)["paths"][path]["get"]
    assert operation[openapi.EXTENSION]["min"] == str(versions.MIN_VERSION)
    assert operation[openapi.EXTENSION]["max"] == str(versions.MAX_VERSION)
