"""GET /capacity (an extension of ours, at every microversion): how many
more instances of a shape, written as the query of GET
/allocation_candidates, fit; with drains. The counting is
``placement.capacity``'s."""

from __future__ import annotations

import urllib.parse

import webob

from placement import versions, wsgi_util
from placement.candidates.model import RequestGroup, SearchOptions
from placement.capacity import report
from placement.schemas import capacity as schema
from placement.search_query import search_request

# Parameters of the route that are not the shape's.
_NOT_SHAPE = ("limit", "group_by", "drain_provider", "drain_aggregate")


def get_capacity(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.authorize(request)
    groups, options = _shape_of(request, context.conf.placement)
    params = wsgi_util.query(request)
    limit = params.get("limit")
    with context.db.reader() as connection:
        answer = report.capacity_answer(
            connection, _shape_text(request), groups, options,
            report.DEFAULT_LIMIT if limit is None else int(limit),
            params.get("group_by") == "aggregate",
            wsgi_util.query_values(request, "drain_provider"), params.get("drain_aggregate"))
    return wsgi_util.json_response(request, answer)


def parse_shape(text: str, placement_conf: object) -> tuple[list[RequestGroup], SearchOptions]:
    """A shape written as a query string (the command's, the configured
    ones), parsed as the route parses it; a bad one raises the 400 the
    route would answer (webob.exc.HTTPBadRequest)."""
    return _shape_of(webob.Request.blank("/capacity?" + text), placement_conf)


def _shape_of(request: webob.Request, placement_conf: object
              ) -> tuple[list[RequestGroup], SearchOptions]:
    """The request groups and options, read as at the newest microversion
    whatever the request's: the extension exists at every one."""
    return search_request(request, versions.MAX_VERSION, schema.QUERY, placement_conf)


def _shape_text(request: webob.Request) -> str:
    return urllib.parse.urlencode([(key, value) for key, value in wsgi_util.query(request).items()
                                   if key not in _NOT_SHAPE], safe=":,!")
