"""The allocation-candidate search, in memory.

``World`` is the part of the database one request needs (loaded by
``placement.candidates.find``); ``search`` turns request groups
into allocation requests as doc/source/user/allocation-candidates.rst describes:

* anchors (roots) are taken in order; at each, each group gives a list of
  *group candidates* (the allocations it would make in that tree and the
  sharing providers serving it, the providers it maps);
* per anchor, one candidate per group is chosen depth-first, and every
  partial choice that already breaks capacity, ``group_policy=isolate``,
  ``same_subtree`` or the pre-1.29 rule (unless max_allocation_candidates
  must count those results first) is abandoned at once, so that the
  search never builds the whole cartesian product;
* the search is lazy: it stops as soon as enough results exist, before
  the candidates of later anchors are even computed (or, for a world
  loaded in batches, loaded).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator
from operator import attrgetter
from typing import NamedTuple

from placement.candidates.checks import Check, ClassChecks, GroupChecks, group_checks
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.memo import Key, Memo
from placement.objects.inventory import InventoryUsage

ISOLATE = "isolate"


@dataclasses.dataclass(slots=True)
class Provider:
    id: int
    uuid: str
    parent_id: int | None
    root_id: int
    # Only the classes, traits and aggregates the request names are loaded.
    inventories: dict[str, InventoryUsage] = dataclasses.field(default_factory=dict)
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()


@dataclasses.dataclass
class World:
    providers: dict[int, Provider]
    # The sharing providers (of the whole database, not only those here).
    sharing: Collection[int]
    # Some provider in the database has a parent.
    has_nesting: bool
    # in_tree uuid -> root id of its tree (absent: no such provider).
    tree_roots_by_uuid: dict[str, int]
    # anchor (root) -> the providers of its tree and the sharing providers
    # sharing with it, in id order
    members: dict[int, list[Provider]]
    _lineages: dict[int, frozenset[int]] = dataclasses.field(init=False, default_factory=dict)

    def anchor_results(self, anchor: int, search_anchor: Callable[[int], Iterator[Result]]
                       ) -> Iterator[Result]:
        """The results at ``anchor``, as ``search_anchor`` finds them. A
        world that knows when an anchor's members have not changed may
        keep them between searches instead."""
        return search_anchor(anchor)

    def anchor_value(self, anchor: int, kind: str, make: Callable[[int], object]) -> object:
        """What ``make`` finds at ``anchor`` from its members and the
        request alone (``kind`` names what it finds). A world that keeps
        an anchor's results keeps this the same way."""
        return make(anchor)

    def anchor_ids(self) -> Collection[int]:
        """The roots the search may anchor candidates at (their trees loaded
        once ``anchors`` gave them)."""
        return self.members.keys()

    def anchors(self, randomize: bool = False) -> Iterator[int]:
        """The roots the search may anchor candidates at, in id order (or a
        random one). A world loaded lazily overrides this to load the trees
        of each anchor just before it is searched."""
        anchors = sorted(self.members)
        if randomize:
            random.shuffle(anchors)
        return iter(anchors)

    @property
    def spread_unsuffixed(self) -> bool:
        """Does the unsuffixed group spread over a tree and sharing providers?"""
        return self.has_nesting or bool(self.sharing)

    def lineage(self, provider_id: int) -> frozenset[int]:
        """The provider and its ancestors (cached: same_subtree asks often)."""
        lineage = self._lineages.get(provider_id)
        if lineage is None:
            parent_id = self.providers[provider_id].parent_id
            lineage = frozenset([provider_id]).union(
                () if parent_id is None else self.lineage(parent_id))
            self._lineages[provider_id] = lineage
        return lineage

    def in_one_subtree(self, provider_ids: set[int]) -> bool:
        """Is one of ``provider_ids`` an ancestor (or self) of all the others?"""
        common = frozenset.intersection(*(self.lineage(p) for p in provider_ids))
        return not common.isdisjoint(provider_ids)


