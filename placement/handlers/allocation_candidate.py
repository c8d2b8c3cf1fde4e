"""GET /allocation_candidates: which sets of providers could satisfy a
request now, as bodies usable for PUT /allocations/{consumer}; and GET
/allocation_candidates/explain: why the same query gets those."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import webob

from placement import metrics, microversion, query, versions, wsgi_util
from placement.candidates import explain, find
from placement.candidates.answers import (
    AllocationRequest,
    Candidates,
    OneProviderRequest,
    ProviderSummary,
    SpreadRequest,
)
from placement.candidates.memo import Key
from placement.candidates.model import RequestGroup, SearchOptions
from placement.context import RequestContext
from placement.schemas import allocation_candidate as schema
from placement.search_query import search_request
from placement.versions import Version


def list_allocation_candidates(request: webob.Request) -> webob.Response:
    context, version, groups, options = _searched(request, schema.query_schema)
    with context.db.reader() as connection:
        candidates = find.find(
            connection, groups, options,
            summarize_all_classes=version >= versions.ALL_CLASSES_IN_SUMMARIES)
    metrics.observe_allocation_candidates(len(candidates.allocation_requests))
    return wsgi_util.json_response(request, _body(candidates, version), cache_headers=True)


def explain_allocation_candidates(request: webob.Request) -> webob.Response:
    """GET /allocation_candidates/explain: the query of the candidates (and
    ``provider=<uuid>``, repeatable) answered with the funnel of its
    constraints instead of the candidates."""
    context, _, groups, options = _searched(request, schema.explain_query_schema)
    provider_uuids = query.parse_provider_uuids(wsgi_util.query_values(request, "provider"))
    with context.db.reader() as connection:
        explanation = explain.explain(connection, groups, options, provider_uuids)
    return wsgi_util.json_response(request, dataclasses.asdict(explanation))


def _searched(request: webob.Request, query_schema_of: Callable[[Version], dict]
              ) -> tuple[RequestContext, Version, list[RequestGroup], SearchOptions]:
    """The checks both candidate routes make (Accept, the policy of the
    route) and their query, validated against ``query_schema_of`` the
    request's version: the context, the version, the request groups and
    options."""
    wsgi_util.check_accept(request)
    context = wsgi_util.authorize(request)
    version = microversion.version_of(request)
    groups, options = search_request(request, version, query_schema_of(version),
                                      context.conf.placement)
    return context, version, groups, options


# Response ----------------------------------------------------------------

def _body(candidates: Candidates, version: Version) -> wsgi_util.JSONFragment:
    """The JSON of the answer at ``version``, made once per body format (a
    kept answer serves several requests). A provider summary keeps its
    own JSON per format (a summary serves every answer while its provider
    and usages are the same); the allocation requests are an answer's own."""
    request_format = (version >= versions.DICT_ALLOCATIONS,
                      version >= versions.MAPPINGS)
    summary_format = (version >= versions.CANDIDATE_SUMMARY_TRAITS,
                      version >= versions.NESTED_CANDIDATES)
    body_key = _RenderedAs((request_format, summary_format))
    body = candidates.rendered.get(body_key)
    if body is None:
        summary_key = _RenderedAs(summary_format)
        body = candidates.rendered.put(body_key, wsgi_util.json_fragment({
            "allocation_requests": _allocation_requests(candidates.allocation_requests,
                                                        *request_format),
            "provider_summaries": {
                summary.uuid: _rendered_summary(summary, summary_key)
                for summary in candidates.provider_summaries},
        }))
    return body


def _allocation_requests(items: list[AllocationRequest | OneProviderRequest | SpreadRequest],
                         as_dict: bool, with_mappings: bool
                         ) -> list[dict] | wsgi_util.JSONFragment:
    """The JSON of the allocation requests. From 1.12, written as text:
    uuids and group suffixes need no escaping (the schemas admit only
    uuids, and suffixes of letters, digits, ``_`` and ``-``), and the
    resources of a provider, one dict shared by the many requests taking
    the same (find._allocation_requests), are encoded once."""
    if not as_dict:  # before 1.12 (and so without mappings)
        return [{"allocations": [{"resource_provider": {"uuid": uuid}, "resources": resources}
                                 for uuid, resources in item.allocations.items()]}
                for item in items]
    encode = wsgi_util.encode_json
    # id(resources) -> their JSON, for this answer (its items hold the dicts)
    encoded: dict[int, str] = {}

    def resources_json(resources: dict[str, int]) -> str:
        text = encoded.get(id(resources))
        if text is None:
            text = encoded[id(resources)] = encode(resources).decode()
        return text

    def uuids_json(uuids: Iterable[str]) -> str:
        return "[" + ",".join([f'"{uuid}"' for uuid in uuids]) + "]"

    parts = []
    # The text between a OneProviderRequest's two uuids, for the last
    # (resources, suffix) written: the requests of a lone group all share
    # them.
    last: tuple[dict[str, int] | None, str | None] = (None, None)
    between = ""
    for item in items:
        kind = type(item)
        if kind is OneProviderRequest:  # the most common request
            uuid, resources, suffix = item
            if last[0] is not resources or last[1] != suffix:
                last = (resources, suffix)
                between = (f'":{{"resources":{resources_json(resources)}}}}}'
                           + (f',"mappings":{{"{suffix}":["' if with_mappings else "}"))
            parts.append('{"allocations":{"' + uuid + between + uuid + '"]}}' if with_mappings
                         else '{"allocations":{"' + uuid + between)
            continue
        if kind is SpreadRequest:  # the next most common
            givers, suffix, uuids = item
            allocations_json = "{" + ",".join([
                f'"{uuid}":{{"resources":{resources_json(resources)}}}'
                for uuid, resources in givers]) + "}"
            mappings_json = f'{{"{suffix}":{uuids_json(uuids)}}}'
        else:
            allocations_json = "{" + ",".join([
                f'"{uuid}":{{"resources":{resources_json(resources)}}}'
                for uuid, resources in item.allocations.items()]) + "}"
            mappings_json = "{" + ",".join([
                f'"{suffix}":{uuids_json(uuids)}'
                for suffix, uuids in item.mappings.items()]) + "}"
        parts.append(f'{{"allocations":{allocations_json},"mappings":{mappings_json}}}'
                     if with_mappings else f'{{"allocations":{allocations_json}}}')
    return wsgi_util.JSONFragment(("[" + ",".join(parts) + "]").encode())


def _rendered_summary(summary: ProviderSummary, key: _RenderedAs) -> wsgi_util.JSONFragment:
    """The JSON of ``summary`` in the body format of ``key``, made once per
    summary and format."""
    fragment = summary.rendered.get(key)
    if fragment is None:
        fragment = summary.rendered.put(
            key, wsgi_util.json_fragment(_provider_summary(summary, *key[1])))
    return fragment


class _RenderedAs(Key[wsgi_util.JSONFragment]):
    """JSON in one body format: a summary's (with traits, nested), a whole
    answer's (the allocation requests' format and the summaries')."""
    # body_format: tuple[bool, bool], or a pair of them (key[1])
    __slots__ = ()


def _provider_summary(summary: ProviderSummary, with_traits: bool, nested: bool) -> dict:
    body: dict = {"resources": {
        class_name: {"capacity": usage.capacity, "used": usage.used}
        for class_name, usage in summary.resources.items()
    }}
    if with_traits:
        body["traits"] = summary.traits
    if nested:
        body["parent_provider_uuid"] = summary.parent_provider_uuid
        body["root_provider_uuid"] = summary.root_provider_uuid
    return body
