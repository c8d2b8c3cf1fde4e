"""One shape counted: per root, how many more whole instances fit, and the
class that runs out first (see the package docstring for which trees are
counted exactly and which by simulated claims)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable

import sqlalchemy as sa

from placement.candidates import find
from placement.candidates.copy_world import CopyWorld
from placement.candidates.follower import usages
from placement.candidates.groups import group_search
from placement.candidates.model import RequestGroup, SearchOptions
from placement.candidates.provider_copy import CachedProvider, ProviderCopy
from placement.capacity.simulate import SimulatedWorld
from placement.capacity.tables import class_rows, free_slots

Used = dict[tuple[int, int], int]


@dataclasses.dataclass
class Counted:
    """One shape counted on one copy with one read of the usages."""

    copy: ProviderCopy
    # root id -> (instances that fit, the class running out first)
    roots: dict[int, tuple[int, str | None]]
    # every root was counted exactly (else some are lower bounds)
    exact: bool
    # (class name, amount) of the shape, every group's summed
    amounts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(count for count, _ in self.roots.values())


def read_usages(connection: sa.engine.Connection, class_ids: list[int] | None = None) -> Used:
    """(provider id, class id) -> used, of every provider (one read)."""
    return usages(connection, None, class_ids)


def count(connection: sa.engine.Connection, groups: list[RequestGroup],
          options: SearchOptions, used: Used | None = None,
          drained: frozenset[int] = frozenset()) -> Counted:
    """How many more instances of the shape (``groups``, ``options``) fit
    per root, the ``drained`` providers taken out; ``used``: the usages
    (None: read here, those of the shape's classes). Unknown classes or
    traits raise InvalidInput, as for the candidates."""
    copy, world, class_ids = find.prepare(connection, groups, options)
    if used is None:
        used = read_usages(connection, sorted(class_ids.values()))
    amounts: dict[str, int] = defaultdict(int)
    for group in groups:
        for class_name, amount in group.resources.items():
            amounts[class_name] += amount
    anchors = [anchor for anchor in world.searched_anchors if anchor not in drained]
    roots: dict[int, tuple[int, str | None]] = {}
    simulated = set(anchors)
    if _single_group(groups, options):
        exact, simulated = _exact_counts(copy, world, groups[0], class_ids, used, anchors,
                                         drained)
        roots.update(exact)
    if simulated:
        roots.update(_simulated_counts(copy, world, groups, options, class_ids, used,
                                       simulated, drained, amounts))
    return Counted(copy, roots, not simulated, dict(amounts))


def _single_group(groups: list[RequestGroup], options: SearchOptions) -> bool:
    return len(groups) == 1 and bool(groups[0].resources) and not options.same_subtree


def _exact_counts(copy: ProviderCopy, world: CopyWorld, group: RequestGroup,
                  class_ids: dict[str, int], used: Used, anchors: list[int],
                  drained: frozenset[int]) -> tuple[dict[int, tuple[int, str | None]], set[int]]:
    """The roots of ``anchors`` counted from free slots, and the roots left
    to simulate: those a sharing provider of a requested class serves (its
    slots are any of its trees'), and, for a spread group requiring
    traits, those with several holders (the traits are the chosen
    providers' together)."""
    plan = group_search(world, group)
    spread = plan.spread is not None
    coupled = copy.sharing_reach(copy.sharing_with(frozenset(class_ids.values())))
    wanted = set(anchors).difference(coupled)
    passes = _filter(copy, plan.spread_passes if spread and plan.spread.provider_filters
                     else None if spread else plan.single_filters)
    # class name -> provider id -> free slots, of the wanted trees' holders
    slots: dict[str, dict[int, int]] = {}
    for class_name, amount in group.resources.items():
        class_id = class_ids[class_name]
        rows = [row for row in class_rows(copy, class_id)
                if row.root_id in wanted and row.provider_id not in drained
                and (passes is None or passes(row.provider_id, row.root_id))]
        slots[class_name] = free_slots(tuple(rows), class_id, amount, used)
    root_of = {provider_id: copy.providers[provider_id].root_id
               for by_provider in slots.values() for provider_id in by_provider}
    several = set()
    if spread and plan.spread.together:
        several = _traits_apart(copy, plan.spread.together, root_of, slots, wanted)
        wanted -= several
    # root -> class name -> the class's slots there (spread: summed over its
    # holders; else: only a provider holding every class gives instances)
    per_root: dict[int, dict[str, int]] = defaultdict(dict)
    for class_name, by_provider in slots.items():
        for provider_id, free in by_provider.items():
            sums = per_root[root_of[provider_id]]
            sums[class_name] = sums.get(class_name, 0) + free
    counts = {}
    for root_id in wanted:
        sums = per_root.get(root_id, {})
        binding = min(group.resources, key=lambda name: sums.get(name, 0))
        counts[root_id] = (sums.get(binding, 0) if spread
                           else _providers_total(slots, copy.trees[root_id]), binding)
    return counts, (set(anchors) & coupled) | several


def _traits_apart(copy: ProviderCopy, together: tuple, root_of: dict[int, int],
                  slots: dict[str, dict[int, int]], wanted: set[int]) -> set[int]:
    """The roots where a spread group's required traits are those of
    several holders together (left to simulate); a root's lone holder
    lacking them gives nothing (its slots are dropped)."""
    holders: dict[int, list[int]] = defaultdict(list)
    for provider_id, root_id in root_of.items():
        holders[root_id].append(provider_id)
    several = set()
    for root_id, ids in holders.items():
        if len(ids) > 1:
            several.add(root_id)
        elif root_id in wanted and not all(check.passes(copy.providers[ids[0]].traits)
                                           for check in together):
            for by_provider in slots.values():
                by_provider.pop(ids[0], None)
    return several


def _providers_total(slots: dict[str, dict[int, int]], tree: tuple[int, ...]) -> int:
    """Instances of a group taking everything from one provider: each
    provider of the tree gives as many as its scarcest class allows."""
    total = 0
    for provider_id in tree:
        total += min((by_provider.get(provider_id, 0) for by_provider in slots.values()),
                     default=0)
    return total


def _filter(copy: ProviderCopy, passes: Callable | None) -> Callable[[int, int], bool] | None:
    """The group's filters (traits, aggregates, in_tree; not the amounts),
    asked of a provider of the copy serving its own tree: the checks take
    any record with the fields they read (``CachedProvider`` has them)."""
    if passes is None:
        return None
    providers: dict[int, CachedProvider] = copy.providers

    def provider_passes(provider_id: int, root_id: int) -> bool:
        return passes(providers[provider_id], providers[root_id])
    return provider_passes


def _simulated_counts(copy: ProviderCopy, world: CopyWorld, groups: list[RequestGroup],
                      options: SearchOptions, class_ids: dict[str, int], used: Used,
                      anchors: set[int], drained: frozenset[int], amounts: dict[str, int]
                      ) -> dict[int, tuple[int, str | None]]:
    """The ``anchors`` filled by simulated claims, in the search's order."""
    class_names = {class_id: name for name, class_id in class_ids.items()}
    simulated = SimulatedWorld(copy, world, class_names, used, anchors, drained)
    claimed = simulated.fill(groups, options)
    return {anchor: (claimed[anchor], min(amounts, key=lambda name: (
                simulated.free(anchor, name) // amounts[name]), default=None))
            for anchor in claimed}