def world_of(providers: Iterable[Provider], sharing_anchors: dict[int, set[int]],
             has_nesting: bool, tree_roots_by_uuid: dict[str, int]) -> World:
    """A world with every provider at hand; ``sharing_anchors``: sharing
    provider id -> roots of the trees it shares with (its own included)."""
    providers = sorted(providers, key=attrgetter("id"))
    members: dict[int, list[Provider]] = defaultdict(list)
    for provider in providers:
        members[provider.root_id].append(provider)
        for anchor in sharing_anchors.get(provider.id, ()):
            if anchor != provider.root_id:
                members[anchor].append(provider)
    return World({provider.id: provider for provider in providers}, frozenset(sharing_anchors),
                 has_nesting, tree_roots_by_uuid, dict(members))


@dataclasses.dataclass
class RequestGroup:
    suffix: str
    # class name -> amount; empty for a resourceless group
    resources: dict[str, int]
    traits: TraitFilter = dataclasses.field(default_factory=TraitFilter)
    aggregates: AggregateFilter = dataclasses.field(default_factory=AggregateFilter)
    in_tree: str | None = None

    @property
    def granular(self) -> bool:
        return self.suffix != ""


@dataclasses.dataclass
class SearchOptions:
    group_policy: str | None = None
    root_traits: TraitFilter = dataclasses.field(default_factory=TraitFilter)
    # each entry: suffixes whose providers must lie in one subtree
    same_subtree: list[list[str]] = dataclasses.field(default_factory=list)
    nested_aware: bool = True
    limit: int | None = None
    max_candidates: int = -1
    randomize: bool = False
    breadth_first: bool = False


class GroupCandidate(NamedTuple):
    """A tuple: a request makes thousands, and a frozen dataclass costs
    several times more to build."""

    anchor: int
    # (provider id, class name, amount)
    allocations: tuple[tuple[int, str, int], ...]
    providers: frozenset[int]


@dataclasses.dataclass(slots=True)
class Result:
    """Never changed once made: a world may hand the same results to
    several searches (see World.anchor_results)."""

    # (provider id, class name, amount), one per provider and class, in the
    # order the groups added them (a lone group's candidate tuple as it is)
    allocations: tuple[tuple[int, str, int], ...]
    # suffix -> providers mapped by that group
    mappings: dict[str, frozenset[int]]
    # what callers make of the result: it lives as long as the result
    memo: Memo = dataclasses.field(default_factory=Memo, compare=False, repr=False)

    def key(self) -> tuple:
        """Identity for de-duplication: allocations and mappings, not anchor."""
        return (frozenset(self.allocations), frozenset(self.mappings.items()))


# Group candidates --------------------------------------------------------
#
# Computed one anchor (a root) at a time, when the search reaches it: with a
# limit, most anchors are never reached.

class GroupSearch(NamedTuple):
    """A group and its checks (``placement.candidates.checks``), made once
    per search, with what every anchor asks of them worked out."""

    group: RequestGroup
    # taking everything from one provider
    single: GroupChecks
    # spreading over a tree (only the unsuffixed group asking resources, in
    # a world with nested or sharing providers); None: it does not spread
    spread: GroupChecks | None
    # the checks of one provider taking everything, resources first
    single_passes: tuple[Callable[[Provider, Provider], bool], ...]
    # spreading: the checks of one provider whatever the class, and the
    # classes in the order their allocations are listed
    spread_passes: tuple[Callable[[Provider, Provider], bool], ...]
    spread_classes: tuple[ClassChecks, ...]

    @property
    def checks(self) -> GroupChecks:
        """The checks of the group wherever it spreads."""
        return self.spread or self.single


def _passes(checks: Iterable[Check]) -> tuple[Callable[[Provider, Provider], bool], ...]:
    return tuple(check.passes for check in checks)


def group_search(world: World, group: RequestGroup) -> GroupSearch:
    single = group_checks(group, False, world.tree_roots_by_uuid)
    spread = (group_checks(group, True, world.tree_roots_by_uuid)
              if group.resources and not group.granular and world.spread_unsuffixed else None)
    resource_checks = [check for class_checks in single.resources
                       for check in (class_checks.inventory, class_checks.capacity)]
    return GroupSearch(
        group, single, spread, _passes([*resource_checks, *single.provider_filters]),
        _passes(spread.provider_filters) if spread else (),
        tuple(sorted(spread.resources, key=attrgetter("class_name"))) if spread else ())


