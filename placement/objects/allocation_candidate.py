"""Allocation candidates: which sets of providers could satisfy a request now.

``find`` validates the names of the request, takes the providers from this
process's copy (``placement.objects.provider_cache``, checked against the
database at each request), reads what changes without a generation (usages,
aggregates) with a fixed number of queries (long id lists are sent in
chunks), runs the in-memory search of ``placement.objects.candidate_search``
and describes the providers involved. It never writes.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator

import os_traits
import sqlalchemy as sa
from sqlalchemy.orm import aliased

from placement import exceptions
from placement.db import tables
from placement.objects import provider_cache, resource_class, trait
from placement.objects.candidate_search import (
    Provider,
    RequestGroup,
    Result,
    SearchOptions,
    World,
    search,
)
from placement.objects.inventory import InventoryUsage
from placement.objects.provider_cache import CachedProvider, Snapshot, among, chunks, plain_rows

__all__ = ["AllocationRequest", "Candidates", "ProviderSummary", "RequestGroup",
           "SearchOptions", "find"]

_alloc = tables.allocations
_agg = tables.placement_aggregates
_rp_agg = tables.resource_provider_aggregates


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

    snapshot = provider_cache.snapshot(connection)
    world = _SnapshotWorld(connection, snapshot, groups, options, class_ids)
    results = search(world, groups, options)
    summaries = _summaries(connection, snapshot, results, options.nested_aware,
                           None if summarize_all_classes else set(requested_classes))
    return Candidates([_allocation_request(world, result) for result in results], summaries)


def _allocation_request(world: World, result: Result) -> AllocationRequest:
    providers = world.providers
    allocations: dict[str, dict[str, int]] = {}
    for provider_id, class_name, amount in result.allocations:
        uuid = providers[provider_id].uuid
        if uuid in allocations:
            allocations[uuid][class_name] = amount
        else:
            allocations[uuid] = {class_name: amount}
    mappings = {suffix: [providers[provider_id].uuid for provider_id in sorted(provider_ids)]
                for suffix, provider_ids in result.mappings.items()}
    return AllocationRequest(allocations, mappings)


# Loading -----------------------------------------------------------------

def _usages(connection: sa.engine.Connection, condition: sa.ColumnElement
            ) -> dict[tuple[int, int], int]:
    """(provider id, class id) -> amount allocated, for the allocations
    matching ``condition``."""
    rows = plain_rows(connection, (
        sa.select(_alloc.c.resource_provider_id, _alloc.c.resource_class_id,
                  sa.func.sum(_alloc.c.used))
        .where(condition)
        .group_by(_alloc.c.resource_provider_id, _alloc.c.resource_class_id)))
    # int(): SUM is a DECIMAL on MySQL
    return {(provider_id, class_id): int(used) for provider_id, class_id, used in rows}


def _with_usage(inventory_usage: InventoryUsage, used: int) -> InventoryUsage:
    # the snapshot's records are shared between requests: never changed in place
    return dataclasses.replace(inventory_usage, used=used) if used else inventory_usage


def _sharing_anchors(connection: sa.engine.Connection, snapshot: Snapshot
                     ) -> dict[int, set[int]]:
    """Sharing provider id -> roots of the trees it shares with, its own
    root included (aggregates are read afresh: they change without a
    generation)."""
    sharing_ids = [provider.id for provider in snapshot.providers.values()
                   if os_traits.MISC_SHARES_VIA_AGGREGATE in provider.traits]
    anchors = {provider_id: {snapshot.providers[provider_id].row.root_id}
               for provider_id in sharing_ids}
    sharing_agg = aliased(_rp_agg)
    member_agg = aliased(_rp_agg)
    for chunk in chunks(sharing_ids):
        for sharing_id, member_id in plain_rows(connection, (
                sa.select(sharing_agg.c.resource_provider_id, member_agg.c.resource_provider_id)
                .join(member_agg, member_agg.c.aggregate_id == sharing_agg.c.aggregate_id)
                .where(among(sharing_agg.c.resource_provider_id, chunk)))):
            member = snapshot.providers.get(member_id)
            if member is not None:  # created after the snapshot: not searched
                anchors[sharing_id].add(member.row.root_id)
    return anchors


# Search records kept per cached provider (one per set of requested classes
# seen): a bound on the memory of unusual requests.
_RECORDS_PER_PROVIDER = 8


class _SnapshotWorld(World):
    """The part of the provider snapshot the search needs, as ``Provider``
    records with this request's usages, made as the search goes: the trees
    of the anchors (roots) in batches of growing size, each batch just
    before its anchors are searched, with the sharing providers serving
    them. With a limit, the search usually stops long before the last batch.

    Every tree that has an inventory of a requested class or a sharing
    provider serving it is an anchor. Providers carry the inventories of the
    requested classes and the aggregates the request names; providers
    without a requested class matter only to resourceless groups and
    same_subtree, so whole trees are taken only when the request has those.
    """

    def __init__(self, connection: sa.engine.Connection, snapshot: Snapshot,
                 groups: list[RequestGroup], options: SearchOptions, class_ids: dict[str, int]):
        self._connection = connection
        self._snapshot = snapshot
        self._class_names = {class_id: name for name, class_id in class_ids.items()}
        self._whole_trees = bool(options.same_subtree) or not all(
            group.resources for group in groups)
        # Everything is consumed anyway without a limit or when the results
        # are sampled or counted first.
        everything = (options.limit is None or options.randomize or options.breadth_first
                      or options.max_candidates > 0)
        self._first_batch = None if everything else max(8, options.limit)
        # (provider id, class id) -> used, of the providers added so far
        self._used: dict[tuple[int, int], int] = {}
        self._using: set[int] = set()  # the providers of those
        # the search records of providers without usage or named aggregates
        # depend on the classes only: they are kept with the cached provider
        self._record_key = ("search", tuple(sorted(self._class_names.items())))
        self._aggregates = self._named_aggregates(connection, groups)

        tree_roots_by_uuid = {
            uuid: snapshot.providers[snapshot.ids_by_uuid[uuid]].row.root_id
            for uuid in {group.in_tree for group in groups if group.in_tree is not None}
            if uuid in snapshot.ids_by_uuid}
        super().__init__({}, _sharing_anchors(connection, snapshot), snapshot.has_nesting,
                         tree_roots_by_uuid)

        anchors = set().union(
            *self.sharing_anchors.values(),
            *(snapshot.holder_roots.get(class_id, ()) for class_id in self._class_names))
        for group in groups:
            if group.aggregates.required:
                anchors &= self._anchors_reaching(set().union(*group.aggregates.required))
        self._anchor_ids = sorted(anchors)

    def _anchors_reaching(self, aggregate_uuids: set[str]) -> set[int]:
        """The anchors with a provider (of the tree, or sharing with it) in
        one of ``aggregate_uuids``: a group requiring them has no candidate
        elsewhere, whichever provider (or root) must be in them."""
        providers = self._snapshot.providers
        reaching = set()
        for provider_id, aggregates in self._aggregates.items():
            if provider_id in providers and not aggregates.isdisjoint(aggregate_uuids):
                reaching.add(providers[provider_id].row.root_id)
                reaching.update(self.sharing_anchors.get(provider_id, ()))
        return reaching

    @staticmethod
    def _named_aggregates(connection: sa.engine.Connection, groups: list[RequestGroup]
                          ) -> dict[int, frozenset[str]]:
        aggregate_uuids = set().union(*(group.aggregates.names() for group in groups))
        aggregates: dict[int, set[str]] = defaultdict(set)
        for chunk in chunks(aggregate_uuids):
            for provider_id, aggregate_uuid in connection.execute(
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
            # two batches would read more usages than one
            size = len(self._anchor_ids)
        while start < len(self._anchor_ids):
            batch = self._anchor_ids[start:start + size]
            self._add_trees(batch, every=size == len(self._anchor_ids))
            yield from batch
            start += size
            size *= 2

    def _add_trees(self, batch: list[int], every: bool) -> None:
        """The providers of the trees of ``batch`` (``every``: all anchors)
        and the sharing providers serving them, unless already added, with
        their usages."""
        snapshot = self._snapshot
        wanted = [provider_id for provider_id, anchors in self.sharing_anchors.items()
                  if provider_id not in self.providers and not anchors.isdisjoint(batch)]
        for root_id in batch:
            tree = snapshot.trees[root_id]
            if self._whole_trees:
                wanted += tree
            else:
                wanted += [provider_id for provider_id in tree
                           if provider_id == root_id
                           or not self._class_names.keys().isdisjoint(
                               snapshot.providers[provider_id].inventories)]
        added = sorted(set(wanted).difference(self.providers))
        requested = _alloc.c.resource_class_id.in_(sorted(self._class_names))
        # all at once is cheaper than naming the providers of every tree
        for condition in [requested] if every else [
                sa.and_(requested, among(_alloc.c.resource_provider_id, chunk))
                for chunk in chunks(added)]:
            used = _usages(self._connection, condition)
            self._used.update(used)
            self._using.update(provider_id for provider_id, _ in used)
        self.add_providers([self._provider(snapshot.providers[provider_id])
                            for provider_id in added], batch)

    def _provider(self, cached: CachedProvider) -> Provider:
        if cached.id in self._using or cached.id in self._aggregates:
            return self._new_provider(cached)
        record = cached.derived.get(self._record_key)
        if record is None:
            if len(cached.derived) >= _RECORDS_PER_PROVIDER:
                cached.derived.clear()
            record = cached.derived[self._record_key] = self._new_provider(cached)
        return record

    def _new_provider(self, cached: CachedProvider) -> Provider:
        row = cached.row
        inventories = {}
        for class_id, inventory_usage in cached.inventories.items():
            class_name = self._class_names.get(class_id)
            if class_name is not None:
                inventories[class_name] = _with_usage(
                    inventory_usage, self._used.get((row.id, class_id), 0))
        return Provider(row.id, row.uuid, row.parent_id, row.root_id, inventories,
                        cached.traits, self._aggregates.get(row.id, frozenset()))


# Provider summaries --------------------------------------------------------

def _summaries(connection: sa.engine.Connection, snapshot: Snapshot, results: list[Result],
               nested_aware: bool, only_classes: set[str] | None) -> list[ProviderSummary]:
    """Every provider of every tree giving resources to a result (only the
    giving providers themselves below 1.29 in a nested world)."""
    giving = {provider_id for result in results for provider_id, _, _ in result.allocations}
    if nested_aware or not snapshot.has_nesting:
        roots = {snapshot.providers[provider_id].row.root_id for provider_id in giving}
        wanted = sorted(provider_id for root_id in roots for provider_id in snapshot.trees[root_id])
    else:
        wanted = sorted(giving)
    used: dict[tuple[int, int], int] = {}
    for chunk in chunks(wanted):
        used.update(_usages(connection, among(_alloc.c.resource_provider_id, chunk)))
    class_names = resource_class.names_from_ids(connection, {
        class_id for provider_id in wanted
        for class_id in snapshot.providers[provider_id].inventories})
    summaries = []
    for provider_id in wanted:
        provider = snapshot.providers[provider_id]
        row = provider.row
        resources = {}
        for class_id in sorted(provider.inventories):
            class_name = class_names[class_id]
            if only_classes is None or class_name in only_classes:
                resources[class_name] = ResourceSummary(
                    provider.inventories[class_id].capacity, used.get((provider_id, class_id), 0))
        summaries.append(ProviderSummary(
            uuid=row.uuid,
            parent_provider_uuid=(None if row.parent_id is None
                                  else snapshot.providers[row.parent_id].row.uuid),
            root_provider_uuid=snapshot.providers[row.root_id].row.uuid,
            resources=resources,
            traits=list(provider.trait_names),
        ))
    return summaries
