"""The route table: every endpoint of the API, and the dispatcher that
finds the handler for a request (404 for unknown paths, 405 with ``Allow``
for a known path and an undeclared method, 503 while the database cannot be
reached)."""

from __future__ import annotations

from collections.abc import Callable

import routes
import webob
import webob.exc
from oslo_db import exception as db_exc
from oslo_log import log as logging

from placement import errors, exceptions, request_data
from placement.db import api as db_api
from placement.handlers import (
    aggregate,
    allocation,
    allocation_candidate,
    inventory,
    openapi,
    reshaper,
    resource_class,
    resource_provider,
    root,
    trait,
    usage,
)

LOG = logging.getLogger(__name__)

RP = "/resource_providers/{uuid}"

# The template of the route a request matched (for the request metrics).
ROUTE_ENVIRON = "placement.route"

# Path -> {method: handler}; methods are listed in the order of ``Allow``.
ROUTES: dict[str, dict[str, Callable]] = {
    "": {"GET": root.home},
    "/": {"GET": root.home},
    "/resource_classes": {
        "GET": resource_class.list_resource_classes,
        "POST": resource_class.create_resource_class,
    },
    "/resource_classes/{name}": {
        "GET": resource_class.get_resource_class,
        "PUT": resource_class.update_resource_class,
        "DELETE": resource_class.delete_resource_class,
    },
    "/resource_providers": {
        "GET": resource_provider.list_resource_providers,
        "POST": resource_provider.create_resource_provider,
    },
    RP: {
        "GET": resource_provider.get_resource_provider,
        "DELETE": resource_provider.delete_resource_provider,
        "PUT": resource_provider.update_resource_provider,
    },
    RP + "/inventories": {
        "GET": inventory.get_inventories,
        "POST": inventory.create_inventory,
        "PUT": inventory.set_inventories,
        "DELETE": inventory.delete_inventories,
    },
    RP + "/inventories/{resource_class}": {
        "GET": inventory.get_inventory,
        "PUT": inventory.update_inventory,
        "DELETE": inventory.delete_inventory,
    },
    RP + "/usages": {"GET": usage.list_usages},
    RP + "/aggregates": {
        "GET": aggregate.get_aggregates,
        "PUT": aggregate.set_aggregates,
    },
    RP + "/allocations": {"GET": allocation.list_for_resource_provider},
    RP + "/traits": {
        "GET": trait.list_traits_for_resource_provider,
        "PUT": trait.update_traits_for_resource_provider,
        "DELETE": trait.delete_traits_for_resource_provider,
    },
    "/allocations": {"POST": allocation.set_allocations},
    "/allocations/{consumer_uuid}": {
        "GET": allocation.list_for_consumer,
        "PUT": allocation.set_allocations_for_consumer,
        "DELETE": allocation.delete_allocations,
    },
    "/allocation_candidates": {"GET": allocation_candidate.list_allocation_candidates},
    "/allocation_candidates/explain": {
        "GET": allocation_candidate.explain_allocation_candidates},
    "/traits": {"GET": trait.list_traits},
    "/traits/{name}": {
        "GET": trait.get_trait,
        "PUT": trait.put_trait,
        "DELETE": trait.delete_trait,
    },
    "/usages": {"GET": usage.get_total_usages},
    "/reshaper": {"POST": reshaper.reshape},
}
# The document describes the whole table, its own route included.
ROUTES["/openapi.json"] = {"GET": openapi.document_handler(ROUTES)}


def _make_mapper() -> routes.Mapper:
    mapper = routes.Mapper()
    for path in ROUTES:
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


class Dispatcher:
    """Finds and calls the handler; turns domain errors and an unreachable
    database into responses."""

    def __init__(self) -> None:
        self.mapper = _make_mapper()

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
            handlers = ROUTES[template]
            allowed = ", ".join(handlers)
            request.environ["placement.allowed_methods"] = allowed
            handler = handlers.get(request.method)
            if handler is None:
                raise errors.http_error(
                    webob.exc.HTTPMethodNotAllowed,
                    "The method specified is not allowed for this resource.",
                    headers=[("Allow", allowed)])
            request.urlvars = match
            return _run(handler, request)
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