def group_candidates(world: World, plan: GroupSearch, anchor: int) -> list[GroupCandidate]:
    """Every way the group alone can be satisfied within the tree of
    ``anchor`` and the sharing providers serving it (docs: "How one group finds its candidates")."""
    group = plan.group
    if not group.resources:
        return _resourceless_candidates(world, plan, anchor)
    if group.in_tree is not None and group.in_tree not in world.tree_roots_by_uuid:
        return []
    if plan.spread is not None and not _alone(world, anchor):
        return _spread_candidates(world, plan, anchor)
    return _single_candidates(world, plan, anchor)


def _alone(world: World, anchor: int) -> bool:
    """Is the root the only provider at ``anchor`` (no child and no sharing
    provider serving it, the most common tree)? Spreading over it is then
    the same as taking everything from it."""
    members = world.members[anchor]
    return len(members) == 1 and members[0].id == anchor


def _passing(world: World, passes: Iterable[Callable[[Provider, Provider], bool]],
             anchor: int) -> Iterator[Provider]:
    """The members of ``anchor`` passing every check."""
    root = world.providers[anchor]
    for provider in world.members[anchor]:
        if all(check(provider, root) for check in passes):
            yield provider


def _single_candidates(world: World, plan: GroupSearch, anchor: int) -> list[GroupCandidate]:
    """All resources of the group from one provider (docs: "Granular groups")."""
    resources = sorted(plan.group.resources.items())
    return [GroupCandidate(anchor, tuple((provider.id, class_name, amount)
                                         for class_name, amount in resources),
                           frozenset([provider.id]))
            for provider in _passing(world, plan.single_passes, anchor)]


def _resourceless_candidates(world: World, plan: GroupSearch,
                             anchor: int) -> list[GroupCandidate]:
    """Providers picked by traits and aggregates only (1.36+); no allocation."""
    if not plan.single.filters:
        return []
    return [GroupCandidate(anchor, (), frozenset([provider.id]))
            for provider in _passing(world, plan.single_passes, anchor)]


def _spread_candidates(world: World, plan: GroupSearch, anchor: int) -> list[GroupCandidate]:
    """The unsuffixed group over trees and sharing providers (docs: "spread over a tree").
    Called for every anchor: what does not depend on the class is checked
    once per provider, what does not depend on the provider once per anchor."""
    traits_checks = plan.spread.together
    if traits_checks:
        # no combination can have a required trait that no member has
        offered = frozenset().union(*(provider.traits for provider in world.members[anchor]))
        if not all(check.passes(offered) for check in traits_checks):
            return []
    eligible = list(_passing(world, plan.spread_passes, anchor))
    if not eligible:
        return []
    root = world.providers[anchor]
    resources = plan.spread_classes
    # per class, the providers able to give it
    options: list[list[int]] = []
    for class_checks in resources:
        has_inventory, fits = class_checks.inventory.passes, class_checks.capacity.passes
        able = [provider.id for provider in eligible
                if has_inventory(provider, root) and fits(provider, root)]
        if not able:
            return []
        options.append(able)

    classes = [class_checks.class_name for class_checks in resources]
    amounts = [class_checks.amount for class_checks in resources]
    candidates = []
    for choice in itertools.product(*options):
        providers = frozenset(choice)
        if traits_checks:
            together = frozenset().union(*(world.providers[p].traits for p in providers))
            if not all(check.passes(together) for check in traits_checks):
                continue
        allocations = tuple(zip(choice, classes, amounts, strict=True))
        candidates.append(GroupCandidate(anchor, allocations, providers))
    return candidates


# Combining groups --------------------------------------------------------

