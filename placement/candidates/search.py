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
* the anchors take turns: the first result of every anchor, then the
  second of every anchor that has one, and so on, so that a limit spreads
  the answer over as many trees as it can (a scheduler weighs hosts, not
  candidates: a thousand candidates of one host would leave it one host);
* the search is lazy: it stops as soon as enough results exist, before
  the candidates of later anchors are even computed (or, for a world
  loaded in batches, loaded).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter

from placement.candidates.filters import TraitFilter
from placement.candidates.groups import (
    NOT_AT_ONCE,
    GroupSearch,
    first_result_finder,
    group_candidate_stream,
    group_candidates,
    group_search,
    root_spread_choices,
    spread_choices,
    spreads,
)
from placement.candidates.model import (
    ISOLATE,
    GroupCandidate,
    OneProviderResult,
    RequestGroup,
    Result,
    SearchOptions,
    SpreadResult,
    new_one_provider_result,
    new_spread_result,
)
from placement.candidates.world import World

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


def _lone_group_results(group: RequestGroup, candidates: Iterable[GroupCandidate]
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
    if _lone(world, groups, options):
        return _lone_group_results(groups[0], candidates[0])
    return _AnchorSearch(world, groups, options, candidates,
                         _prune_shared_trees(world, options)).results()


def _prune_shared_trees(world: World, options: SearchOptions) -> bool:
    """Below 1.29 in a nested world, results using two providers of one
    tree are dropped only after max_candidates counted them (steps 8-9);
    without that maximum the search may abandon them early, which is
    cheaper."""
    return not options.nested_aware and world.has_nesting and options.max_candidates <= 0


def _lone(world: World, groups: list[RequestGroup], options: SearchOptions) -> bool:
    """One group alone: each of its candidates already fits and is a result."""
    return (len(groups) == 1 and not options.same_subtree
            and not _prune_shared_trees(world, options))


def _one_provider_per_tree(world: World, result: Result) -> bool:
    """Does every tree give resources through one provider at most?"""
    giving = {provider_id for provider_id, _, _ in result.allocations}
    return len(giving) == len({world.providers[p].root_id for p in giving})


_DONE = object()


def _taking_turns(iterators: Iterable[Iterator]) -> Iterator:
    """One item of each iterator in turn, until all are exhausted. The
    first turn takes the iterators as it goes, so that a limit reached in
    it leaves the later ones (anchors) unsearched."""
    active = []
    for iterator in iterators:
        item = next(iterator, _DONE)
        if item is not _DONE:
            yield item
            active.append(iterator)
    while active:
        still_active = []
        for iterator in active:
            item = next(iterator, _DONE)
            if item is not _DONE:
                yield item
                still_active.append(iterator)
        active = still_active


def _repeated(world: World, result: Result, seen: set[tuple]) -> bool:
    """Was ``result`` given already? ``seen``: the keys of the results
    given so far that can repeat, this one's added. Only a result made of
    sharing providers alone can repeat: it is found at every anchor they
    serve, while a result with any other provider comes from the one
    anchor that is its root."""
    sharing = world.sharing
    for providers in result.mappings.values():
        if not sharing.issuperset(providers):
            return False
    key = result.key()
    if key in seen:
        return True
    seen.add(key)
    return False


def _unique(world: World, items: Iterable, result_of: Callable = lambda item: item
            ) -> Iterator:
    """``items`` without repeated results (``result_of`` an item)."""
    seen: set[tuple] = set()
    for item in items:
        if not _repeated(world, result_of(item), seen):
            yield item


def alike(group: RequestGroup, other: RequestGroup) -> bool:
    """Do the two groups have the same candidates (group_candidates treats
    the unsuffixed group apart, and nothing else of the suffix matters)?"""
    return (group.granular == other.granular
            and dataclasses.replace(group, suffix="") == dataclasses.replace(other, suffix=""))


def _root_filter(world: World, root_traits: TraitFilter) -> Callable[[int], bool] | None:
    """Does a tree pass ``root_required``? Asked for every group candidate,
    hence answered once per root; None when there is no filter."""
    if not root_traits:
        return None
    allowed: dict[int, bool] = {}

    def root_allowed(root_id: int) -> bool:
        if root_id not in allowed:
            allowed[root_id] = root_traits.satisfied_by(world.providers[root_id].traits)
        return allowed[root_id]
    return root_allowed


class _AtAnchors:
    """What ``search`` asks of each anchor: the results there, made from the
    candidates of each group. Groups asking the same (typically resources1
    and resources2 of one flavor) have the same candidates: the first such
    group's are reused."""

    def __init__(self, world: World, groups: list[RequestGroup], options: SearchOptions):
        self.world, self.groups, self.options = world, groups, options
        self.root_allowed = _root_filter(world, options.root_traits)
        self.first_alike = [next(earlier for earlier in range(index + 1)
                                 if alike(groups[earlier], group))
                            for index, group in enumerate(groups)]
        # Granular groups are computed first: each takes one provider,
        # which is cheap to find and, with isolate, rules most trees out (a
        # tree of one provider cannot give two isolated groups), before the
        # costlier spread of the unsuffixed group is computed.
        self.order = sorted(range(len(groups)), key=lambda index: not groups[index].granular)
        self.isolated = ([index for index in self.order if groups[index].granular]
                         if options.group_policy == ISOLATE else [])
        self.plans = [group_search(world, group) if self.first_alike[index] == index else None
                      for index, group in enumerate(groups)]
        self.lone = _lone(world, groups, options)

    def per_group(self, anchor: int) -> list[list[GroupCandidate]] | None:
        """The candidates of each group at ``anchor``; None when a group has
        none, or when the isolated groups have fewer providers than groups."""
        if self.root_allowed is not None and not self.root_allowed(anchor):
            return None
        candidates: dict[int, list[GroupCandidate]] = {}
        isolated = self.isolated
        for index in self.order:
            first = self.first_alike[index]
            if first in candidates:
                found = candidates[first]
            else:
                found = group_candidates(self.world, self.plans[first], anchor)
                if self.options.randomize:
                    random.shuffle(found)
            if not found:
                return None
            candidates[index] = found
            if isolated and index == isolated[-1] and len(set().union(
                    *(c.providers for i in isolated for c in candidates[i]))) < len(isolated):
                return None
        return [candidates[index] for index in range(len(self.groups))]

    def results(self, anchor: int) -> Iterator[Result]:
        if self.lone:
            if self.root_allowed is not None and not self.root_allowed(anchor):
                return iter(())
            candidates: Iterable[GroupCandidate] = group_candidate_stream(
                self.world, self.plans[0], anchor)
            if self.options.randomize:
                candidates = list(candidates)
                random.shuffle(candidates)
            return _lone_group_results(self.groups[0], candidates)
        per_anchor = self.per_group(anchor)
        if per_anchor is None:
            return iter(())
        return combined_results(self.world, self.groups, self.options, per_anchor)


def search(world: World, groups: list[RequestGroup], options: SearchOptions
           ) -> list[Result | OneProviderResult]:
    """The allocation requests for ``groups`` (docs: "Combining the groups"), at most
    ``max_candidates`` (if > 0) and ``limit`` of them."""
    at = _AtAnchors(world, groups, options)
    # Randomized, the anchors come in a random order and each group's
    # candidates at an anchor too: the first results are a random sample
    # of every result, not only of the trees.
    if options.max_candidates > 0:
        stream = _taking_turns(_first_generated(
            world, world.anchors(options.randomize), at.results, options))
    elif at.lone and not options.randomize:
        stream = _lone_turns(world, at.plans[0], world.anchor_batches(),
                             at.root_allowed)  # its own repeats out
    else:
        anchors = world.anchors(options.randomize)
        # lazily: with a limit, the later anchors are never searched
        stream = _taking_turns(at.results(anchor) for anchor in anchors)
        if world.sharing:
            # Only a sharing provider, reachable from several anchors, can
            # make the same result appear twice.
            stream = _unique(world, stream)
    results = list(itertools.islice(stream, options.limit))
    if options.randomize:
        random.shuffle(results)
    return results


def _lone_turns(world: World, plan: GroupSearch, batches: Iterator[list[int]],
                root_allowed: Callable[[int], bool] | None
                ) -> Iterator[Result | OneProviderResult]:
    """The results of a request of one group, the anchors taking turns (as
    ``_taking_turns`` takes them): the first turn asks each anchor for its
    first result only (``first_result_finder``), the later ones go
    on with the candidates of those that had one."""
    seen: set[tuple] = set()
    # per anchor that had a first candidate and may have others: the
    # anchor, or its candidates after the first when they are already
    # being made (a tree of one provider has one candidate at most)
    had_one: list[int | Iterator[Result | OneProviderResult | SpreadResult]] = []
    # the anchors of those whose root alone gave everything
    root_gave_all: set[int] = set()
    yield from _lone_first_turn(world, plan, batches, root_allowed, seen, had_one,
                                root_gave_all)
    later = ((itertools.islice(_lone_result_stream(world, plan, item, item in root_gave_all),
                               1, None)
              if isinstance(item, int) else item) for item in had_one)
    for found in _taking_turns(later):
        result = _new_result(world, found, seen)
        if result is not None:
            yield result


def _new_result(world: World, result: Result | OneProviderResult | SpreadResult,
                seen: set[tuple]) -> Result | OneProviderResult | SpreadResult | None:
    """``result``, None when it was given already (``_repeated``, asked only
    of a result of sharing providers: the others, nearly all, cannot be)."""
    sharing = world.sharing
    if sharing and sharing.issuperset(result.giving()) and _repeated(world, result, seen):
        return None
    return result


def _lone_first_turn(world: World, plan: GroupSearch, batches: Iterator[list[int]],
                     root_allowed: Callable[[int], bool] | None, seen: set[tuple],
                     had_one: list, root_gave_all: set[int]
                     ) -> Iterator[Result | OneProviderResult | SpreadResult]:
    """The first turn of ``_lone_turns``, each anchor's first result; those
    that may have more go to ``had_one``, and to ``root_gave_all`` too
    when their root alone gave everything.

    Most trees' first candidate is their root alone, giving everything
    (a compute, with or without a sharing disk beside it): which roots
    have room is asked of the world for a whole batch (``roots_fitting``),
    and those trees look no further (the most common result, made here
    without a call)."""
    suffix, resources = plan.group.suffix, plan.resources
    first_result = first_result_finder(world, plan)
    members_of, providers = world.members, world.providers
    root_filters = plan.single_filters
    sharing = world.sharing
    for batch in batches:
        # the roots that alone pass every check of the group taking everything
        giving_all: set[int] = set()
        if resources:
            giving_all = world.roots_fitting(batch, resources)
            if root_filters is not None and giving_all:
                giving_all = world.roots_passing(giving_all, plan.group, root_filters)
        for anchor in batch:
            if root_allowed is not None and not root_allowed(anchor):
                continue
            root = providers[anchor]
            members = members_of[anchor]
            if anchor in giving_all and members[0] is root:
                # the root gives everything: the tree's first candidate,
                # spreading or not (the checks of one provider taking
                # everything are those of the root alone spreading)
                if len(members) > 1:
                    had_one.append(anchor)
                    root_gave_all.add(anchor)
                result = new_one_provider_result((anchor, resources, suffix))
                if sharing and anchor in sharing and _repeated(world, result, seen):
                    continue
                yield result
                continue
            first = first_result(anchor)
            if first is None:
                continue
            if first is NOT_AT_ONCE:
                results = _lone_result_stream(world, plan, anchor)
                result = next(results, None)
                if result is None:
                    continue
                had_one.append(results)
            else:
                if len(members) > 1:
                    had_one.append(anchor)
                result = first
            result = _new_result(world, result, seen)
            if result is not None:
                yield result


def _lone_result_stream(world: World, plan: GroupSearch, anchor: int,
                        root_gave_all: bool = False
                        ) -> Iterator[Result | OneProviderResult | SpreadResult]:
    """The results of a request of one group at ``anchor``: those of its
    ``group_candidate_stream``, a spread made of its choices alone (the
    most common result after a tree's first: a compute with each sharing
    disk serving it). ``root_gave_all``: the root alone passed every check
    of the group taking everything."""
    group = plan.group
    # Only a group asking resources spreads; with an in_tree no provider
    # has, no provider passes its checks, so it has no choice.
    if spreads(world, plan, anchor):
        choices = root_spread_choices(world, plan, anchor) if root_gave_all else None
        if choices is None:
            choices = spread_choices(world, plan, anchor)
        return map(new_spread_result, zip(choices, itertools.repeat(plan.resources),
                                          itertools.repeat(group.suffix)))
    return _lone_group_results(group, group_candidate_stream(world, plan, anchor))


def _first_generated(world: World, anchors: Iterator[int],
                     search_anchor: Callable[[int], Iterator[Result]],
                     options: SearchOptions) -> list[Iterator[Result]]:
    """With ``max_allocation_candidates``: the first that many results,
    generated in the order of the strategy (depth-first: every result of
    an anchor before the next; breadth-first: the anchors in turn) and
    without repeats, then, below 1.29 in a nested world, without those
    using two providers of a tree (spec steps 7-9); per anchor, for the
    limit to take from in turn."""
    if options.breadth_first:
        tagged = _taking_turns(((anchor, result) for result in search_anchor(anchor))
                               for anchor in anchors)
    else:
        tagged = ((anchor, result) for anchor in anchors for result in search_anchor(anchor))
    if world.sharing:
        tagged = _unique(world, tagged, itemgetter(1))
    one_provider_per_tree = not options.nested_aware and world.has_nesting
    by_anchor: dict[int, list[Result]] = {}
    for anchor, result in itertools.islice(tagged, options.max_candidates):
        if not one_provider_per_tree or _one_provider_per_tree(world, result):
            by_anchor.setdefault(anchor, []).append(result)
    return [iter(results) for results in by_anchor.values()]
