"""Real responses match the OpenAPI document: every gabbi file of the
project is run again against the in-process application with a recorder
in front of it, and each recorded response (status, microversion, body) is
validated with jsonschema against the document's schema for that route,
status and microversion."""

from __future__ import annotations

import io
import json
import os
import pathlib
import tempfile
import unittest

import jsonschema
import pytest
from gabbi import driver

from placement import openapi, router, versions
from tests import fixtures

pytestmark = pytest.mark.slow

# The document the service serves, of its route table.
DOCUMENT = openapi.document(router.ROUTES)

GABBITS = pathlib.Path(__file__).parents[2] / "gabbits"
ROUTE_MATCHER = router.Dispatcher().mapper
FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


class Recorder:
    """WSGI middleware keeping (method, path, status, headers, body) of
    every exchange."""

    def __init__(self, application):
        self.application = application
        self.exchanges: list[dict] = []

    def __call__(self, environ, start_response):
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["status"] = int(status.split()[0])
            captured["headers"] = {name.lower(): value for name, value in headers}
            return start_response(status, headers, exc_info)

        body = b"".join(self.application(environ, capture))
        self.exchanges.append({"method": environ["REQUEST_METHOD"],
                               "path": environ.get("PATH_INFO", ""), "body": body,
                               **captured})
        return [body]


def _version(headers: dict) -> versions.Version | None:
    value = headers.get("openstack-api-version")
    return None if value is None else versions.parse(value.split()[1])


def _error_schema(status: int, version: versions.Version | None) -> dict:
    """The error body of an exchange no operation documents (unknown path,
    undeclared method)."""
    return openapi.response_schema(DOCUMENT, "/", "GET", 404, version)


def mismatches(exchange: dict) -> list[str]:
    """Why ``exchange`` does not conform to the document (empty: it does)."""
    status, headers, body = exchange["status"], exchange["headers"], exchange["body"]
    where = f"{exchange['method']} {exchange['path']} -> {status}"
    if exchange["method"] == "OPTIONS" and status == 200 and not body:
        return []  # a CORS preflight answer, made by the CORS layer, not the API
    version = _version(headers)
    match = ROUTE_MATCHER.match(exchange["path"])
    template = match["template"] if match else None
    template = "/" if template == "" else template
    documented = template in DOCUMENT["paths"] and \
        exchange["method"].lower() in DOCUMENT["paths"][template]
    try:
        if documented:
            schema = openapi.response_schema(DOCUMENT, template, exchange["method"], status,
                                             version)
        else:
            schema = _error_schema(status, version)
    except LookupError as error:
        return [f"{where}: {error}"]
    is_json = headers.get("content-type", "").startswith("application/json")
    if schema is None:
        return [f"{where}: documented without a body, got {body[:200]!r}"] if body else []
    if not is_json:
        # An error negotiated to HTML or plain text by the Accept header.
        return [] if status >= 400 else [f"{where}: expected a JSON body"]
    try:
        jsonschema.validate(json.loads(body), schema, format_checker=FORMAT_CHECKER)
    except jsonschema.ValidationError as error:
        return [f"{where} at {version}: {error.message} (at {list(error.absolute_path)})"]
    return []


def _run_gabbi_file(yaml_file: pathlib.Path) -> Recorder:
    recorder = Recorder(fixtures.current_app())
    with tempfile.TemporaryDirectory() as directory:
        os.symlink(yaml_file, os.path.join(directory, yaml_file.name))
        suite = driver.build_tests(directory, unittest.TestLoader(),
                                   intercept=lambda: recorder,
                                   test_loader_name="openapi_" + yaml_file.stem,
                                   fixture_module=fixtures)
        unittest.TextTestRunner(stream=io.StringIO()).run(suite)
    return recorder


@pytest.mark.parametrize("yaml_file", sorted(GABBITS.glob("*.yaml")),
                         ids=lambda path: path.stem)
def test_gabbi_responses_match_the_document(yaml_file):
    recorder = _run_gabbi_file(yaml_file)
    assert recorder.exchanges, "the gabbi file made no request"
    problems = [problem for exchange in recorder.exchanges
                for problem in mismatches(exchange)]
    assert not problems, "\n".join(problems)


def _exchange(status: int, body: object, version: str = "1.0", path: str = "/") -> dict:
    return {"method": "GET", "path": path, "status": status, "body": json.dumps(body).encode(),
            "headers": {"content-type": "application/json",
                        "openstack-api-version": f"placement {version}"}}


def test_a_nonconforming_response_is_caught():
    versions = {"versions": [{"id": "v1.0", "max_version": "1.39", "min_version": "1.0",
                              "status": "CURRENT", "links": [{"rel": "self", "href": ""}]}]}
    assert mismatches(_exchange(200, versions)) == []
    assert mismatches(_exchange(200, {**versions, "extra": 1}))
    assert mismatches(_exchange(201, versions)), "an undocumented status"
    error = {"errors": [{"status": 404, "title": "Not Found", "detail": "d",
                         "request_id": "req-x"}]}
    assert mismatches(_exchange(404, error, path="/nowhere")) == []
    assert mismatches(_exchange(404, error, version="1.23", path="/nowhere")), \
        "code is required from 1.23"