class _AnchorSearch:
    """One candidate per group within one anchor tree, chosen depth-first.

    A choice is kept only while the partial combination still obeys every
    rule: summed amounts fit (they only grow as groups are added),
    ``isolate`` keeps granular providers apart, each ``same_subtree`` holds
    once all its groups are chosen, and with ``one_provider_per_tree`` (the
    pre-1.29 rule) no second provider of a tree gives resources. The search is iterative (no
    generator per level) because it may visit many thousands of choices.
    """

    def __init__(self, world: World, groups: list[RequestGroup], options: SearchOptions,
                 per_group: list[list[GroupCandidate]], one_provider_per_tree: bool):
        self.world = world
        self.groups = groups
        self.per_group = per_group
        self.isolate = options.group_policy == ISOLATE
        self.one_provider_per_tree = one_provider_per_tree
        depth_of = {group.suffix: depth for depth, group in enumerate(groups)}
        self.subtree_checks: dict[int, list[list[str]]] = defaultdict(list)
        for suffixes in options.same_subtree:
            self.subtree_checks[max(depth_of[s] for s in suffixes)].append(suffixes)
        # the state of the current partial combination
        self.chosen: list[GroupCandidate] = []
        self.totals: dict[tuple[int, str], int] = {}
        self.isolated: set[int] = set()
        self.tree_giver: dict[int, int] = {}  # root -> the provider giving there

    def feasible(self) -> bool:
        """A cheap necessary condition, checked before searching: enough
        free capacity per class among the providers offered. (Enough
        distinct providers for the isolated groups was checked by
        ``search`` as it gathered ``per_group``.)"""
        wanted: dict[str, int] = defaultdict(int)
        for group in self.groups:
            for class_name, amount in group.resources.items():
                wanted[class_name] += amount
        offered_by_class: dict[str, set[int]] = defaultdict(set)
        for candidates in self.per_group:
            for candidate in candidates:
                for provider_id, class_name, _ in candidate.allocations:
                    offered_by_class[class_name].add(provider_id)
        for class_name, amount in wanted.items():
            free = sum(max(0, inventory.capacity - inventory.used)
                       for inventory in (self.world.providers[p].inventories[class_name]
                                         for p in offered_by_class[class_name]))
            if free < amount:
                return False
        return True

    def results(self) -> Iterator[Result]:
        if not self.feasible():
            return
        last = len(self.per_group) - 1
        next_index = [0] * len(self.per_group)
        depth = 0
        while depth >= 0:
            candidates = self.per_group[depth]
            if next_index[depth] == len(candidates):
                # this level is exhausted: go back and try the next choice above
                next_index[depth] = 0
                depth -= 1
                if depth >= 0:
                    self._release(depth)
                continue
            candidate = candidates[next_index[depth]]
            next_index[depth] += 1
            if not self._take(depth, candidate):
                continue
            if depth < last:
                depth += 1
                continue
            yield Result(tuple((provider_id, class_name, amount)
                               for (provider_id, class_name), amount in self.totals.items()), {
                group.suffix: chosen.providers
                for group, chosen in zip(self.groups, self.chosen, strict=True)})
            self._release(depth)

    def _take(self, depth: int, candidate: GroupCandidate) -> bool:
        """Add ``candidate`` for the group at ``depth`` if the partial
        combination stays valid; leave everything unchanged otherwise."""
        isolated = self.isolate and self.groups[depth].granular
        if isolated and not candidate.providers.isdisjoint(self.isolated):
            return False
        added = 0
        for provider_id, class_name, amount in candidate.allocations:
            if not self._add_amount(provider_id, class_name, amount):
                self._remove_amounts(candidate.allocations[:added])
                return False
            added += 1
        self.chosen.append(candidate)
        if isolated:
            self.isolated.update(candidate.providers)
        if not self._same_subtree_holds(depth):
            self._release(depth)
            return False
        return True

    def _release(self, depth: int) -> None:
        """Undo ``_take`` of the last chosen candidate (at ``depth``)."""
        candidate = self.chosen.pop()
        if self.isolate and self.groups[depth].granular:
            self.isolated.difference_update(candidate.providers)
        self._remove_amounts(candidate.allocations)

    def _add_amount(self, provider_id: int, class_name: str, amount: int) -> bool:
        key = (provider_id, class_name)
        total = self.totals.get(key, 0) + amount
        provider = self.world.providers[provider_id]
        if not provider.inventories[class_name].fits_total(total):
            return False
        if self.one_provider_per_tree:
            if self.tree_giver.setdefault(provider.root_id, provider_id) != provider_id:
                return False
        self.totals[key] = total
        return True

    def _remove_amounts(self, allocations: Iterable[tuple[int, str, int]]) -> None:
        for provider_id, class_name, amount in allocations:
            key = (provider_id, class_name)
            self.totals[key] -= amount
            if not self.totals[key]:
                del self.totals[key]
                if self.one_provider_per_tree:
                    self._forget_giver(provider_id)

    def _forget_giver(self, provider_id: int) -> None:
        """The provider gives nothing any more: its tree is free again."""
        if not any(key[0] == provider_id for key in self.totals):
            del self.tree_giver[self.world.providers[provider_id].root_id]

    def _same_subtree_holds(self, depth: int) -> bool:
        for suffixes in self.subtree_checks.get(depth, ()):
            providers = set().union(*(chosen.providers for group, chosen
                                      in zip(self.groups, self.chosen, strict=False)
                                      if group.suffix in suffixes))
            if len(providers) > 1 and not self.world.in_one_subtree(providers):
                return False
        return True


