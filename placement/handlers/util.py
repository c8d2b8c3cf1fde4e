"""Helpers the handlers of several resources share: the provider named by
the path, a consumer's entry of an allocations body, the filters of
provider lists."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
import webob

from placement import errors, exceptions, microversion, query, versions, wsgi_util
from placement.objects import allocation as allocation_obj
from placement.objects import consumer as consumer_obj
from placement.objects import resource_class as rc_obj
from placement.objects import resource_provider as rp_obj
from placement.objects import trait as trait_obj
from placement.schemas import resource_provider as provider_schema

T = TypeVar("T")


def path_provider(connection: sa.engine.Connection, request: webob.Request,
                  not_found: str) -> rp_obj.ResourceProvider:
    """The provider named by the path's ``uuid``; ``not_found`` as in
    ``path_lookup``."""
    return path_lookup(request, not_found, functools.partial(rp_obj.get_by_uuid, connection))


def path_lookup(request: webob.Request, not_found: str, lookup: Callable[[str], T]) -> T:
    """``lookup`` of the path's ``uuid``. Routes word its 404 in their own
    ways (as upstream does): ``not_found`` is the message, a template with
    ``{uuid}`` and ``{error}`` (the lookup's NotFound message)."""
    uuid = request.urlvars["uuid"]
    try:
        return lookup(uuid)
    except exceptions.NotFound as error:
        raise errors.not_found(not_found.format(uuid=uuid, error=error)) from None


def require_provider(request: webob.Request) -> rp_obj.ResourceProvider:
    """The provider of the path, read in a transaction of its own. Write
    routes call this before parsing the body, so that a missing provider is
    a 404 before any body error."""
    with wsgi_util.context_of(request).db.reader() as connection:
        return rp_obj.get_by_uuid(connection, request.urlvars["uuid"])


def consumer_request(request: webob.Request, consumer_uuid: str, data: dict
                      ) -> allocation_obj.ConsumerAllocations:
    """One consumer's entry of a PUT or POST body (dict form), as a write
    request: the owner (the configured "incomplete" one below 1.8), the type
    (1.38+) and the expected generation (1.28+)."""
    version = microversion.version_of(request)
    if version >= versions.ALLOCATION_OWNER:
        owner = consumer_obj.Owner(data["project_id"], data["user_id"],
                                   data.get("consumer_type"))
    else:
        conf = wsgi_util.context_of(request).conf.placement
        owner = consumer_obj.Owner(conf.incomplete_consumer_project_id,
                                   conf.incomplete_consumer_user_id)
    return allocation_obj.ConsumerAllocations(
        consumer_uuid=consumer_uuid,
        allocations={provider_uuid: entry["resources"]
                     for provider_uuid, entry in data["allocations"].items()},
        owner=owner,
        check_generation=version >= versions.CONSUMER_GENERATION,
        generation=data.get("consumer_generation"),
    )


# -- the filters of provider lists (GET /resource_providers, GET /capacity/providers)

def parse_list_filters(request: webob.Request, version: versions.Version | None = None
                       ) -> tuple[rp_obj.ProviderFilters, dict[str, int], query.TraitFilter]:
    """The list filters with class and trait names still unresolved, in the
    spec's order: schema, member_of, required, resources; as ``version``
    (default: the request's microversion) takes them."""
    version = version or microversion.version_of(request)
    params = wsgi_util.query_params(request, provider_schema.list_query_schema(version))
    filters = rp_obj.ProviderFilters(
        name=params.get("name"), uuid=params.get("uuid"), in_tree=params.get("in_tree"))
    if "member_of" in params:
        aggregates = query.parse_member_of(wsgi_util.query_values(request, "member_of"),
                                           version)
        filters = dataclasses.replace(filters, member_of=aggregates.required,
                                      forbidden_aggregates=aggregates.forbidden)
    traits = query.TraitFilter()
    if "required" in params:
        traits = query.parse_required(wsgi_util.query_values(request, "required"), version)
    resources = query.parse_resources(params["resources"]) if "resources" in params else {}
    return filters, resources, traits


def resolve_list_filters(conn, filters: rp_obj.ProviderFilters, resources: dict[str, int],
                         traits: query.TraitFilter) -> rp_obj.ProviderFilters:
    """``filters`` with the class and trait ids; 400 for unknown names."""
    try:
        trait_ids = trait_obj.ids_from_names(conn, sorted(traits.names()))
    except exceptions.NotFound as error:
        raise errors.bad_request(f'Invalid trait(s) in "required" parameter: {error}') from None
    try:
        class_ids = rc_obj.ids_from_names(conn, resources)
    except exceptions.NotFound as error:
        raise errors.bad_request(
            f"Invalid resource class in resources parameter: {error}") from None
    return dataclasses.replace(
        filters,
        required_traits=[{trait_ids[name] for name in any_of} for any_of in traits.required],
        forbidden_traits={trait_ids[name] for name in traits.forbidden},
        resources={class_ids[name]: amount for name, amount in resources.items()})
