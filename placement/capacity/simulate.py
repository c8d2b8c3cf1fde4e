"""Claims simulated in memory on a world of the engine's own making.

``SimulatedWorld`` is a ``World`` whose providers carry the usages of one
read of the database (``Provider`` records of its own: the copy's and the
engine's kept records are shared and never changed), with the members of
each tree as ``CopyWorld`` gives them. ``fill`` asks the engine's search
for the first candidate of a tree and claims it as many times as it fits,
until the tree has none: since usages only grow, a candidate the search
ruled out before a claim stays out, so the first candidate stays first
while it fits and claiming it k times at once is what k requests for
candidates, each claiming the first, would do."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from placement.candidates.copy_world import CopyWorld
from placement.candidates.model import (
    OneProviderResult,
    Provider,
    RequestGroup,
    Result,
    SearchOptions,
    SpreadResult,
)
from placement.candidates.provider_copy import ProviderCopy
from placement.candidates.search import search
from placement.candidates.world import World

Allocations = Iterable[tuple[int, str, int]]


class SimulatedWorld(World):
    """The trees of ``anchors`` (without the ``drained`` providers), their
    providers holding the inventories of ``class_names`` (id -> name) at
    the usages ``used``. The search visits one anchor at a time (``only``)
    or, when None, all of them in id order."""

    def __init__(self, copy: ProviderCopy, copy_world: CopyWorld, class_names: dict[int, str],
                 used: dict[tuple[int, int], int], anchors: Iterable[int],
                 drained: frozenset[int] = frozenset()):
        records: dict[int, Provider] = {}
        members: dict[int, list[Provider]] = {}
        for anchor in anchors:
            if anchor in drained:
                continue
            members[anchor] = [
                records[provider_id] if provider_id in records
                else records.setdefault(provider_id, _record(copy, provider_id, class_names, used))
                for provider_id in copy_world.member_ids(anchor) if provider_id not in drained]
        super().__init__(records, copy.sharing, copy.has_nesting,
                         copy_world.tree_roots_by_uuid, members)
        self.only: int | None = None

    def anchor_batches(self, randomize: bool = False) -> Iterator[list[int]]:
        yield [self.only] if self.only is not None else sorted(self.members)

    def claim(self, allocations: Allocations, times: int | None = None) -> int:
        """Claim ``allocations`` (provider id, class, amount; a class of a
        provider may come twice) ``times`` times, or as many times as they
        fit when None; how many times they were claimed."""
        totals: dict[tuple[int, str], int] = {}
        for provider_id, class_name, amount in allocations:
            totals[provider_id, class_name] = totals.get((provider_id, class_name), 0) + amount
        if times is None:
            times = min((inventory.capacity - inventory.used) // amount
                        for (provider_id, class_name), amount in totals.items()
                        for inventory in (self.providers[provider_id].inventories[class_name],))
        if times > 0:
            for (provider_id, class_name), amount in totals.items():
                inventories = self.providers[provider_id].inventories
                inventory = inventories[class_name]
                inventories[class_name] = inventory.with_used(inventory.used + times * amount)
        return max(times, 0)

    def first(self, groups: list[RequestGroup], options: SearchOptions
              ) -> Result | OneProviderResult | SpreadResult | None:
        """The first result of the search, None when there is none."""
        results = search(self, groups, options)
        return results[0] if results else None

    def fill(self, groups: list[RequestGroup], options: SearchOptions) -> dict[int, int]:
        """Each anchor in id order filled with the shape until it has no
        candidate: anchor -> how many were claimed there."""
        options = one_at_a_time(options)
        counts = {}
        for anchor in sorted(self.members):
            self.only = anchor
            claimed = 0
            while (result := self.first(groups, options)) is not None:
                claimed += self.claim(result.allocations)
            counts[anchor] = claimed
        self.only = None
        return counts

    def free(self, anchor: int, class_name: str) -> int:
        """What is left of the class among the anchor's members."""
        return sum(max(0, inventory.capacity - inventory.used)
                   for provider in self.members[anchor]
                   for inventory in (provider.inventories.get(class_name),)
                   if inventory is not None)


def one_at_a_time(options: SearchOptions) -> SearchOptions:
    """``options`` asking the first candidate only, in the search's own
    order (what a client claiming the first candidate sees)."""
    return dataclasses.replace(options, limit=1, randomize=False, max_candidates=-1,
                               breadth_first=False)


def _record(copy: ProviderCopy, provider_id: int, class_names: dict[int, str],
            used: dict[tuple[int, int], int]) -> Provider:
    cached = copy.providers[provider_id]
    return Provider(cached.id, cached.uuid, cached.parent_id, cached.root_id, {
        name: inventory.with_used(used.get((provider_id, class_id), 0))
        for class_id, name in class_names.items()
        for inventory in (cached.inventories.get(class_id),) if inventory is not None},
        cached.traits, cached.aggregates)
