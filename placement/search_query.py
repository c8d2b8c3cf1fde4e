"""The query of ``GET /allocation_candidates`` read into request groups
and search options (the shape ``GET /capacity`` counts too): handler-layer
code, as ``placement.query`` whose parsers it uses."""

from __future__ import annotations

import itertools
import re

import webob

from placement import errors, query, versions, wsgi_util
from placement.candidates.filters import TraitFilter
from placement.candidates.model import RequestGroup, SearchOptions
from placement.versions import Version

GROUP_KEY = re.compile(r"^(resources|required|member_of|in_tree)(.*)$")


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
