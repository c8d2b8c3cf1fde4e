"""The OpenAPI 3.1 document of the API, served at ``GET /openapi.json``.

Built from the route table it is given (``placement/router.py`` hands
over its own): each endpoint's declaration (``placement.endpoint``: its
microversion range, statuses, headers, and the jsonschema schemas its
handler validates requests with) and the response-body schemas
(``placement/schemas/responses.py``), so that nothing here can drift from
what the service does. This module only writes it down as OpenAPI.

Microversions are described with an ``x-openstack-microversions`` extension
``{"min": "1.N", "max": "1.M"}`` on each operation, on each response that
exists only in part of the range, on each query parameter, and on each
variant of a request or response body (bodies that change with the version
are an ``anyOf`` of their variants). Request bodies and query parameters are
derived by asking the handlers' schema functions for every microversion.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping

from placement import versions as mv
from placement.endpoint import Endpoint, Operation, Outcome, Range, SchemaSource, since
from placement.schemas import responses
from placement.schemas.responses import Variant

OPENAPI_VERSION = "3.1.0"
EXTENSION = "x-openstack-microversions"
# Marks the operations that are additions of ours (Operation.extension).
EXTENSION_MARKER = "x-placement-extension"
NEWEST = str(mv.MAX_VERSION)
PATH_VARIABLE = re.compile(r"{([^}]+)}")

# Statuses any operation can answer, whatever it does: an unparsable (400)
# or unserved (406) microversion header, a path that names nothing (404),
# an unexpected failure (500).
COMMON_ERRORS = (400, 404, 406, 500)


# --- building the document -------------------------------------------------------


def _range(first: str | mv.Version, last: str | mv.Version | None
           ) -> dict:
    return {"min": str(first), "max": str(last or NEWEST)}


def _variants(source: SchemaSource, available: Range) -> list[Variant]:
    """The schemas ``source`` gives over the ``available`` range, one
    variant per run of consecutive versions with an equal schema."""
    variants: list[Variant] = []
    for version in versions_in(available):
        schema = source(version)
        if schema is None:
            continue
        previous = variants[-1] if variants else None
        if (previous is not None and previous.schema == schema
                and previous.max_version == str(version._replace(minor=version.minor - 1))):
            variants[-1] = previous._replace(max_version=str(version))
        else:
            variants.append(Variant(str(version), str(version), schema))
    return variants


def versions_in(available: Range) -> list[mv.Version]:
    """Every microversion of the ``available`` range."""
    first = mv.parse(available[0])
    last = mv.parse(available[1] or NEWEST)
    return [first._replace(minor=minor) for minor in range(first.minor, last.minor + 1)]


def _clipped(variants: list[Variant], versions: Range) -> list[Variant]:
    """The variants restricted to the ``versions`` range."""
    first, last = mv.parse(versions[0]), mv.parse(versions[1] or NEWEST)
    clipped = []
    for variant in variants:
        start = max(first, mv.parse(variant.min_version))
        end = min(last, mv.parse(variant.max_version or NEWEST))
        if start <= end:
            clipped.append(Variant(str(start), str(end), variant.schema))
    return clipped


def _annotated(variant: Variant) -> dict:
    """A copy of the variant's schema (never the handler's own dict) marked
    with its range."""
    schema = copy.deepcopy(variant.schema)
    schema.pop("$schema", None)
    schema[EXTENSION] = _range(variant.min_version, variant.max_version)
    return schema


def _variants_schema(variants: list[Variant]) -> dict:
    if len(variants) == 1:
        return _annotated(variants[0])
    return {"anyOf": [_annotated(variant) for variant in variants]}


def _header(description: str, versions: Range | None = None,
            **schema) -> dict:
    header = {"description": description, "schema": {"type": "string", **schema}}
    if versions is not None:
        header[EXTENSION] = _range(*versions)
    return header


def _success_headers(outcome: Outcome) -> dict:
    headers = {
        "openstack-api-version": {"$ref": "#/components/headers/OpenStackAPIVersion"},
        "x-openstack-request-id": {"$ref": "#/components/headers/RequestId"},
        "vary": {"$ref": "#/components/headers/Vary"},
    }
    if outcome.location:
        headers["location"] = _header("Absolute URL of the resource.", format="uri")
    if outcome.cache_headers:
        headers["last-modified"] = _header(
            "RFC 1123 date of the newest change of what the body represents.",
            since(mv.CACHE_HEADERS))
        headers["cache-control"] = _header("Always no-cache.", since(mv.CACHE_HEADERS),
                                           enum=["no-cache"])
    return headers


def _response(outcome: Outcome) -> dict:
    response = {"description": outcome.description or "Success.",
                "headers": _success_headers(outcome)}
    if outcome.versions is not None:
        response[EXTENSION] = _range(*outcome.versions)
    if outcome.body is not None:
        body = _clipped(outcome.body, outcome.versions) if outcome.versions else outcome.body
        response["content"] = {"application/json": {"schema": _variants_schema(body)}}
    elif outcome.status == 200:
        # Only the document itself: an object we do not describe here.
        response["content"] = {"application/json": {"schema": {"type": "object"}}}
    return response


def _spans(versions: list[mv.Version]) -> list[dict]:
    """Sorted versions as ranges of consecutive ones."""
    spans: list[dict] = []
    for version in versions:
        if spans and mv.parse(spans[-1]["max"]) == version._replace(
                minor=version.minor - 1):
            spans[-1]["max"] = str(version)
        else:
            spans.append({"min": str(version), "max": str(version)})
    return spans


def _spans_extension(spans: list[dict]) -> dict | list[dict]:
    """One range as usual; a list of ranges for something that comes and goes."""
    return spans[0] if len(spans) == 1 else spans


def _query_parameters(source: SchemaSource, available: Range) -> list[dict]:
    """One parameter per property of the query schemas, with the range of
    versions accepting it (and requiring it, when not all do); the
    pattern-named keys (the granular request groups of
    /allocation_candidates) become one exploded object parameter."""
    accepted: dict[str, list] = {}
    required: dict[str, list] = {}
    schemas: dict[str, dict] = {}
    patterns: dict[str, list] = {}
    pattern_schemas: dict[str, dict] = {}
    for version in versions_in(available):
        query = source(version) or {}
        for name, schema in query.get("properties", {}).items():
            schemas.setdefault(name, schema)
            accepted.setdefault(name, []).append(version)
            if name in query.get("required", ()):
                required.setdefault(name, []).append(version)
        for pattern, schema in query.get("patternProperties", {}).items():
            pattern_schemas.setdefault(pattern, schema)
            patterns.setdefault(pattern, []).append(version)
    parameters = []
    for name, accepted_at in accepted.items():
        spans = _spans(accepted_at)
        parameter = {"name": name, "in": "query", "schema": copy.deepcopy(schemas[name]),
                     EXTENSION: _spans_extension(spans)}
        if required.get(name) == accepted_at:
            parameter["required"] = True
        elif name in required:
            parameter["description"] = "Required at " + ", ".join(
                f"{span['min']}-{span['max']}" for span in _spans(required[name])) + "."
        parameters.append(parameter)
    if patterns:
        parameters.append({
            "name": "request_groups",
            "in": "query",
            "style": "form",
            "explode": True,
            "description": "Keys whose names match these patterns (granular request "
                           "groups); each pattern lists the versions accepting it.",
            "schema": {
                "type": "object",
                "patternProperties": {
                    pattern: {**copy.deepcopy(pattern_schemas[pattern]),
                              EXTENSION: _spans_extension(_spans(versions))}
                    for pattern, versions in patterns.items()},
                "additionalProperties": False,
            },
        })
    return parameters


def _operation(path: str, method: str, handler_name: str, operation: Operation) -> dict:
    parameters: list[dict] = [{"$ref": "#/components/parameters/OpenStackAPIVersion"}]
    if operation.authenticated:
        parameters.append({"$ref": "#/components/parameters/AuthToken"})
    parameters += [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in PATH_VARIABLE.findall(path)
    ]
    if operation.query is not None:
        parameters += _query_parameters(operation.query, operation.available)
    document: dict = {
        "operationId": handler_name,
        "summary": operation.summary,
        EXTENSION: _range(*operation.available),
        "x-openstack-unavailable-status": operation.unavailable_status,
        "parameters": parameters,
        "responses": {},
    }
    if operation.extension:
        document[EXTENSION_MARKER] = True
    if operation.body is not None:
        document["requestBody"] = {
            # Not where some versions take no body (PUT /resource_classes/{name}).
            "required": all(operation.body(version) is not None
                            for version in versions_in(operation.available)),
            "content": {"application/json": {
                "schema": _variants_schema(_variants(operation.body, operation.available))}},
        }
    if not operation.authenticated:
        document["security"] = []
    for outcome in operation.outcomes:
        document["responses"][str(outcome.status)] = _response(outcome)
    for status in sorted({*COMMON_ERRORS, *operation.errors}):
        reference = "Unauthorized" if status == 401 else "Error"
        document["responses"].setdefault(
            str(status), {"$ref": f"#/components/responses/{reference}"})
    return document


def _error_schema() -> dict:
    schema = _variants_schema(responses.ERROR)
    negotiation = copy.deepcopy(responses.MICROVERSION_ERROR)
    negotiation["description"] = ("400/406 from microversion negotiation: produced before "
                                  "a version is established, so no range applies.")
    schema["anyOf"].append(negotiation)
    return schema


def _components() -> dict:
    return {
        "parameters": {
            "OpenStackAPIVersion": {
                "name": "OpenStack-API-Version",
                "in": "header",
                "required": False,
                "description": "`placement <major.minor>` or `placement latest`; "
                               f"1.0 when absent. Served: 1.0 to {NEWEST}.",
                "schema": {"type": "string",
                           "pattern": r"^placement (latest|1\.(0|[1-9][0-9]?))$"},
            },
            "AuthToken": {
                "name": "X-Auth-Token",
                "in": "header",
                "required": False,
                "description": "Keystone token (or `user[:project]` with noauth2). The "
                               "securitySchemes entry says the same; this parameter lets "
                               "generic clients send it.",
                "schema": {"type": "string"},
            },
        },
        "headers": {
            "OpenStackAPIVersion": _header("`placement <version>` that served the request."),
            "RequestId": _header("`req-<uuid>`, also in error bodies.", pattern="^req-"),
            "Vary": _header("openstack-api-version"),
        },
        "responses": {
            "Error": {
                "description": "An error, in the placement error format.",
                "content": {"application/json": {"schema": _error_schema()}},
            },
            "Unauthorized": {
                "description": "No or invalid token (answered before the microversion "
                               "is read: no ``code``).",
                "content": {"application/json": {"schema": responses.UNAUTHORIZED}},
            },
        },
        "securitySchemes": {
            "token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"},
        },
    }


# A route table: path -> {method: endpoint}, methods in the order of ``Allow``.
Routes = Mapping[str, Mapping[str, Endpoint]]

# route table (by id) -> (the table, its document): built once per table
_DOCUMENTS: dict[int, tuple[Routes, dict]] = {}


def document(routes: Routes) -> dict:
    """The whole OpenAPI document of the route table ``routes`` (built once
    per table)."""
    kept = _DOCUMENTS.get(id(routes))
    if kept is None or kept[0] is not routes:
        kept = _DOCUMENTS[id(routes)] = (routes, _document(routes))
    return kept[1]


def _document(routes: Routes) -> dict:
    paths: dict[str, dict] = {}
    # The empty path '' is the mount point itself, served like '/'; OpenAPI
    # path keys must start with '/', so only '/' is listed.
    for path, endpoints in routes.items():
        if not path:
            continue
        paths[path] = {
            method.lower(): _operation(path, method, endpoint.handler.__name__,
                                       endpoint.operation)
            for method, endpoint in endpoints.items()
        }
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "OpenStack Placement API",
            "version": NEWEST,
            "description": "Microversions 1.0 to " + NEWEST + ". Each operation, "
                           "response, query parameter and body variant carries an "
                           f"`{EXTENSION}` range; select one with the "
                           "`OpenStack-API-Version` header.",
        },
        "security": [{"token": []}],
        "paths": paths,
        "components": _components(),
    }


# --- reading the document ----------------------------------------------------------


def _in_range(node: dict, version: mv.Version) -> bool:
    versions = node.get(EXTENSION)
    return versions is None or version.matches(versions["min"], versions["max"])


def _resolved(node: dict, document: dict) -> dict:
    reference = node.get("$ref")
    if reference is None:
        return node
    target = document
    for part in reference.removeprefix("#/").split("/"):
        target = target[part]
    return target


def response_schema(document: dict, path: str, method: str, status: int,
                    version: mv.Version | None) -> dict | None:
    """The schema a response body must match: the variants, in ``document``,
    of the documented response of ``path`` (a route-table template) and ``method``
    with ``status`` that apply at ``version`` (None: a microversion
    negotiation error, where no version applies). None when the response
    has no body. LookupError when the document does not allow that response
    at that version."""
    operation = document["paths"][path][method.lower()]
    response = operation["responses"].get(str(status))
    if response is None:
        raise LookupError(f"{method} {path} documents no {status} response")
    response = _resolved(response, document)
    if version is not None and not _in_range(response, version):
        raise LookupError(f"{method} {path} answers {status} only at "
                          f"{response[EXTENSION]}, not {version}")
    content = response.get("content")
    if content is None:
        return None
    schema = content["application/json"]["schema"]
    variants = schema.get("anyOf", [schema])
    if version is None:
        matching = [variant for variant in variants if EXTENSION not in variant]
    else:
        matching = [variant for variant in variants
                    if EXTENSION in variant and _in_range(variant, version)]
        matching = matching or [variant for variant in variants if EXTENSION not in variant]
    if not matching:
        raise LookupError(f"{method} {path} {status}: no body variant for {version}")
    return matching[0] if len(matching) == 1 else {"anyOf": matching}
