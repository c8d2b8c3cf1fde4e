"""/resource_providers/{uuid}/aggregates: the aggregates a provider is in."""

from __future__ import annotations

import webob

from placement import microversion, versions, wsgi_util
from placement.db import api as db_api
from placement.handlers import util as handler_util
from placement.objects import aggregate as aggregate_obj
from placement.objects import resource_provider as rp_obj
from placement.schemas import aggregate as schema


def _response(request: webob.Request, aggregate_uuids: list[str],
              provider: rp_obj.ResourceProvider) -> webob.Response:
    body: dict = {"aggregates": aggregate_uuids}
    if microversion.version_of(request) >= versions.AGGREGATE_GENERATION:
        body["resource_provider_generation"] = provider.generation
    # Aggregates are computed data: Last-Modified is now.
    return wsgi_util.json_response(request, body, cache_headers=True)


def get_aggregates(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as conn:
        provider = rp_obj.get_by_uuid(conn, request.urlvars["uuid"])
        aggregate_uuids = aggregate_obj.uuids_of(conn, provider)
    return _response(request, aggregate_uuids, provider)


def set_aggregates(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    version = microversion.version_of(request)
    uuid = request.urlvars["uuid"]
    handler_util.require_provider(request)
    data = wsgi_util.extract_json(request, schema.put_schema(version))
    if version >= versions.AGGREGATE_GENERATION:
        given, generation = data["aggregates"], data["resource_provider_generation"]
    else:
        given, generation = data, None
    # Two forms of one uuid may be given: the set holds it once.
    aggregate_uuids = list(dict.fromkeys(map(aggregate_obj.stored_form, given)))
    provider = db_api.write(context.db, aggregate_obj.set_for_provider, uuid,
                            aggregate_uuids, generation)
    return _response(request, aggregate_uuids, provider)
