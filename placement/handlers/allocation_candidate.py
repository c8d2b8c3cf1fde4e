"""GET /allocation_candidates: which sets of providers could satisfy a
request now, as bodies usable for PUT /allocations/{consumer}; and GET
/allocation_candidates/explain: why the same query gets those."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterable

import webob

from placement import errors, metrics, microversion, query, versions, wsgi_util
from placement.candidates import explain, find
from placement.candidates.answers import (
    AllocationRequest,
    Candidates,
    OneProviderRequest,
    ProviderSummary,
    SpreadRequest,
)
from placement.candidates.filters import TraitFilter
from placement.candidates.memo import Key
from placement.candidates.model import RequestGroup, SearchOptions
from placement.context import RequestContext
from placement.schemas import allocation_candidate as schema
from placement.versions import Version

GROUP_KEY = re.compile(r"^(resources|required|member_of|in_tree)(.*)$")


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


def search_request(request: webob.Request, version: Version, query_schema: dict,
                    placement_conf: object) -> tuple[list[RequestGroup], SearchOptions]:
    """The request groups and search options of the query string, validated
    as at ``version`` against ``query_schema`` (and the search options of
    the ``[placement]`` configuration ``placement_conf``)."""
    wsgi_util.query_params(request, query_schema)
    root_traits = TraitFilter()
    if version >= versions.ROOT_REQUIRED:
        root_traits = query.parse_root_required(
            wsgi_util.query_values(request, "root_required"))
    same_subtree = []
    if version >= versions.SAME_SUBTREE:
        same_subtree = query.parse_same_subtree(
            wsgi_util.query_values(request, "same_subtree"))
    groups = _parse_groups(request, version)
    _check_group_structure(groups, same_subtree, version)
    if version >= versions.FORBIDDEN_TRAITS:
        _check_trait_conflicts(groups)
    group_policy = _first_value(request, "group_policy", query_schema)
    if group_policy is None and sum(group.granular for group in groups) > 1:
        raise errors.bad_request(
            'The "group_policy" parameter is required when specifying more than one '
            '"resources{N}" parameter.')
    limit = _first_value(request, "limit", query_schema)

    options = SearchOptions(
        group_policy=group_policy,
        root_traits=root_traits,
        same_subtree=same_subtree,
        nested_aware=version >= versions.NESTED_CANDIDATES,
        limit=_limit(limit),
        max_candidates=placement_conf.max_allocation_candidates,
        randomize=placement_conf.randomize_allocation_candidates,
        breadth_first=(placement_conf.allocation_candidates_generation_strategy
                       == "breadth-first"),
    )
    return groups, options


# Parsing -----------------------------------------------------------------

# A limit of this many digits or more is above any number of candidates.
_UNLIMITED_DIGITS = 18


def _limit(value: str | None) -> int | None:
    """The ``limit`` (digits, the schema made sure); None for none at all."""
    if value is None or len(value) >= _UNLIMITED_DIGITS:
        return None
    return int(value)


def _first_value(request: webob.Request, key: str, query_schema: dict) -> str | None:
    """The first occurrence of ``key`` (the schema saw only the last one),
    validated by the schema of that property; None when absent or not
    available at this version."""
    values = wsgi_util.query_values(request, key)
    if not values or key not in query_schema["properties"]:
        return None
    if len(values) > 1:  # a lone value is the one the schema saw
        wsgi_util.validate({key: values[0]}, _nothing_required(query_schema),
                           "Invalid query string parameters", wsgi_util.QUERY_FORMAT_CHECKER)
    return values[0]


# query schema -> the same without required properties (one object per
# schema, so that its validator is made once: wsgi_util keeps them by schema)
_NOTHING_REQUIRED: dict[int, tuple[dict, dict]] = {}


def _nothing_required(query_schema: dict) -> dict:
    kept = _NOTHING_REQUIRED.get(id(query_schema))
    if kept is None or kept[0] is not query_schema:
        kept = _NOTHING_REQUIRED[id(query_schema)] = (query_schema,
                                                     {**query_schema, "required": []})
    return kept[1]


def _parse_groups(request: webob.Request, version: Version) -> list[RequestGroup]:
    """The request groups, in order of first appearance; each parameter
    value is parsed in query-string order, so the first bad one is reported
    (all values of a repeated ``required`` or ``member_of`` key where it
    first appears)."""
    groups: dict[str, RequestGroup] = {}
    seen: set[str] = set()
    for key, value in wsgi_util.query(request).items():
        match = GROUP_KEY.match(key)
        if match is None:
            continue
        prefix, suffix = match.groups()
        group = groups.setdefault(suffix, RequestGroup(suffix=suffix, resources={}))
        if prefix == "resources":
            group.resources = query.parse_resources(value)
        elif prefix == "in_tree":
            group.in_tree = query.parse_in_tree(value)
        elif key not in seen:
            seen.add(key)
            values = wsgi_util.query_values(request, key)
            if prefix == "required":
                group.traits = query.parse_required(values, version)
            else:
                group.aggregates = query.parse_member_of(values, version, suffix)
    return list(groups.values())


def _check_group_structure(groups: list[RequestGroup], same_subtree: list[list[str]],
                           version: Version) -> None:
    if version >= versions.SAME_SUBTREE:
        _check_resourceless_groups(groups, same_subtree)
        return
    resourceless = [group for group in groups if not group.resources]
    orphaned_traits = [f"required{group.suffix}" for group in resourceless
                       if group.traits.required]
    if orphaned_traits:
        raise errors.bad_request(
            "All traits parameters must be associated with resources.  Found the "
            f"following orphaned traits keys: {', '.join(orphaned_traits)}")
    orphaned_member_of = [f"member_of{group.suffix}" for group in resourceless
                          if group.aggregates]
    if orphaned_member_of:
        raise errors.bad_request(
            "All member_of parameters must be associated with resources. Found the "
            f"following orphaned member_of keys: {', '.join(orphaned_member_of)}")
    if resourceless:
        raise errors.bad_request("All request groups must specify resources.")
    if not groups:
        raise errors.bad_request(
            "At least one request group (`resources` or `resources{$S}`) is required.")


def _check_resourceless_groups(groups: list[RequestGroup],
                               same_subtree: list[list[str]]) -> None:
    """1.36+: groups without resources are allowed when same_subtree uses them."""
    if not any(group.resources for group in groups):
        raise errors.bad_request(
            "There must be at least one resources or resources[$S] parameter.",
            errors.QUERY_MISSING_VALUE)
    in_subtrees = list(dict.fromkeys(itertools.chain.from_iterable(same_subtree)))
    unbound = [group.suffix for group in groups
               if not group.resources and group.suffix not in in_subtrees]
    if unbound:
        raise errors.bad_request(
            "Resourceless suffixed group request should be specified in `same_subtree` "
            f"query param: bad group(s) - {unbound}.", errors.QUERY_BAD_VALUE)
    suffixes = [group.suffix for group in groups]
    unknown = [suffix for suffix in in_subtrees if suffix not in suffixes]
    if unknown:
        raise errors.bad_request(
            f"Real suffixes should be specified in `same_subtree`: {unknown} not found "
            f"in {suffixes}.", errors.QUERY_BAD_VALUE)


def _check_trait_conflicts(groups: list[RequestGroup]) -> None:
    """A required trait (or every alternative of an in: list) also forbidden."""
    conflicts = []
    for group in groups:
        conflicting = set().union(*(any_of for any_of in group.traits.required
                                    if any_of <= group.traits.forbidden))
        if conflicting:
            conflicts.append(f"required{group.suffix}: ({', '.join(sorted(conflicting))})")
    if conflicts:
        raise errors.bad_request(
            "Conflicting required and forbidden traits found in the following traits "
            f"keys: {', '.join(conflicts)}")


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
    for item in items:
        kind = type(item)
        if kind is OneProviderRequest:  # the most common request
            uuid, resources, suffix = item
            allocations_json = f'{{"{uuid}":{{"resources":{resources_json(resources)}}}}}'
            parts.append(f'{{"allocations":{allocations_json},"mappings":{{"{suffix}":["{uuid}"]}}}}'
                         if with_mappings else f'{{"allocations":{allocations_json}}}')
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
