"""The route table: every endpoint of the API, one declaration each (its
handler, the microversions it exists in, its policy rule and what the
OpenAPI document says of it: ``placement.endpoint``), and the dispatcher
that finds the endpoint of a request (404 for unknown paths, 405 with
``Allow`` for a known path and an undeclared method, the operation's gate
status outside its microversions, 503 while the database cannot be
reached). The policy defaults (``placement.policies``), the OpenAPI
document and the API reference are made from this table."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import routes
import webob
import webob.exc
from oslo_db import exception as db_exc
from oslo_log import log as logging

from placement import endpoint as endpoint_declaration
from placement import errors, exceptions, microversion, request_data, wsgi_util
from placement import versions as mv
from placement.db import api as db_api
from placement.endpoint import (
    ADMIN,
    ADMIN_OR_PROJECT_READER_OR_SERVICE,
    ADMIN_OR_SERVICE,
    DELETED,
    SERVICE,
    WRITE_JSON,
    Endpoint,
    Operation,
    Outcome,
    Policy,
    always,
    ok,
    protected,
    since,
)
from placement.handlers import (
    aggregate,
    allocation,
    allocation_candidate,
    capacity,
    inventory,
    openapi,
    provider_usage,
    reshaper,
    resource_class,
    resource_provider,
    root,
    trait,
    usage,
)
from placement.schemas import aggregate as aggregate_schema
from placement.schemas import allocation as allocation_schema
from placement.schemas import allocation_candidate as allocation_candidate_schema
from placement.schemas import capacity as capacity_schema
from placement.schemas import capacity_providers as capacity_providers_schema
from placement.schemas import inventory as inventory_schema
from placement.schemas import reshaper as reshaper_schema
from placement.schemas import resource_class as resource_class_schema
from placement.schemas import resource_provider as resource_provider_schema
from placement.schemas import responses
from placement.schemas import trait as trait_schema
from placement.schemas import usage as usage_schema

LOG = logging.getLogger(__name__)

RP = "/resource_providers/{uuid}"

# The template of the route a request matched (for the request metrics).
ROUTE_ENVIRON = "placement.route"


def _rule(name: str, description: str, check_str: str = ADMIN_OR_SERVICE) -> Policy:
    return Policy("placement:" + name, check_str, description)


def _renamed_until_1_6(version: mv.Version) -> dict | None:
    """PUT /resource_classes/{name} takes the new name as a body until it
    becomes a body-less create-or-verify."""
    if version >= mv.RESOURCE_CLASS_CREATE_OR_VERIFY:
        return None
    return resource_class_schema.RESOURCE_CLASS


def _total_usages_query(version: mv.Version) -> dict:
    if version >= mv.CONSUMER_TYPES:
        return usage_schema.USAGES_QUERY_V1_38
    return usage_schema.USAGES_QUERY


# Rules several endpoints ask.
_INVENTORIES_DELETE = _rule("resource_providers:inventories:delete",
                            "Delete the inventories, or one inventory, of a provider.")
_INVENTORIES_UPDATE = _rule("resource_providers:inventories:update",
                            "Replace the inventories, or one inventory, of a provider.")

_HOME = Endpoint(root.home, Operation(
    "Version discovery document (no authentication).", (ok(responses.ROOT),)))

# Path -> {method: endpoint}; methods are listed in the order of ``Allow``.
ROUTES: dict[str, dict[str, Endpoint]] = {
    # the mount point itself, served like "/" (not in the document)
    "": {"GET": _HOME},
    "/": {"GET": _HOME},
    # resource classes
    "/resource_classes": {
        "GET": Endpoint(resource_class.list_resource_classes, Operation(
            "List all resource classes, standard and custom.",
            (ok(responses.RESOURCE_CLASSES),), available=since(mv.RESOURCE_CLASSES),
            errors=protected(),
            policy=_rule("resource_classes:list", "List resource classes."))),
        "POST": Endpoint(resource_class.create_resource_class, Operation(
            "Create a custom resource class.",
            (Outcome(201, location=True, description="Created."),),
            available=since(mv.RESOURCE_CLASSES),
            body=always(resource_class_schema.RESOURCE_CLASS),
            errors=WRITE_JSON,
            policy=_rule("resource_classes:create", "Create a resource class."))),
    },
    "/resource_classes/{name}": {
        "GET": Endpoint(resource_class.get_resource_class, Operation(
            "Show a resource class.",
            (ok(responses.RESOURCE_CLASS),), available=since(mv.RESOURCE_CLASSES),
            errors=protected(),
            policy=_rule("resource_classes:show", "Show a resource class."))),
        "PUT": Endpoint(resource_class.update_resource_class, Operation(
            "Rename a custom resource class (1.2-1.6, JSON body) or create it if "
            "missing (1.7+, no body).",
            (Outcome(200, responses.RESOURCE_CLASS,
                     versions=(mv.RESOURCE_CLASSES,
                               mv.RESOURCE_CLASS_CREATE_OR_VERIFY.before()),
                     description="Renamed."),
             Outcome(201, versions=since(mv.RESOURCE_CLASS_CREATE_OR_VERIFY),
                     location=True, description="Created."),
             Outcome(204, versions=since(mv.RESOURCE_CLASS_CREATE_OR_VERIFY),
                     location=True, description="Already existed.")),
            available=since(mv.RESOURCE_CLASSES), body=_renamed_until_1_6,
            errors=WRITE_JSON,
            policy=_rule("resource_classes:update", "Create or rename a custom resource class."))),
        "DELETE": Endpoint(resource_class.delete_resource_class, Operation(
            "Delete a custom resource class not used by any inventory.",
            (DELETED,), available=since(mv.RESOURCE_CLASSES), errors=protected(409),
            policy=_rule("resource_classes:delete", "Delete a custom resource class."))),
    },
    # resource providers
    "/resource_providers": {
        "GET": Endpoint(resource_provider.list_resource_providers, Operation(
            "List resource providers, optionally filtered.",
            (ok(responses.RESOURCE_PROVIDERS),), query=resource_provider_schema.list_query_schema,
            errors=protected(),
            policy=_rule("resource_providers:list", "List resource providers."))),
        "POST": Endpoint(resource_provider.create_resource_provider, Operation(
            "Create a resource provider.",
            (Outcome(201, versions=(mv.MIN_VERSION,
                                    mv.POST_PROVIDER_RETURNS_BODY.before()),
                     location=True, description="Created."),
             Outcome(200, responses.RESOURCE_PROVIDER,
                     versions=since(mv.POST_PROVIDER_RETURNS_BODY), location=True,
                     cache_headers=True, description="Created.")),
            body=resource_provider_schema.post_schema, errors=WRITE_JSON,
            policy=_rule("resource_providers:create", "Create a resource provider."))),
    },
    RP: {
        "GET": Endpoint(resource_provider.get_resource_provider, Operation(
            "Show a resource provider.",
            (ok(responses.RESOURCE_PROVIDER),), errors=protected(),
            policy=_rule("resource_providers:show", "Show a resource provider."))),
        "PUT": Endpoint(resource_provider.update_resource_provider, Operation(
            "Update a resource provider's name and (1.14+) parent.",
            (ok(responses.RESOURCE_PROVIDER),), body=resource_provider_schema.put_schema,
            errors=WRITE_JSON,
            policy=_rule("resource_providers:update", "Update a resource provider."))),
        "DELETE": Endpoint(resource_provider.delete_resource_provider, Operation(
            "Delete a resource provider without children or allocations.",
            (DELETED,), errors=protected(409),
            policy=_rule("resource_providers:delete", "Delete a resource provider."))),
    },
    # inventories
    RP + "/inventories": {
        "GET": Endpoint(inventory.get_inventories, Operation(
            "List the provider's inventories.",
            (ok(responses.INVENTORIES),), errors=protected(),
            policy=_rule("resource_providers:inventories:list",
                         "List the inventories of a provider."))),
        "POST": Endpoint(inventory.create_inventory, Operation(
            "Add one inventory to the provider.",
            (Outcome(201, responses.INVENTORY, location=True, cache_headers=True,
                     description="Created."),),
            body=always(inventory_schema.POST_INVENTORY), errors=WRITE_JSON,
            policy=_rule("resource_providers:inventories:create",
                         "Create one inventory of a provider."))),
        "PUT": Endpoint(inventory.set_inventories, Operation(
            "Replace all of the provider's inventories.",
            (ok(responses.INVENTORIES),), body=always(inventory_schema.PUT_INVENTORIES),
            errors=WRITE_JSON,
            policy=_INVENTORIES_UPDATE)),
        "DELETE": Endpoint(inventory.delete_inventories, Operation(
            "Delete all of the provider's inventories.",
            (DELETED,), available=since(mv.DELETE_ALL_INVENTORIES),
            unavailable_status=405,
            errors=protected(405, 409),
            policy=_INVENTORIES_DELETE)),
    },
    RP + "/inventories/{resource_class}": {
        "GET": Endpoint(inventory.get_inventory, Operation(
            "Show one inventory of the provider.",
            (ok(responses.INVENTORY),), errors=protected(),
            policy=_rule("resource_providers:inventories:show",
                         "Show one inventory of a provider."))),
        "PUT": Endpoint(inventory.update_inventory, Operation(
            "Update one inventory of the provider.",
            (ok(responses.INVENTORY),), body=always(inventory_schema.PUT_INVENTORY),
            errors=WRITE_JSON,
            policy=_INVENTORIES_UPDATE)),
        "DELETE": Endpoint(inventory.delete_inventory, Operation(
            "Delete one inventory of the provider.",
            (DELETED,), errors=protected(409),
            policy=_INVENTORIES_DELETE)),
    },
    # usages, aggregates, provider allocations, provider traits
    RP + "/usages": {
        "GET": Endpoint(usage.list_usages, Operation(
            "Usage of each resource class the provider has inventory for.",
            (ok(responses.PROVIDER_USAGES),), errors=protected(),
            policy=_rule("resource_providers:usages", "Show a provider's usages."))),
    },
    RP + "/aggregates": {
        "GET": Endpoint(aggregate.get_aggregates, Operation(
            "List the provider's aggregates.",
            (ok(responses.AGGREGATES),), available=since(mv.PROVIDER_AGGREGATES),
            errors=protected(),
            checked_before_gate=wsgi_util.check_accept,
            policy=_rule("resource_providers:aggregates:list",
                         "List the aggregates of a provider."))),
        "PUT": Endpoint(aggregate.set_aggregates, Operation(
            "Replace the provider's aggregates.",
            (ok(responses.AGGREGATES),), available=since(mv.PROVIDER_AGGREGATES),
            body=aggregate_schema.put_schema,
            errors=WRITE_JSON,
            checked_before_gate=wsgi_util.require_json_content,
            policy=_rule("resource_providers:aggregates:update",
                         "Replace the aggregates of a provider."))),
    },
    RP + "/allocations": {
        "GET": Endpoint(allocation.list_for_resource_provider, Operation(
            "List the allocations against the provider, by consumer.",
            (ok(responses.PROVIDER_ALLOCATIONS),), errors=protected(),
            policy=_rule("resource_providers:allocations:list",
                         "List the allocations against a provider."))),
    },
    RP + "/traits": {
        "GET": Endpoint(trait.list_traits_for_resource_provider, Operation(
            "List the provider's traits.",
            (ok(responses.PROVIDER_TRAITS),), available=since(mv.TRAITS),
            errors=protected(),
            policy=_rule("resource_providers:traits:list", "List the traits of a provider."))),
        "PUT": Endpoint(trait.update_traits_for_resource_provider, Operation(
            "Replace the provider's traits.",
            (ok(responses.PROVIDER_TRAITS),), available=since(mv.TRAITS),
            body=always(trait_schema.SET_PROVIDER_TRAITS_SCHEMA), errors=WRITE_JSON,
            policy=_rule("resource_providers:traits:update", "Replace the traits of a provider."))),
        "DELETE": Endpoint(trait.delete_traits_for_resource_provider, Operation(
            "Remove all traits from the provider.",
            (DELETED,), available=since(mv.TRAITS), errors=protected(409),
            policy=_rule("resource_providers:traits:delete", "Remove every trait of a provider."))),
    },
    # allocations
    "/allocations": {
        "POST": Endpoint(allocation.set_allocations, Operation(
            "Set the allocations of several consumers at once, atomically.",
            (Outcome(204, description="Written."),), available=since(mv.POST_ALLOCATIONS),
            body=allocation_schema.post_schema, errors=WRITE_JSON,
            policy=_rule("allocations:manage",
                         "Replace the allocations of several consumers at once."))),
    },
    "/allocations/{consumer_uuid}": {
        "GET": Endpoint(allocation.list_for_consumer, Operation(
            "Show a consumer's allocations.",
            (ok(responses.CONSUMER_ALLOCATIONS),), errors=protected(),
            policy=_rule("allocations:list", "Show the allocations of a consumer."))),
        "PUT": Endpoint(allocation.set_allocations_for_consumer, Operation(
            "Replace a consumer's allocations.",
            (Outcome(204, description="Written."),), body=allocation_schema.put_schema,
            errors=WRITE_JSON,
            policy=_rule("allocations:update", "Replace the allocations of a consumer."))),
        "DELETE": Endpoint(allocation.delete_allocations, Operation(
            "Delete all of a consumer's allocations.",
            (DELETED,), errors=protected(),
            policy=_rule("allocations:delete", "Delete the allocations of a consumer."))),
    },
    "/allocation_candidates": {
        "GET": Endpoint(allocation_candidate.list_allocation_candidates, Operation(
            "Sets of providers that could satisfy a request, as allocation requests "
            "plus summaries of the providers involved.",
            (ok(responses.ALLOCATION_CANDIDATES),),
            available=since(mv.ALLOCATION_CANDIDATES),
            query=allocation_candidate_schema.query_schema, errors=protected(),
            policy=_rule("allocation_candidates:list", "List allocation candidates."))),
    },
    "/allocation_candidates/explain": {
        "GET": Endpoint(allocation_candidate.explain_allocation_candidates, Operation(
            "Why the same query gets the candidates it gets: for each request group the "
            "funnel of its constraints with the providers (and trees) entering and "
            "leaving each, the steps acting on whole trees, the number of allocation "
            "requests (limit ignored) and, for each provider=<uuid>, the first constraint "
            "ruling it out. Admin only by default.",
            (Outcome(200, responses.ALLOCATION_CANDIDATES_EXPLAIN,
                     description="The explanation."),),
            available=since(mv.ALLOCATION_CANDIDATES),
            query=allocation_candidate_schema.explain_query_schema,
            errors=protected(),
            policy=_rule("allocation_candidates:explain",
                         "Explain which constraints rule providers out of the allocation "
                         "candidates.", ADMIN),
            extension=True)),
    },
    # extensions of ours, at every microversion
    "/capacity": {
        "GET": Endpoint(capacity.get_capacity, Operation(
            "An extension (not in the original API): how many more whole instances of a "
            "shape, written as the query of GET /allocation_candidates, fit, in total, per "
            "root (the roots with most room, up to limit, default 20) and, with "
            "group_by=aggregate, per aggregate, with the class that runs out first; "
            "exact, or a stated lower bound (exact: false). With drain_provider "
            "(repeatable) or drain_aggregate, counted without those providers, and "
            "whether every consumer on them could be placed elsewhere. Read-only. "
            "Admin only by default.",
            (Outcome(200, responses.CAPACITY, description="The capacity answer."),),
            query=always(capacity_schema.QUERY), errors=protected(),
            policy=_rule("capacity:read", "Count how many more instances of a shape fit, "
                         "and what a drain would leave.", ADMIN),
            extension=True)),
    },
    "/capacity/providers": {
        "GET": Endpoint(provider_usage.list_provider_usages, Operation(
            "Every provider's inventories and usages in one read, for monitoring, "
            "filtered as GET /resource_providers at the newest microversion is (whatever "
            "the request's): name, uuid, member_of, in_tree, required, resources. Each "
            "provider with its uuid, name, generation, parent and root, its inventories "
            "(as GET /resource_providers/{uuid}/inventories) and usages (as "
            "GET /resource_providers/{uuid}/usages). Admin only by default.",
            (Outcome(200, capacity_providers_schema.RESPONSE,
                     description="The providers, in creation order."),),
            query=always(capacity_providers_schema.QUERY_SCHEMA), errors=protected(),
            policy=_rule("capacity:providers",
                         "Read every provider's inventories and usages at once.", ADMIN),
            extension=True)),
    },
    # traits
    "/traits": {
        "GET": Endpoint(trait.list_traits, Operation(
            "List traits, optionally filtered.",
            (ok(responses.TRAITS),), available=since(mv.TRAITS),
            query=always(trait_schema.LIST_QUERY_SCHEMA), errors=protected(),
            policy=_rule("traits:list", "List traits."))),
    },
    "/traits/{name}": {
        "GET": Endpoint(trait.get_trait, Operation(
            "Check that a trait exists.",
            (Outcome(204, cache_headers=True, description="The trait exists."),),
            available=since(mv.TRAITS), errors=protected(),
            policy=_rule("traits:show", "Show a trait."))),
        "PUT": Endpoint(trait.put_trait, Operation(
            "Create a custom trait if it does not exist.",
            (Outcome(201, location=True, cache_headers=True, description="Created."),
             Outcome(204, location=True, cache_headers=True, description="Already existed.")),
            available=since(mv.TRAITS), errors=protected(),
            policy=_rule("traits:update", "Create a custom trait."))),
        "DELETE": Endpoint(trait.delete_trait, Operation(
            "Delete a custom trait no provider has.",
            (DELETED,), available=since(mv.TRAITS), errors=protected(409),
            policy=_rule("traits:delete", "Delete a custom trait."))),
    },
    "/usages": {
        "GET": Endpoint(usage.get_total_usages, Operation(
            "Total usage of a project (and user), by resource class; by consumer "
            "type from 1.38.",
            (ok(responses.TOTAL_USAGES),), available=since(mv.USAGES),
            query=_total_usages_query, errors=protected(),
            policy=_rule("usages", "Show the usages of a project or user.",
                         ADMIN_OR_PROJECT_READER_OR_SERVICE))),
    },
    "/reshaper": {
        "POST": Endpoint(reshaper.reshape, Operation(
            "Atomically replace the inventories of several providers and the "
            "allocations of several consumers.",
            (Outcome(204, description="Reshaped."),), available=since(mv.RESHAPER),
            body=reshaper_schema.reshape_schema, errors=WRITE_JSON,
            policy=_rule("reshaper:reshape",
                         "Move inventories and allocations between providers at once.", SERVICE))),
    },
}
# The document describes the whole table, its own route included.
ROUTES["/openapi.json"] = {"GET": Endpoint(openapi.document_handler(ROUTES), Operation(
    "This OpenAPI 3.1 document (no authentication, no policy).",
    (Outcome(200, description="The OpenAPI document."),), extension=True))}


def _make_mapper(table: Mapping[str, Mapping[str, Endpoint]]) -> routes.Mapper:
    mapper = routes.Mapper()
    for path in table:
        mapper.connect(path, template=path, requirements={
            name: "[^/]+" for name in ("uuid", "name", "resource_class", "consumer_uuid")})
    return mapper


def _check_content_headers(request: webob.Request) -> None:
    content_length = request.headers.get("Content-Length")
    if content_length is None:
        return
    try:
        length = int(content_length)
    except ValueError:
        raise errors.bad_request("content-length header must be an integer") from None
    if length > 0 and not request.headers.get("Content-Type"):
        raise errors.bad_request("content-type header required when content-length > 0")


def _run(handler: Callable, request: webob.Request) -> webob.Response:
    """The handler's response. A read whose database connection was lost
    (the server restarted, the connection was killed) runs once more, on a
    new connection: it changed nothing. Writes are retried where they are
    known not to have committed, by ``placement.db.api``."""
    try:
        return handler(request)
    except db_exc.DBConnectionError as error:
        if request.method != "GET":
            raise
        LOG.warning("Lost the database connection serving GET %s, reading again: %s",
                    request.path_info, db_api.summary(error))
        return handler(request)


def _check_gate(request: webob.Request, operation: Operation, allowed: str) -> None:
    """The operation's own status (404, or 405 where the spec says so)
    outside the microversions it exists in, with only the generic text of
    the status (unlike routing's 405)."""
    if operation.checked_before_gate is not None:
        operation.checked_before_gate(request)
    if microversion.version_of(request).matches(*operation.available):
        return
    status = webob.exc.status_map[operation.unavailable_status]
    headers = [("Allow", allowed)] if operation.unavailable_status == 405 else []
    raise errors.http_error(status, headers=headers)


class Dispatcher:
    """Finds the endpoint and calls its handler; turns domain errors and an
    unreachable database into responses. ``routes``: the route table
    (ROUTES, unless a test gives another)."""

    def __init__(self, routes: Mapping[str, Mapping[str, Endpoint]] = ROUTES) -> None:
        self.routes = routes
        self.mapper = _make_mapper(self.routes)

    def route_of(self, environ: dict) -> str | None:
        """The route template of a request: the one it matched, or, for a
        request answered before it got here (a 401, a CORS preflight), the
        one its path matches; None for a path of no route."""
        template = environ.get(ROUTE_ENVIRON)
        if template is None:
            match = self.mapper.match(environ.get("PATH_INFO", ""))
            template = match and match["template"]
        return template

    def __call__(self, environ: dict, start_response: Callable):
        # A plain WSGI callable rather than webob.dec.wsgify, which also
        # makes every request a response object it never uses.
        return self._respond(webob.Request(environ))(environ, start_response)

    def _respond(self, request: webob.Request) -> webob.Response:
        try:
            _check_content_headers(request)
            match = self.mapper.match(request_data.path(request))
            if match is None:
                raise errors.not_found()
            template = request.environ[ROUTE_ENVIRON] = match.pop("template")
            endpoints = self.routes[template]
            allowed = ", ".join(endpoints)
            endpoint = endpoints.get(request.method)
            if endpoint is None:
                raise errors.http_error(
                    webob.exc.HTTPMethodNotAllowed,
                    "The method specified is not allowed for this resource.",
                    headers=[("Allow", allowed)])
            _check_gate(request, endpoint.operation, allowed)
            request.environ[endpoint_declaration.ENVIRON_KEY] = endpoint
            request.urlvars = match
            return _run(endpoint.handler, request)
        except exceptions.PlacementError as error:
            return errors.from_domain_error(error)
        except webob.exc.HTTPException as error:
            return error
        except db_exc.DBDeadlock as error:
            # A write that lost its race (a deadlock, a Galera certification
            # failure) every time placement.db.api retried it.
            LOG.warning("Gave up retrying %s %s after deadlocks: %s",
                        request.method, request.path_info, db_api.summary(error))
            return errors.conflict("Another thread concurrently updated the data. "
                                   "Please retry your update", errors.CONCURRENT_UPDATE)
        except (db_exc.DBConnectionError, db_api.CommitOutcomeUnknown) as error:
            LOG.warning("The database cannot be reached serving %s %s: %s",
                        request.method, request.path_info, db_api.summary(error))
            if isinstance(error, db_api.CommitOutcomeUnknown):
                return errors.database_unavailable(
                    "The database connection was lost while committing: the change may "
                    "or may not have been made. Read it back before trying again.")
            return errors.database_unavailable("The database cannot be reached; try again.")
