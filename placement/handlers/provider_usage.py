"""GET /capacity/providers, an extension of ours: every provider's
inventories and usages in one request, filtered as GET /resource_providers
is (at the newest microversion, whatever the request's), for monitoring
(an exporter otherwise asks two or three routes per provider)."""

from __future__ import annotations

import webob

from placement import wsgi_util
from placement.candidates import inventory_usages
from placement.candidates import lists as provider_lists
from placement.handlers import util as handler_util
from placement.objects import resource_provider as rp_obj
from placement.schemas import capacity_providers as schema

_UNFILTERED = rp_obj.ProviderFilters()


def list_provider_usages(request: webob.Request) -> webob.Response:
    """GET /capacity/providers"""
    wsgi_util.check_accept(request)
    context = wsgi_util.authorize(request)
    filters, resources, traits = handler_util.parse_list_filters(
        request, schema.FILTERS_VERSION)
    with context.db.reader() as connection:
        filters = handler_util.resolve_list_filters(connection, filters, resources, traits)
        if filters == _UNFILTERED:  # the uuids and trees are the copy's
            listed = rp_obj.names_and_generations(connection)
        else:
            listed = [(provider.id, provider.name, provider.generation) for provider in
                      provider_lists.list_providers(connection, filters).providers]
        snapshot = inventory_usages.read(connection)
    body = [entry for entry in (snapshot.report(*provider) for provider in listed)
            if entry is not None]
    return wsgi_util.json_response(request, {"resource_providers": body})
