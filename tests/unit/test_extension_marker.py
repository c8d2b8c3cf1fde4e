"""The OpenAPI document marks exactly the routes of ours that are not the
original API's (``Operation.extension``) with ``x-placement-extension``,
and the API reference says so."""

from __future__ import annotations

from placement import openapi, router

# The additive routes of this service: any other is the original API's.
EXTENSIONS = {("/allocation_candidates/explain", "get"), ("/capacity", "get")}


def _marked(document: dict) -> set[tuple[str, str]]:
    return {(path, method) for path, operations in document["paths"].items()
            for method, operation in operations.items()
            if isinstance(operation, dict) and operation.get(openapi.EXTENSION_MARKER)}


def test_exactly_the_extension_routes_carry_the_marker():
    declared = {(path, method.lower()) for path, methods in router.ROUTES.items()
                for method, endpoint in methods.items() if endpoint.operation.extension}
    marked = _marked(openapi.document(router.ROUTES))
    assert marked == declared
    assert EXTENSIONS <= marked
    # the marker is a plain true, never written false on the others
    document = openapi.document(router.ROUTES)
    assert all(operation.get(openapi.EXTENSION_MARKER, True) is True
               for operations in document["paths"].values()
               for operation in operations.values() if isinstance(operation, dict))


def test_the_capacity_route_exists_at_every_microversion():
    operation = openapi.document(router.ROUTES)["paths"]["/capacity"]["get"]
    assert operation[openapi.EXTENSION]["min"] == "1.0"
    assert operation[openapi.EXTENSION]["max"] == str(router.mv.MAX_VERSION)
