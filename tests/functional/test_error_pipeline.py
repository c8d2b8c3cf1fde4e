"""Errors produced outside the handlers' own checks, through the whole
application as deployed: an unexpected exception (the fault layer's 500)
and the headers each layer's errors carry; hostile bodies, query strings,
paths and headers, each a bounded 4xx (placement.request_data) that
changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import webob

from placement import errors
from tests.db import FreshDatabase
from tests.fixtures import ops
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
    ops.broken_route(monkeypatch, "/traits", "GET", _broken_handler)
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
    ops.broken_route(monkeypatch, "/traits", "GET", _broken_handler)
    response = _get(app, "/traits", Accept="text/html",
                    **{"OpenStack-API-Version": "placement 1.6"})
    assert response.status_int == 500
    assert response.content_type == "text/html"
    assert "secret internal detail" not in response.text


# --- hostile input: each cause of a 500 issue 14 found, and its kin ---------------

RP = "5a5c5d3e-0000-4000-8000-000000000001"
AGG = "5a5c5d3e-0000-4000-8000-00000000a661"
JSON_LATEST = {"Content-Type": "application/json", "OpenStack-API-Version": "placement latest"}


def _send(app, method: str, path: str, body: bytes | None = None, query: str = "",
          **headers: str) -> webob.Response:
    request = webob.Request.blank(path, method=method, headers={
        "X-Auth-Token": "admin", **JSON_LATEST, **headers})
    request.environ["QUERY_STRING"] = query
    if body is not None:
        request.body = body
    return request.get_response(app)


def _detail(response: webob.Response) -> str:
    assert response.content_type == "application/json", response.text
    return response.json["errors"][0]["detail"]


@pytest.fixture
def provider_app(app) -> Iterator:
    """``app`` holding provider RP (generation 1) with 8 VCPU."""
    assert _send(app, "POST", "/resource_providers",
                 json.dumps({"name": "rp", "uuid": RP}).encode()).status_int == 200
    assert _send(app, "PUT", f"/resource_providers/{RP}/inventories", json.dumps({
        "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}).encode()
    ).status_int == 200
    yield app


def _nested_list(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# (what, method, path, body, fragment of the 400's detail)
REFUSED_BODIES = [
    # RecursionError formatting a jsonschema error for a deeply nested body
    ("deep value", "POST", "/resource_providers", b'{"name": ' + _nested_list(300) + b"}",
     "Unacceptable JSON: nested deeper than 32 levels, at instance['name'][0][0]"),
    ("value just deep enough to validate", "POST", "/resource_providers",
     b'{"name": ' + _nested_list(31) + b"}",
     "]]]]] is not of type 'string'"),
    # RecursionError decoding a deeply nested JSON array or object
    ("deep array", "POST", "/resource_providers", _nested_list(100000),
     "Unacceptable JSON: nested deeper than 32 levels"),
    ("deep object", "PUT", f"/resource_providers/{RP}/traits",
     b'{"a":' * 5000 + b"1" + b"}" * 5000, "Unacceptable JSON: nested deeper than 32 levels"),
    # UnicodeDecodeError: a body that is not UTF-8
    ("latin-1 body", "POST", "/resource_providers", b'{"name": "caf\xe9"}',
     "Malformed JSON: 'utf-8' codec can't decode byte 0xe9 in position 13"),
    ("encoded surrogate", "POST", "/resource_providers", b'{"name": "\xed\xa0\x80"}',
     "Malformed JSON: 'utf-8' codec can't decode byte 0xed"),
    # OverflowError / ValueError: Infinity and NaN taken as numbers
    ("Infinity total", "PUT", f"/resource_providers/{RP}/inventories/VCPU",
     b'{"resource_provider_generation": 1, "total": Infinity}',
     "a number is NaN or infinite (Infinity, or beyond the float range), at instance['total']"),
    ("NaN ratio", "PUT", f"/resource_providers/{RP}/inventories",
     b'{"resource_provider_generation": 1, "inventories": '
     b'{"VCPU": {"total": 8, "allocation_ratio": NaN}}}',
     "NaN or infinite (Infinity, or beyond the float range), at "
     "instance['inventories']['VCPU']['allocation_ratio']"),
    ("1e400 ratio", "POST", f"/resource_providers/{RP}/inventories",
     b'{"resource_class": "DISK_GB", "total": 8, "allocation_ratio": -1e400}',
     "a number is NaN or infinite"),
    # DBInvalidUnicodeParameter: lone surrogates reaching the driver
    ("lone surrogate", "POST", "/resource_providers", b'{"name": "\\udfff"}',
     "Unacceptable JSON: a string holds a lone surrogate ('\\udfff'), at instance['name']"),
    ("lone surrogate key", "POST", "/allocations",
     b'{"\\ud800": {"allocations": {}, "project_id": "p", "user_id": "u"}}',
     "a key holds a lone surrogate ('\\ud800'), at instance"),
    # NUL characters (PostgreSQL refuses them in text)
    ("NUL in a project", "PUT", f"/allocations/{AGG}", json.dumps({
        "allocations": {RP: {"resources": {"VCPU": 1}}}, "project_id": "p\x00",
        "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"}).encode(),
     "Unacceptable JSON: a string holds a NUL character, at instance['project_id']"),
    # Integers no column holds
    ("65-bit amount", "PUT", f"/allocations/{AGG}", json.dumps({
        "allocations": {RP: {"resources": {"VCPU": 2**64}}}, "project_id": "p",
        "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"}).encode(),
     "the integer 18446744073709551616 is beyond the 64-bit range, at "
     "instance['allocations']['5a5c5d3e-0000-4000-8000-000000000001']['resources']['VCPU']"),
    # The wrong top-level type, large: named, not rendered
    ("large array for an object", "POST", "/resource_providers",
     json.dumps(list(range(100000))).encode(),
     "JSON does not validate: [0, 1, 2, 3, 4, ...] is not of type 'object'"),
]


@pytest.mark.parametrize("what, method, path, body, fragment", REFUSED_BODIES,
                         ids=[case[0] for case in REFUSED_BODIES])
def test_hostile_bodies_are_bounded_400s_that_change_nothing(provider_app, what, method, path,
                                                             body, fragment):
    before = _send(provider_app, "GET", "/resource_providers").json
    response = _send(provider_app, method, path, body)
    assert response.status_int == 400, response.text
    detail = _detail(response)
    assert fragment in detail
    assert len(detail) < errors.MAX_MESSAGE + 200
    assert _send(provider_app, "GET", "/resource_providers").json == before


def test_a_huge_invalid_value_is_shown_cut_short(provider_app):
    body = json.dumps({"name": "x" * 300000}).encode()
    detail = _detail(_send(provider_app, "POST", "/resource_providers", body))
    assert "is too long" in detail and "Failed validating 'maxLength'" in detail
    assert len(detail) < 3000


# (what, path, raw query string, status, fragment of the detail)
HOSTILE_QUERIES = [
    ("percent-encoded latin-1", "/resource_providers", "name=caf%e9", 400,
     "Invalid query string parameters: 'utf-8' codec can't decode byte 0xe9"),
    ("NUL in a name", "/resource_providers", "name=a%00", 400,
     "Invalid query string parameters: parameter 'name' holds a NUL character"),
    ("NUL in a project", "/usages", "project_id=%00", 400, "holds a NUL character"),
    ("NUL in trait names", "/traits", "name=in:CUSTOM_%00", 400, "holds a NUL character"),
    ("NUL in a required trait", "/allocation_candidates", "resources=VCPU:1&required=%00",
     400, "holds a NUL character"),
    ("tens of kilobytes", "/allocation_candidates",
     "resources=VCPU:1&member_of=in:" + ",".join([AGG] * 1000), 400,
     "bytes long, more than the 16384 accepted"),
    ("a limit beyond any count", "/allocation_candidates",
     "resources=VCPU:1&limit=" + "9" * 30, 200, None),
    ("a repeated parameter", "/allocation_candidates",
     "resources=VCPU:1&" + "&".join(["required=HW_CPU_X86_SSE"] * 600), 200, None),
    ("an amount of thousands of digits", "/resource_providers",
     "resources=VCPU:" + "9" * 5000, 400, "Requested resource VCPU expected positive integer"),
]


@pytest.mark.parametrize("what, path, query, status, fragment", HOSTILE_QUERIES,
                         ids=[case[0] for case in HOSTILE_QUERIES])
def test_hostile_query_strings(provider_app, what, path, query, status, fragment):
    response = _send(provider_app, "GET", path, query=query)
    assert response.status_int == status, response.text
    if fragment is not None:
        detail = _detail(response)
        assert fragment in detail
        assert len(detail) < errors.MAX_MESSAGE + 200


@pytest.mark.parametrize("path, fragment", [
    ("/resource_providers/caf%e9", "Malformed path: 'utf-8' codec can't decode byte 0xe9"),
    ("/resource_providers/%00", "Malformed path: it holds a NUL character"),
    ("/traits/CUSTOM_%00", "Malformed path: it holds a NUL character"),
    ("/allocations/%ff", "Malformed path: 'utf-8' codec can't decode byte 0xff"),
])
def test_hostile_paths_are_400s(provider_app, path, fragment):
    for method in ("GET", "PUT", "DELETE"):
        response = _send(provider_app, method, path, b"{}")
        assert response.status_int == 400, (method, response.text)
        assert fragment in _detail(response)


@pytest.mark.parametrize("headers, status", [
    ({"OpenStack-API-Version": "placement 1.99999999999999999999"}, 406),
    ({"OpenStack-API-Version": "placement 1." + "9" * 5000}, 400),
    ({"OpenStack-API-Version": "placement \xff"}, 400),
    ({"Accept": "garbage;;q=x,\xff"}, 200),
    ({"Content-Type": "\xff/\xff"}, 415),
])
def test_hostile_headers(provider_app, headers, status):
    response = _send(provider_app, "PUT", f"/resource_providers/{RP}/traits",
                     json.dumps({"resource_provider_generation": 1, "traits": []}).encode(),
                     **headers)
    assert response.status_int == status, response.text
    if status >= 400:
        assert len(_detail(response)) < errors.MAX_MESSAGE + 200


@pytest.mark.parametrize("given", ["urn:uuid:" + AGG, "{" + AGG + "}", "uuid:" + AGG.upper()])
def test_aggregate_uuids_too_long_for_the_column_are_stored_canonical(provider_app, given):
    """They overflowed the 36-character column on MariaDB and PostgreSQL."""
    body = json.dumps({"resource_provider_generation": 1, "aggregates": [given, AGG]}).encode()
    response = _send(provider_app, "PUT", f"/resource_providers/{RP}/aggregates", body)
    assert response.status_int == 200, response.text
    assert response.json["aggregates"] == [AGG]
    assert _send(provider_app, "GET", f"/resource_providers/{RP}/aggregates"
                 ).json["aggregates"] == [AGG]
    listed = _send(provider_app, "GET", "/resource_providers", query=f"member_of={given}")
    assert [provider["uuid"] for provider in listed.json["resource_providers"]] == [RP]
