"""Allocation candidates: which sets of providers could satisfy a request now.

``find`` validates the names of the request, loads what the search needs
with a fixed number of queries (independent of the number of providers;
long id lists are sent in chunks; with a small limit, the trees are loaded
in a few batches as the search reaches them), runs the in-memory search of
``placement.objects.candidate_search`` and describes the providers involved.
It never writes.
"""

from __future__ import annotations

import dataclasses
import itertools
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
    Provider,
    RequestGroup,
    Result,
    SearchOptions,
    World,
    search,
)
from placement.objects.inventory import InventoryUsage

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

    world = _LoadedWorld(connection, groups, options, class_ids)
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


def _among(column: sa.ColumnElement, ids: list[int]) -> sa.ColumnElement:
    """``column IN (ids)`` with one expanding parameter: in_() of a list
    coerces every element, which costs milliseconds for long lists."""
    return column.in_(sa.bindparam(None, ids, type_=column.type, expanding=True))


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
                  # the fields of InventoryUsage, in order (see _inventory_of)
                  _inv.c.total, _inv.c.reserved, _inv.c.min_unit, _inv.c.max_unit,
                  _inv.c.step_size, _inv.c.allocation_ratio, used.label("used"))
        .join(_rp, _rp.c.id == _inv.c.resource_provider_id)
        .where(condition)
    ).all()


def _inventory_of(row: sa.Row) -> InventoryUsage:
    # positional: attribute access on thousands of rows costs more
    return InventoryUsage(*row[3:])


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