def _lone_group_results(group: RequestGroup, candidates: list[GroupCandidate]
                        ) -> Iterator[Result]:
    """The results of a request of one group: what _AnchorSearch would give
    (each candidate fits on its own, and there is no other group to isolate
    from or to share a subtree with), without its bookkeeping."""
    for candidate in candidates:
        yield Result(candidate.allocations, {group.suffix: candidate.providers})


def combined_results(world: World, groups: list[RequestGroup], options: SearchOptions,
                     candidates: list[list[GroupCandidate]]) -> Iterator[Result]:
    """The results at one anchor, from the candidates of each group there:
    the combinations that fit together and obey the options' rules."""
    # Below 1.29 in a nested world, results using two providers of one tree
    # are dropped only after max_candidates counted them (steps 8-9); without
    # that maximum the search may abandon them early, which is cheaper.
    prune_shared_trees = (not options.nested_aware and world.has_nesting
                          and options.max_candidates <= 0)
    # One group alone: each of its candidates already fits and is a result.
    if len(groups) == 1 and not options.same_subtree and not prune_shared_trees:
        return _lone_group_results(groups[0], candidates[0])
    return _AnchorSearch(world, groups, options, candidates, prune_shared_trees).results()


def _one_provider_per_tree(world: World, result: Result) -> bool:
    """Does every tree give resources through one provider at most?"""
    giving = {provider_id for provider_id, _, _ in result.allocations}
    return len(giving) == len({world.providers[p].root_id for p in giving})


def _round_robin(iterators: Iterable[Iterator[Result]]) -> Iterator[Result]:
    """One result of each iterator in turn. The first round takes the
    iterators as it goes, so that a limit reached in it leaves the later
    ones (anchors) unsearched."""
    active = []
    for iterator in iterators:
        for item in itertools.islice(iterator, 1):
            yield item
            active.append(iterator)
    while active:
        still_active = []
        for iterator in active:
            for item in itertools.islice(iterator, 1):
                yield item
                still_active.append(iterator)
        active = still_active


class _RepeatKey(Key[tuple]):
    """A result's identity if it can repeat (only sharing providers), else ()."""
    __slots__ = ()


_REPEAT_KEY = _RepeatKey()


def _unique(world: World, results: Iterable[Result]) -> Iterator[Result]:
    """``results`` without repeats. Only a result made of sharing providers
    alone can repeat (it is found at every anchor they serve); a result
    with any other provider comes from the one anchor that is its root."""
    sharing = world.sharing
    seen: set[tuple] = set()
    for result in results:
        # asked once per result (a result's providers are its tree's
        # members: whether they share does not change while it is kept)
        key = result.memo.get(_REPEAT_KEY)
        if key is None:
            key = result.memo.put(_REPEAT_KEY, (
                result.key() if all(provider_id in sharing
                                    for providers in result.mappings.values()
                                    for provider_id in providers)
                else ()))
        if key:
            if key in seen:
                continue
            seen.add(key)
        yield result


