"""/traits (the trait catalogue) and /resource_providers/{uuid}/traits
(the traits of one provider). All routes exist from 1.6."""

from __future__ import annotations

import re

import webob

from placement import errors, wsgi_util
from placement.db import api as db_api
from placement.handlers import util as handler_util
from placement.objects import resource_provider as rp_obj
from placement.objects import trait as trait_obj
from placement.schemas import trait as schema

_CUSTOM_TRAIT = re.compile(schema.CUSTOM_TRAIT["pattern"])
INVALID_TRAIT = ('The trait is invalid. A valid trait must be no longer than 255 '
                 'characters, start with the prefix "CUSTOM_" and use following '
                 'characters: "A"-"Z", "0"-"9" and "_"')


def _newest(traits: list[trait_obj.Trait]):
    return wsgi_util.newest(trait.last_modified for trait in traits)


def _name_filter(value: str) -> dict:
    """``in:A,B`` or ``startswith:P`` -> keyword arguments of list_traits;
    other operators filter nothing."""
    operator, separator, operand = value.partition(":")
    if not separator:
        raise errors.bad_request(
            "Badly formatted name parameter. Expected name query string parameter in "
            f'form: ?name=[in|startswith]:[name1,name2|prefix]. Got: "{value}"')
    if operator == "in":
        return {"names": operand.split(",")}
    if operator == "startswith":
        return {"prefix": operand}
    return {}


def _associated_filter(value: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise errors.bad_request('The query parameter "associated" only accepts "true" or "false"')
    return lowered == "true"


def list_traits(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    params = wsgi_util.query_params(request, schema.LIST_QUERY_SCHEMA)
    filters = _name_filter(params["name"]) if "name" in params else {}
    if "associated" in params:
        filters["associated"] = _associated_filter(params["associated"])
    with context.db.reader() as conn:
        traits = trait_obj.list_traits(conn, **filters)
    return wsgi_util.json_response(request, {"traits": [trait.name for trait in traits]},
                                   cache_headers=True, last_modified=_newest(traits))


def get_trait(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as conn:
        trait = trait_obj.get(conn, request.urlvars["name"])
    return wsgi_util.empty_response(request, cache_headers=True,
                                    last_modified=trait.created_at)


def put_trait(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    name = request.urlvars["name"]
    if len(name) > schema.CUSTOM_TRAIT["maxLength"] or not _CUSTOM_TRAIT.fullmatch(name):
        raise errors.bad_request(INVALID_TRAIT)
    trait, created = db_api.write(context.db, trait_obj.ensure, name)
    return wsgi_util.empty_response(
        request, status=201 if created else 204,
        location=wsgi_util.url(request, f"/traits/{name}"),
        cache_headers=True, last_modified=trait.created_at)


def delete_trait(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    db_api.write(context.db, trait_obj.delete, request.urlvars["name"])
    return wsgi_util.empty_response(request)


def _provider_traits_response(request: webob.Request, traits: list[trait_obj.Trait],
                              provider: rp_obj.ResourceProvider) -> webob.Response:
    body = {"traits": [trait.name for trait in traits],
            "resource_provider_generation": provider.generation}
    return wsgi_util.json_response(request, body, cache_headers=True,
                                   last_modified=_newest(traits))


def list_traits_for_resource_provider(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as conn:
        # Upstream repeats the message on this route.
        provider = handler_util.path_provider(conn, request, "{error}: {error}")
        traits = trait_obj.of_provider(conn, provider)
    return _provider_traits_response(request, traits, provider)


def update_traits_for_resource_provider(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    data = wsgi_util.extract_json(request, schema.SET_PROVIDER_TRAITS_SCHEMA)
    provider, traits = db_api.write(
        context.db, trait_obj.set_for_provider, request.urlvars["uuid"], data["traits"],
        data["resource_provider_generation"])
    return _provider_traits_response(request, traits, provider)


def delete_traits_for_resource_provider(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    db_api.write(context.db, trait_obj.delete_all_for_provider, request.urlvars["uuid"])
    return wsgi_util.empty_response(request)
