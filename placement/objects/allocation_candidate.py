"""Allocation candidates: which sets of providers could satisfy a request now.

``find`` validates the names of the request, loads what the search needs
with a fixed number of queries (independent of the number of providers;
long id lists are sent in chunks), runs the in-memory search of
``placement.objects.candidate_search`` and describes the providers involved.
It never writes.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Iterator
from operator import itemgetter

import os_traits
import sqlalchemy as sa
from sqlalchemy.orm import aliased

from placement import exceptions
from placement.db import tables
from placement.objects import inventory, resource_class, resource_provider, trait
from placement.objects.candidate_search import (
    Inventory,
    Provider,
    RequestGroup,
    Result,
    SearchOptions,
    World,
    search,
)

__all__ = ["AllocationRequest", "Candidates", "ProviderSummary", "RequestGroup",
           "SearchOptions", "find"]

_rp = tables.resource_providers
_inv = tables.inventories
_alloc = tables.allocations
_trait = tables.traits
_rp_trait = tables.resource_provider_traits
_agg = tables.placement_aggregates
_rp_agg = tables.resource_provider_aggregates

# Ids per IN (...) list: well below every backend's limit on bound parameters.
_CHUNK = 500


@dataclasses.dataclass
class AllocationRequest:
    # provider uuid -> {resource class: amount}
    allocations: dict[str, dict[str, int]]
    # group suffix -> uuids of the providers that satisfied it
    mappings: dict[str, list[str]]


@dataclasses.dataclass
class ResourceSummary:
    capacity: int
    used: int


@dataclasses.dataclass
class ProviderSummary:
    uuid: str
    parent_provider_uuid: str | None
    root_provider_uuid: str
    resources: dict[str, ResourceSummary]
    traits: list[str]


@dataclasses.dataclass
class Candidates:
    allocation_requests: list[AllocationRequest]
    provider_summaries: list[ProviderSummary]


def find(connection: sa.engine.Connection, groups: list[RequestGroup],
         options: SearchOptions, summarize_all_classes: bool) -> Candidates:
    """The allocation candidates for ``groups`` (resources keyed by class
    name). Unknown classes or traits raise InvalidInput. Summaries list every
    class a provider has when ``summarize_all_classes``, else only the
    requested ones."""
    # in request order, so that the first unknown name is the one reported
    requested_classes = list(dict.fromkeys(
        name for group in groups for name in group.resources))
    try:
        class_ids = resource_class.ids_from_names(connection, requested_classes)
    except exceptions.NotFound as error:
        raise exceptions.InvalidInput(
            f"Invalid resource class in resources parameter: {error}") from None
    trait_names = [name for traits in [*(group.traits for group in groups), options.root_traits]
                   for name in sorted(traits.names())]
    try:
        trait.ids_from_names(connection, trait_names)
    except exceptions.NotFound as error:
        raise exceptions.InvalidInput(str(error)) from None

    world = _load_world(connection, groups, options, class_ids)
    results = search(world, groups, options)
    summaries = _summaries(connection, world, results, options.nested_aware,
                           None if summarize_all_classes else set(requested_classes))
    return Candidates([_allocation_request(world, result) for result in results], summaries)


def _allocation_request(world: World, result: Result) -> AllocationRequest:
    allocations: dict[str, dict[str, int]] = defaultdict(dict)
    for (provider_id, class_name), amount in result.allocations.items():
        allocations[world.providers[provider_id].uuid][class_name] = amount
    mappings = {suffix: [world.providers[p].uuid for p in sorted(providers)]
                for suffix, providers in result.mappings.items()}
    return AllocationRequest(dict(allocations), mappings)


# Loading -----------------------------------------------------------------

def _chunks(ids: Iterable, size: int = _CHUNK) -> Iterator[list]:
    ids = sorted(ids)
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def _inventories(connection: sa.engine.Connection, condition: sa.ColumnElement
                 ) -> list[sa.Row]:
    """Inventory rows matching ``condition`` with ``used`` (sum of allocations)."""
    used = (
        # cast: SUM is a DECIMAL on MySQL
        sa.select(sa.cast(sa.func.coalesce(sa.func.sum(_alloc.c.used), 0), sa.Integer))
        .where(_alloc.c.resource_provider_id == _inv.c.resource_provider_id,
               _alloc.c.resource_class_id == _inv.c.resource_class_id)
        .scalar_subquery()
    )
    return connection.execute(
        sa.select(_inv.c.resource_provider_id, _inv.c.resource_class_id,
                  _rp.c.root_provider_id,
                  # the fields of Inventory, in order (see _inventory_of)
                  _inv.c.total, _inv.c.reserved, _inv.c.min_unit, _inv.c.max_unit,
                  _inv.c.step_size, _inv.c.allocation_ratio, used.label("used"))
        .join(_rp, _rp.c.id == _inv.c.resource_provider_id)
        .where(condition)
    ).all()


def _inventory_of(row: sa.Row) -> Inventory:
    # positional: attribute access on thousands of rows costs more
    return Inventory(*row[3:])


def _sharing_anchors(connection: sa.engine.Connection) -> dict[int, set[int]]:
    """Sharing provider id -> roots of the trees it shares with, its own
    root included (one query)."""
    sharing = aliased(_rp)
    sharing_agg = aliased(_rp_agg)
    member_agg = aliased(_rp_agg)
    member = aliased(_rp)
    rows = connection.execute(
        sa.select(sharing.c.id, sharing.c.root_provider_id,
                  member.c.root_provider_id.label("anchor_id"))
        .select_from(_rp_trait)
        .join(_trait, _trait.c.id == _rp_trait.c.trait_id)
        .join(sharing, sharing.c.id == _rp_trait.c.resource_provider_id)
        .outerjoin(sharing_agg, sharing_agg.c.resource_provider_id == sharing.c.id)
        .outerjoin(member_agg, member_agg.c.aggregate_id == sharing_agg.c.aggregate_id)
        .outerjoin(member, member.c.id == member_agg.c.resource_provider_id)
        .where(_trait.c.name == os_traits.MISC_SHARES_VIA_AGGREGATE)
    )
    anchors: dict[int, set[int]] = defaultdict(set)
    for row in rows:
        anchors[row.id].add(row.root_provider_id)
        if row.anchor_id is not None:
            anchors[row.id].add(row.anchor_id)
    return dict(anchors)


def _load_world(connection: sa.engine.Connection, groups: list[RequestGroup],
                options: SearchOptions, class_ids: dict[str, int]) -> World:
    """Every tree that has an inventory of a requested class or a sharing
    provider serving it, with the inventories, traits and aggregates the
    request names."""
    class_names = {class_id: name for name, class_id in class_ids.items()}
    inventory_rows = []
    for chunk in _chunks(class_ids.values()):
        inventory_rows += _inventories(connection, _inv.c.resource_class_id.in_(chunk))
    has_nesting = connection.execute(
        sa.select(_rp.c.id).where(_rp.c.parent_provider_id.is_not(None)).limit(1)
    ).first() is not None
    sharing_anchors = _sharing_anchors(connection)

    # Providers without a requested class matter only to resourceless groups
    # and same_subtree (and to summaries, loaded later): load whole trees
    # only when the request has those.
    roots = {row[2] for row in inventory_rows}.union(*sharing_anchors.values())
    if options.same_subtree or not all(group.resources for group in groups):
        wanted, column = roots, _rp.c.root_provider_id
    else:
        wanted, column = roots | {row[0] for row in inventory_rows}, _rp.c.id
    providers: dict[int, Provider] = {}
    for chunk in _chunks(wanted):
        for provider_id, uuid, parent_id, root_id in connection.execute(
                sa.select(_rp.c.id, _rp.c.uuid, _rp.c.parent_provider_id,
                          _rp.c.root_provider_id)
                .where(column.in_(chunk))
                .order_by(_rp.c.id)):
            providers[provider_id] = Provider(provider_id, uuid, parent_id, root_id)
    for row in inventory_rows:
        providers[row[0]].inventories[class_names[row[1]]] = _inventory_of(row)

    trait_names = set(options.root_traits.names()).union(
        *(group.traits.names() for group in groups))
    traits: dict[int, set[str]] = defaultdict(set)
    if trait_names:
        for provider_id, name in connection.execute(
                sa.select(_rp_trait.c.resource_provider_id, _trait.c.name)
                .join(_trait, _trait.c.id == _rp_trait.c.trait_id)
                .where(_trait.c.name.in_(sorted(trait_names)))):
            traits[provider_id].add(name)

    aggregate_uuids = set().union(*(set().union(*group.aggregates.required,
                                                group.aggregates.forbidden)
                                    for group in groups))
    aggregates: dict[int, set[str]] = defaultdict(set)
    for chunk in _chunks(aggregate_uuids):
        for provider_id, aggregate_uuid in connection.execute(
                sa.select(_rp_agg.c.resource_provider_id, _agg.c.uuid)
                .join(_agg, _agg.c.id == _rp_agg.c.aggregate_id)
                .where(_agg.c.uuid.in_(chunk))):
            aggregates[provider_id].add(aggregate_uuid)
    for provider_id in traits.keys() & providers.keys():
        providers[provider_id].traits = frozenset(traits[provider_id])
    for provider_id in aggregates.keys() & providers.keys():
        providers[provider_id].aggregates = frozenset(aggregates[provider_id])

    in_tree_uuids = {group.in_tree for group in groups if group.in_tree is not None}
    tree_roots_by_uuid = {}
    if in_tree_uuids:
        tree_roots_by_uuid = dict(connection.execute(
            sa.select(_rp.c.uuid, _rp.c.root_provider_id)
            .where(_rp.c.uuid.in_(sorted(in_tree_uuids)))).all())
    return World(providers, sharing_anchors, has_nesting, tree_roots_by_uuid)


# Provider summaries --------------------------------------------------------

def _summaries(connection: sa.engine.Connection, world: World, results: list[Result],
               nested_aware: bool, only_classes: set[str] | None) -> list[ProviderSummary]:
    """Every provider of every tree giving resources to a result (only the
    giving providers themselves below 1.29 in a nested world)."""
    giving = {provider_id for result in results for provider_id, _ in result.allocations}
    if nested_aware or not world.has_nesting:
        wanted = {world.providers[provider_id].root_id for provider_id in giving}
        column = _rp.c.root_provider_id
    else:
        wanted, column = giving, _rp.c.id
    summarized: list[sa.Row] = []
    traits: dict[int, list[str]] = defaultdict(list)
    inventory_rows = []
    for chunk in _chunks(wanted):
        rows = connection.execute(
            resource_provider.select_providers().where(column.in_(chunk))).all()
        summarized += rows
        provider_ids = [row.id for row in rows]
        for provider_id, name in connection.execute(
                sa.select(_rp_trait.c.resource_provider_id, _trait.c.name)
                .join(_trait, _trait.c.id == _rp_trait.c.trait_id)
                .where(_rp_trait.c.resource_provider_id.in_(provider_ids))
                .order_by(_trait.c.id)):
            traits[provider_id].append(name)
        inventory_rows += _inventories(connection, _inv.c.resource_provider_id.in_(provider_ids))

    resources: dict[int, dict[str, ResourceSummary]] = defaultdict(dict)
    class_names = resource_class.names_from_ids(
        connection, {row[1] for row in inventory_rows})
    # positional (see _inventories): thousands of rows
    for (provider_id, class_id, _, total, reserved, _, _, _, allocation_ratio,
         used) in sorted(inventory_rows, key=itemgetter(1)):
        class_name = class_names[class_id]
        if only_classes is None or class_name in only_classes:
            resources[provider_id][class_name] = ResourceSummary(
                inventory.capacity(total, reserved, allocation_ratio), used)

    return [
        ProviderSummary(
            uuid=row.uuid,
            parent_provider_uuid=row.parent_provider_uuid,
            root_provider_uuid=row.root_provider_uuid,
            resources=resources[row.id],
            traits=traits[row.id],
        )
        for row in sorted(summarized, key=lambda row: row.id)
    ]