def alike(group: RequestGroup, other: RequestGroup) -> bool:
    """Do the two groups have the same candidates (group_candidates treats
    the unsuffixed group apart, and nothing else of the suffix matters)?"""
    return (group.granular == other.granular
            and dataclasses.replace(group, suffix="") == dataclasses.replace(other, suffix=""))


def _root_filter(world: World, root_traits: TraitFilter) -> Callable[[int], bool]:
    """Does a tree pass ``root_required``? Asked for every group candidate,
    hence answered once per root (and at once when there is no filter)."""
    if not root_traits:
        return lambda root_id: True
    allowed: dict[int, bool] = {}

    def root_allowed(root_id: int) -> bool:
        if root_id not in allowed:
            allowed[root_id] = root_traits.satisfied_by(world.providers[root_id].traits)
        return allowed[root_id]
    return root_allowed


def search(world: World, groups: list[RequestGroup], options: SearchOptions) -> list[Result]:
    """The allocation requests for ``groups`` (docs: "Combining the groups"), at most
    ``max_candidates`` (if > 0) and ``limit`` of them."""
    root_allowed = _root_filter(world, options.root_traits)
    # Groups asking the same (typically resources1 and resources2 of one
    # flavor) have the same candidates: the first such group's are reused.
    first_alike = [next(earlier for earlier in range(index + 1)
                        if alike(groups[earlier], group))
                   for index, group in enumerate(groups)]

    # Granular groups are computed first: each takes one provider, which is
    # cheap to find and, with isolate, rules most trees out (a tree of one
    # provider cannot give two isolated groups), before the costlier spread
    # of the unsuffixed group is computed.
    order = sorted(range(len(groups)), key=lambda index: not groups[index].granular)
    isolated = ([index for index in order if groups[index].granular]
                if options.group_policy == ISOLATE else [])
    plans = [group_search(world, group) if first_alike[index] == index else None
             for index, group in enumerate(groups)]

    def per_group(anchor: int) -> list[list[GroupCandidate]] | None:
        """The candidates of each group at ``anchor``; None when a group has
        none, or when the isolated groups have fewer providers than groups."""
        if not root_allowed(anchor):
            return None
        candidates: dict[int, list[GroupCandidate]] = {}
        for index in order:
            first = first_alike[index]
            found = candidates[first] if first in candidates else group_candidates(
                world, plans[first], anchor)
            if not found:
                return None
            candidates[index] = found
            if isolated and index == isolated[-1] and len(set().union(
                    *(c.providers for i in isolated for c in candidates[i]))) < len(isolated):
                return None
        return [candidates[index] for index in range(len(groups))]

    one_provider_per_tree = not options.nested_aware and world.has_nesting

    def search_anchor(anchor: int) -> Iterator[Result]:
        candidates = per_group(anchor)
        if candidates is None:
            return iter(())
        return combined_results(world, groups, options, candidates)

    # Randomized, the anchors come in a random order and the first results
    # are a random sample (trees at random, then the ways to use each).
    per_anchor = (world.anchor_results(anchor, search_anchor)
                  for anchor in world.anchors(options.randomize))
    # lazily: with a small limit, most anchors are never searched
    stream = (_round_robin(per_anchor) if options.breadth_first
              else itertools.chain.from_iterable(per_anchor))
    if world.sharing:
        # Only a sharing provider, reachable from several anchors, can make
        # the same result appear twice.
        stream = _unique(world, stream)
    if options.max_candidates > 0:
        stream = itertools.islice(stream, options.max_candidates)
        if one_provider_per_tree:
            stream = (result for result in stream if _one_provider_per_tree(world, result))
    results = list(itertools.islice(stream, options.limit))
    if options.randomize:
        random.shuffle(results)
    return results
