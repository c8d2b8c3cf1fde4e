"""GET /capacity/providers, an extension of ours: every provider's
inventories and usages in one request, filtered as GET /resource_providers
is (at the newest microversion, whatever the request's), for monitoring
(an exporter otherwise asks two or three routes per provider)."""

from __future__ import annotations

import webob

from placement import wsgi_util
from placement.candidates import lists as provider_lists
from placement.handlers import util as handler_util
from placement.objects import provider_usage
from placement.objects import resource_provider as rp_obj
from placement.schemas import capacity_providers as schema

_NOTHING: tuple[dict, dict] = ({}, {})
_UNFILTERED = rp_obj.ProviderFilters()


def list_provider_usages(request: webob.Request) -> webob.Response:
    """GET /capacity/providers"""
    wsgi_util.check_accept(request)
    context = wsgi_util.authorize(request)
    filters, resources, traits = handler_util.parse_list_filters(
        request, schema.FILTERS_VERSION)
    with context.db.reader() as connection:
        filters = handler_util.resolve_list_filters(connection, filters, resources, traits)
        providers = provider_lists.list_providers(connection, filters).providers
        # every provider listed: no list of their ids to send
        report = provider_usage.inventories_and_usages(
            connection, None if filters == _UNFILTERED else [p.id for p in providers])
    body = []
    for provider in providers:
        inventories, usages = report.get(provider.id, _NOTHING)
        body.append({"uuid": provider.uuid, "name": provider.name,
                     "generation": provider.generation,
                     "parent_provider_uuid": provider.parent_provider_uuid,
                     "root_provider_uuid": provider.root_provider_uuid,
                     "inventories": inventories, "usages": usages})
    return wsgi_util.json_response(request, {"resource_providers": body})