class _LoadedWorld(World):
    """The part of the database the search needs, loaded as the search goes:
    the trees of the anchors (roots) in batches of growing size, each batch
    just before its anchors are searched, with the sharing providers serving
    them. With a limit, the search usually stops long before the last batch.

    Every tree that has an inventory of a requested class or a sharing
    provider serving it is an anchor. Trees are loaded with the inventories
    of the requested classes and the traits and aggregates the request
    names; providers without a requested class matter only to resourceless
    groups and same_subtree (and to summaries, loaded later), so whole trees
    are loaded only when the request has those.
    """

    def __init__(self, connection: sa.engine.Connection, groups: list[RequestGroup],
                 options: SearchOptions, class_ids: dict[str, int]):
        self._connection = connection
        self._class_names = {class_id: name for name, class_id in class_ids.items()}
        self._whole_trees = bool(options.same_subtree) or not all(
            group.resources for group in groups)
        # Everything is consumed anyway without a limit or when the results
        # are sampled or counted first.
        everything = (options.limit is None or options.randomize or options.breadth_first
                      or options.max_candidates > 0)
        self._first_batch = None if everything else max(8, options.limit)

        has_nesting = connection.execute(
            sa.select(_rp.c.id).where(_rp.c.parent_provider_id.is_not(None)).limit(1)
        ).first() is not None
        in_tree_uuids = {group.in_tree for group in groups if group.in_tree is not None}
        tree_roots_by_uuid = {}
        if in_tree_uuids:
            tree_roots_by_uuid = dict(connection.execute(
                sa.select(_rp.c.uuid, _rp.c.root_provider_id)
                .where(_rp.c.uuid.in_(sorted(in_tree_uuids)))).all())
        super().__init__({}, _sharing_anchors(connection), has_nesting, tree_roots_by_uuid)

        roots = set().union(*self.sharing_anchors.values())
        roots.update(connection.execute(
            sa.select(_rp.c.root_provider_id).distinct()
            .join(_inv, _inv.c.resource_provider_id == _rp.c.id)
            .where(_inv.c.resource_class_id.in_(sorted(self._class_names)))).scalars())
        self._anchor_ids = sorted(roots)
        self._traits = self._named_traits(groups, options)
        self._aggregates = self._named_aggregates(groups)

    def _named_traits(self, groups: list[RequestGroup], options: SearchOptions
                      ) -> dict[int, frozenset[str]]:
        trait_names = set(options.root_traits.names()).union(
            *(group.traits.names() for group in groups))
        traits: dict[int, set[str]] = defaultdict(set)
        if trait_names:
            for provider_id, name in self._connection.execute(
                    sa.select(_rp_trait.c.resource_provider_id, _trait.c.name)
                    .join(_trait, _trait.c.id == _rp_trait.c.trait_id)
                    .where(_trait.c.name.in_(sorted(trait_names)))):
                traits[provider_id].add(name)
        return {provider_id: frozenset(names) for provider_id, names in traits.items()}

    def _named_aggregates(self, groups: list[RequestGroup]) -> dict[int, frozenset[str]]:
        aggregate_uuids = set().union(*(group.aggregates.names() for group in groups))
        aggregates: dict[int, set[str]] = defaultdict(set)
        for chunk in _chunks(aggregate_uuids):
            for provider_id, aggregate_uuid in self._connection.execute(
                    sa.select(_rp_agg.c.resource_provider_id, _agg.c.uuid)
                    .join(_agg, _agg.c.id == _rp_agg.c.aggregate_id)
                    .where(_agg.c.uuid.in_(chunk))):
                aggregates[provider_id].add(aggregate_uuid)
        return {provider_id: frozenset(uuids) for provider_id, uuids in aggregates.items()}

    def anchors(self) -> Iterator[int]:
        # Each anchor usually gives a result or more: a first batch of
        # ``limit`` anchors mostly suffices, growing if it does not.
        size, start = self._first_batch or len(self._anchor_ids), 0
        if 2 * size >= len(self._anchor_ids):
            # Two batches would cost more than one, and one is cheaper
            # without naming its roots.
            self._load(self._anchor_ids, every_root=True)
            yield from self._anchor_ids
            return
        while start < len(self._anchor_ids):
            batch = self._anchor_ids[start:start + size]
            self._load(batch)
            yield from batch
            start += size
            size *= 2

    def _load(self, batch: list[int], every_root: bool = False) -> None:
        """The trees of ``batch`` (``every_root``: all anchors) and the
        sharing providers serving them, unless already loaded."""
        batch_set = set(batch)
        sharing_ids = [
            provider_id for provider_id, anchors in sorted(self.sharing_anchors.items())
            if provider_id not in self.providers and not anchors.isdisjoint(batch_set)]
        # chunks of roots, the sharing providers (a handful per thousand
        # providers) along with the first ones
        conditions = [
            sa.or_(*(condition for condition in pair if condition is not None))
            for pair in itertools.zip_longest(
                [_among(_rp.c.root_provider_id, chunk) for chunk in _chunks(batch)],
                [_among(_rp.c.id, chunk) for chunk in _chunks(sharing_ids)])]
        requested = _inv.c.resource_class_id.in_(sorted(self._class_names))
        inventory_rows = {}
        for condition in [requested] if every_root else [sa.and_(requested, condition)
                                                         for condition in conditions]:
            for row in _inventories(self._connection, condition):
                if row[0] not in self.providers:
                    inventory_rows[row[0], row[1]] = row
        if not self._whole_trees:
            wanted = batch_set.union(sharing_ids, (key[0] for key in inventory_rows))
            conditions = [_among(_rp.c.id, chunk) for chunk in _chunks(wanted)]
        rows = []
        for condition in conditions:
            rows += self._connection.execute(
                sa.select(_rp.c.id, _rp.c.uuid, _rp.c.parent_provider_id,
                          _rp.c.root_provider_id).where(condition)).all()
        providers = {}
        for provider_id, uuid, parent_id, root_id in sorted(rows, key=itemgetter(0)):
            if provider_id not in self.providers:
                providers[provider_id] = Provider(
                    provider_id, uuid, parent_id, root_id,
                    traits=self._traits.get(provider_id, frozenset()),
                    aggregates=self._aggregates.get(provider_id, frozenset()))
        for (provider_id, class_id), row in inventory_rows.items():
            providers[provider_id].inventories[self._class_names[class_id]] = _inventory_of(row)
        self.add_providers(list(providers.values()), batch)


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
