"""/resource_providers/{uuid}/usages and /usages."""

from __future__ import annotations

import functools

import webob

from placement import microversion, versions, wsgi_util
from placement.handlers import util as handler_util
from placement.objects import usage as usage_obj
from placement.schemas import usage as schema


def list_usages(request: webob.Request) -> webob.Response:
    """GET /resource_providers/{uuid}/usages"""
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as connection:
        generation, usages = handler_util.path_lookup(
            request, "No resource provider with uuid {uuid} found: {error}",
            functools.partial(usage_obj.get_provider_usages, connection))
    body = {"resource_provider_generation": generation, "usages": usages}
    return wsgi_util.json_response(request, body, cache_headers=True)


def _requested_project(request: webob.Request) -> str | None:
    """The project_id of the query string, None if absent or undecodable
    (the query validation then reports the problem)."""
    try:
        return request.GET.get("project_id")
    except UnicodeDecodeError:
        return None


def get_total_usages(request: webob.Request) -> webob.Response:
    """GET /usages?project_id=&user_id=[&consumer_type=]"""
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    # The policy target is the project asked about (a project reader may see
    # its own usages), checked before the query string is validated.
    wsgi_util.authorize(request, target={"project_id": _requested_project(request)})
    by_consumer_type = microversion.version_of(request) >= versions.CONSUMER_TYPES
    params = wsgi_util.query_params(
        request, schema.USAGES_QUERY_V1_38 if by_consumer_type else schema.USAGES_QUERY)
    with context.db.reader() as connection:
        if by_consumer_type:
            usages = usage_obj.get_project_usages_by_consumer_type(
                connection, params["project_id"], params.get("user_id"),
                params.get("consumer_type"))
        else:
            usages = usage_obj.get_project_usages(
                connection, params["project_id"], params.get("user_id"))
    return wsgi_util.json_response(request, {"usages": usages}, cache_headers=True)
