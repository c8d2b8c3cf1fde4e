"""/resource_providers and /resource_providers/{uuid}: create, show, list
(with its filters), update (names and trees) and delete providers."""

from __future__ import annotations

import datetime
from typing import NamedTuple

import webob
from oslo_utils import uuidutils

from placement import errors, microversion, versions, wsgi_util
from placement.candidates import lists as provider_lists
from placement.candidates.memo import Key, Memo
from placement.db import api as db_api
from placement.handlers import util as handler_util
from placement.objects import resource_provider as rp_obj
from placement.schemas import resource_provider as schema

# The provider's links, each with the version that added it, in that
# order: a version shows the first few.
_LINKS = (
    (versions.MIN_VERSION, "self", ""),
    (versions.MIN_VERSION, "inventories", "/inventories"),
    (versions.MIN_VERSION, "usages", "/usages"),
    (versions.PROVIDER_AGGREGATES, "aggregates", "/aggregates"),
    (versions.TRAITS, "traits", "/traits"),
    (versions.PROVIDER_ALLOCATIONS_LINK, "allocations", "/allocations"),
)

# Providers' JSON, made once per form (URL prefix, links shown, tree
# fields) and provider fields shown. About a kilobyte each at the latest
# version: a list of 20 000 providers stays whole.
_RENDERED = Memo(20000)


class _Form(NamedTuple):
    """What providers' JSON looks like in answers to a request: the URL
    prefix of their links, how many links the version shows, whether it
    shows their tree."""
    prefix: str
    shown: int
    with_tree: bool


def _form(request: webob.Request) -> _Form:
    version = microversion.version_of(request)
    return _Form(wsgi_util.url(request, "/resource_providers/"),
                 next((count for count, (since, _, _) in enumerate(_LINKS) if version < since),
                      len(_LINKS)),
                 version >= versions.PROVIDER_TREES)


def _representations(request: webob.Request, providers: list[rp_obj.ResourceProvider]
                     ) -> list[wsgi_util.JSONFragment]:
    """What the providers look like in answers to ``request``, as JSON. What
    depends on the request is worked out once, and a provider's JSON once
    per form for as long as what it shows stays the same: its key holds the
    form and every provider field the JSON is made of, so a renamed, moved
    or regenerated provider is rendered anew, whoever changed it."""
    prefix, shown, with_tree = _form(request)
    links = _LINKS[:shown]

    def render(provider: rp_obj.ResourceProvider) -> wsgi_util.JSONFragment:
        base = prefix + provider.uuid
        body = {
            "uuid": provider.uuid,
            "name": provider.name,
            "generation": provider.generation,
            "links": [{"rel": rel, "href": base + suffix} for _, rel, suffix in links],
        }
        if with_tree:
            body["parent_provider_uuid"] = provider.parent_provider_uuid
            body["root_provider_uuid"] = provider.root_provider_uuid
        return wsgi_util.json_fragment(body)

    # A loop, not a function per provider: a list has thousands.
    fragments = []
    for provider in providers:
        # one flat tuple (the form's parts in it): a nested one would be
        # hashed again for every provider
        key = (prefix, shown, with_tree, provider.uuid, provider.name, provider.generation,
               provider.parent_provider_uuid, provider.root_provider_uuid)
        fragment = _RENDERED.get(key)
        if fragment is None:
            fragment = _RENDERED.put(key, render(provider))
        fragments.append(fragment)
    return fragments


def _last_modified(providers: list[rp_obj.ResourceProvider]):
    return wsgi_util.newest(provider.updated_at or provider.created_at
                            for provider in providers)


def _provider_response(request: webob.Request, provider: rp_obj.ResourceProvider,
                       location: str | None = None) -> webob.Response:
    return wsgi_util.json_response(
        request, _representations(request, [provider])[0], cache_headers=True,
        last_modified=_last_modified([provider]), location=location)


def create_resource_provider(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    version = microversion.version_of(request)
    data = wsgi_util.extract_json(request, schema.post_schema(version))
    name = data["name"]
    uuid = rp_obj.normalize_uuid(data["uuid"]) if "uuid" in data else uuidutils.generate_uuid()
    try:
        provider = db_api.write(context.db, rp_obj.create, name, uuid,
                                data.get("parent_provider_uuid"))
    except rp_obj.ProviderActionError as error:
        raise errors.bad_request(
            f'Unable to create resource provider "{name}", {uuid}: {error}') from None
    location = wsgi_util.url(request, f"/resource_providers/{provider.uuid}")
    if version >= versions.POST_PROVIDER_RETURNS_BODY:
        return _provider_response(request, provider, location=location)
    return wsgi_util.empty_response(request, status=201, location=location)


def get_resource_provider(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as conn:
        provider = rp_obj.get_by_uuid(conn, request.urlvars["uuid"])
    return _provider_response(request, provider)


def update_resource_provider(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    version = microversion.version_of(request)
    uuid = request.urlvars["uuid"]
    handler_util.require_provider(request)
    data = wsgi_util.extract_json(request, schema.put_schema(version))
    try:
        provider = db_api.write(
            context.db, rp_obj.update, uuid, data["name"],
            data.get("parent_provider_uuid", rp_obj.UNCHANGED),
            allow_reparenting=version >= versions.REPARENTING)
    except rp_obj.DuplicateProvider as error:
        raise errors.conflict(
            f"Conflicting resource provider {data['name']} already exists.",
            error.code) from None
    except rp_obj.ProviderActionError as error:
        raise errors.bad_request(f"Unable to save resource provider {uuid}: {error}") from None
    return _provider_response(request, provider)


def delete_resource_provider(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    db_api.write(context.db, rp_obj.delete, request.urlvars["uuid"])
    return wsgi_util.empty_response(request)


def list_resource_providers(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    filters, resources, traits = handler_util.parse_list_filters(request)
    with context.db.reader() as conn:
        filters = handler_util.resolve_list_filters(conn, filters, resources, traits)
        listed = provider_lists.list_providers(conn, filters)
    body, last_modified = _list_answer(request, listed)
    return wsgi_util.json_response(request, body, cache_headers=True,
                                   last_modified=last_modified)


class _ListAnswer(Key["tuple[wsgi_util.JSONFragment, datetime.datetime | None]"]):
    """A provider list's JSON in one form, and its newest time."""
    # form (_Form)
    __slots__ = ()


def _list_answer(request: webob.Request, listed: provider_lists.ProviderList
                 ) -> tuple[wsgi_util.JSONFragment, datetime.datetime | None]:
    """The JSON of the list and when it was last modified, made once per
    form (a kept list serves several requests)."""
    key = _ListAnswer(_form(request))
    answer = listed.rendered.get(key)
    if answer is None:
        answer = listed.rendered.put(key, (
            wsgi_util.json_fragment(
                {"resource_providers": _representations(request, listed.providers)}),
            _last_modified(listed.providers)))
    return answer
