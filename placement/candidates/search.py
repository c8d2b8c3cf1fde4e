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
from collections.abc import Callable, Collection, Container, Iterable, Iterator
from operator import attrgetter, itemgetter
from typing import NamedTuple

from placement.candidates.checks import (
    Check,
    ClassChecks,
    GroupChecks,
    fits_every_class,
    group_checks,
)
from placement.candidates.filters import AggregateFilter, TraitFilter
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
    sharing: frozenset[int]
    # Some provider in the database has a parent.
    has_nesting: bool
    # in_tree uuid -> root id of its tree (absent: no such provider).
    tree_roots_by_uuid: dict[str, int]
    # anchor (root) -> the providers of its tree and the sharing providers
    # sharing with it, in id order
    members: dict[int, list[Provider]]
    _lineages: dict[int, frozenset[int]] = dataclasses.field(init=False, default_factory=dict)

    def anchor_ids(self) -> Collection[int]:
        """The roots the search may anchor candidates at (their trees loaded
        once ``anchors`` gave them)."""
        return self.members.keys()

    def anchors(self, randomize: bool = False) -> Iterator[int]:
        """The roots the search may anchor candidates at, in id order (or a
        random one)."""
        return itertools.chain.from_iterable(self.anchor_batches(randomize))

    def anchor_batches(self, randomize: bool = False) -> Iterator[list[int]]:
        """``anchors`` in batches. A world loaded lazily overrides this to
        load the trees of a batch just before it is searched."""
        anchors = sorted(self.members)
        if randomize:
            random.shuffle(anchors)
        yield anchors

    def roots_fitting(self, batch: list[int], amounts: tuple[tuple[str, int], ...]
                      ) -> Container[int]:
        """The anchors of ``batch`` whose root alone has room for each
        (class, amount): ``fits_every_class`` of each root, which a world
        keeping its roots' capacities may answer for a whole batch at once."""
        providers = self.providers
        return {anchor for anchor in batch
                if fits_every_class(providers[anchor].inventories, amounts)}

    def member_parts(self, anchor: int) -> tuple[int, tuple[int, ...], list[Provider]] | None:
        """How the members of ``anchor`` are made, when they are its own
        first and then the sharing providers serving it from other trees,
        a set many trees share: (how many are its own, the ids of the
        serving ones, their records). None when the world does not say:
        the spread then looks at each member (the answer is the same)."""
        return None

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


class Result(NamedTuple):
    """A tuple, as GroupCandidate: a request may make thousands."""

    # (provider id, class name, amount), one per provider and class, in the
    # order the groups added them (a lone group's candidate tuple as it is)
    allocations: tuple[tuple[int, str, int], ...]
    # suffix -> providers mapped by that group
    mappings: dict[str, frozenset[int]]

    def key(self) -> tuple:
        """Identity for de-duplication: allocations and mappings, not anchor."""
        return (frozenset(self.allocations), frozenset(self.mappings.items()))

    def giving(self) -> Iterable[int]:
        """The providers giving resources (one or more times)."""
        return [provider_id for provider_id, _, _ in self.allocations]


class OneProviderResult(NamedTuple):
    """A ``Result`` of one group taking everything from one provider, the
    most common (a root giving all a flavor asks): made without its tuples
    and dicts, which ``allocations`` and ``mappings`` make when asked; a
    request of one group may make a thousand."""

    provider_id: int
    resources: tuple[tuple[str, int], ...]  # (class name, amount): the group's, shared
    suffix: str

    @property
    def allocations(self) -> tuple[tuple[int, str, int], ...]:
        return _one_provider_allocations(self.provider_id, self.resources)

    @property
    def mappings(self) -> dict[str, frozenset[int]]:
        return {self.suffix: frozenset((self.provider_id,))}

    key = Result.key

    def giving(self) -> Iterable[int]:
        return (self.provider_id,)


class SpreadResult(NamedTuple):
    """A ``Result`` of one group spread over a tree and the sharing
    providers serving it (a compute's VCPU and memory with a sharing
    disk): the provider giving each class, without the tuples and dicts
    ``allocations`` and ``mappings`` make when asked."""

    choice: tuple[int, ...]  # the provider giving each class of ``resources``
    resources: tuple[tuple[str, int], ...]  # (class name, amount): the group's, shared
    suffix: str

    @property
    def allocations(self) -> tuple[tuple[int, str, int], ...]:
        return tuple([(provider_id, class_name, amount) for provider_id, (class_name, amount)
                      in zip(self.choice, self.resources, strict=True)])

    @property
    def mappings(self) -> dict[str, frozenset[int]]:
        return {self.suffix: frozenset(self.choice)}

    key = Result.key

    def giving(self) -> Iterable[int]:
        return self.choice


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
    # does one provider pass every check of ``single``, taking everything?
    single_passes: Callable[[Provider, Provider], bool]
    # the same without the resources' checks; None when there is none
    single_filters: Callable[[Provider, Provider], bool] | None
    # (class, amount) of the group, in the order its allocations are listed
    resources: tuple[tuple[str, int], ...]
    # spreading: does one provider pass the checks that do not depend on
    # the class? (the classes are those of ``resources``, in its order)
    spread_passes: Callable[[Provider, Provider], bool]
    # spreading, per anchor looked at: per class, the members able to give
    # it (``_spread_options``, kept for the anchor's later turns)
    spread_options: dict[int, list[list[int]]]
    # spreading: the indexes in ``resources`` of the classes a provider (by
    # id) can give (the same answer at every anchor it serves)
    spread_able: dict[int, tuple[int, ...]]
    # the same of a sharing provider serving other trees, () when it does
    # not pass ``spread_passes``, where that does not depend on the root
    spread_foreign: dict[int, tuple[int, ...]]
    # the ids of sharing providers serving trees (World.member_parts) ->
    # per class, those able to give it, and their traits together
    spread_serving: dict[tuple[int, ...], tuple[list[list[int]], frozenset[str]]]

    @property
    def checks(self) -> GroupChecks:
        """The checks of the group wherever it spreads."""
        return self.spread or self.single


def _passes_all(resources: list[ClassChecks], filters: tuple[Check, ...]
                ) -> Callable[[Provider, Provider], bool]:
    """One call asking a provider every check: the inventory and capacity
    checks of ``resources`` (``fits_every_class``), then ``filters``. The
    search asks it of every member of every tree it visits; calling the
    checks one by one costs several times more."""
    amounts = tuple((class_checks.class_name, class_checks.amount)
                    for class_checks in resources)
    filter_passes = tuple(check.passes for check in filters)

    def passes(provider: Provider, root: Provider) -> bool:
        if not fits_every_class(provider.inventories, amounts):
            return False
        for check in filter_passes:
            if not check(provider, root):
                return False
        return True
    return passes


def group_search(world: World, group: RequestGroup) -> GroupSearch:
    single = group_checks(group, False, world.tree_roots_by_uuid)
    spread = (group_checks(group, True, world.tree_roots_by_uuid)
              if group.resources and not group.granular and world.spread_unsuffixed else None)
    return GroupSearch(
        group, single, spread, _passes_all(single.resources, single.provider_filters),
        _passes_all([], single.provider_filters) if single.provider_filters else None,
        tuple(sorted(group.resources.items())),
        _passes_all([], spread.provider_filters if spread else ()), {}, {}, {}, {})


def group_candidates(world: World, plan: GroupSearch, anchor: int) -> list[GroupCandidate]:
    """Every way the group alone can be satisfied within the tree of
    ``anchor`` and the sharing providers serving it (docs: "How one group finds its candidates")."""
    return list(group_candidate_stream(world, plan, anchor))


def group_candidate_stream(world: World, plan: GroupSearch, anchor: int
                           ) -> Iterator[GroupCandidate]:
    """The candidates of ``group_candidates``, in its order, made as they
    are asked for (see ``first_group_candidate``)."""
    group = plan.group
    if not group.resources:
        if plan.single.filters:
            yield from _single_stream(world, plan, anchor)
        return
    if group.in_tree is not None and group.in_tree not in world.tree_roots_by_uuid:
        return
    if _spreads(world, plan, anchor):
        yield from _spread_stream(world, plan, anchor)
    else:
        yield from _single_stream(world, plan, anchor)


# What first_group_candidate answers when the first candidate is further
# than it looks (the group_candidate_stream then finds it).
NOT_AT_ONCE = object()


def first_group_candidate(world: World, plan: GroupSearch, anchor: int
                          ) -> GroupCandidate | None | object:
    """The first candidate of ``group_candidate_stream``, without making
    it: None when there is none, NOT_AT_ONCE when finding it takes more
    than a look at each member (a spread group whose first combination
    lacks a required trait, a resourceless group). The trees take turns
    and a limit often takes only the first candidate of each: this is
    what a request of one group asks of most trees."""
    return first_candidate_finder(world, plan)(anchor)


def first_candidate_finder(world: World, plan: GroupSearch
                           ) -> Callable[[int], GroupCandidate | None | object]:
    """``first_group_candidate`` of ``plan`` at any anchor, with what does
    not depend on the anchor looked up once."""
    group = plan.group
    if not group.resources:
        return lambda anchor: NOT_AT_ONCE
    if group.in_tree is not None and group.in_tree not in world.tree_roots_by_uuid:
        return lambda anchor: None
    members_of, providers = world.members, world.providers
    single_passes, resources = plan.single_passes, plan.resources
    spreads = plan.spread is not None

    def first(anchor: int) -> GroupCandidate | None | object:
        members = members_of[anchor]
        root = providers[anchor]
        if not spreads or (len(members) == 1 and members[0] is root):
            for provider in members:
                if single_passes(provider, root):
                    return _single_candidate(anchor, provider.id, resources)
            return None
        if not _may_have_traits(world, plan, anchor):
            return None
        choice = _first_spread_choice(world, plan, anchor)
        if choice is None:
            return None
        return _spread_candidate(world, plan, anchor, choice) or NOT_AT_ONCE
    return first


def _spreads(world: World, plan: GroupSearch, anchor: int) -> bool:
    """Does the group spread at ``anchor``? Not when the root is the only
    provider there (no child and no sharing provider serving it, the most
    common tree): spreading over it is taking everything from it."""
    if plan.spread is None:
        return False
    members = world.members[anchor]
    return len(members) != 1 or members[0].id != anchor


def _single_candidate(anchor: int, provider_id: int, resources: tuple[tuple[str, int], ...]
                      ) -> GroupCandidate:
    return GroupCandidate(anchor, _one_provider_allocations(provider_id, resources),
                          frozenset((provider_id,)))


def _one_provider_allocations(provider_id: int, resources: tuple[tuple[str, int], ...]
                              ) -> tuple[tuple[int, str, int], ...]:
    # tuple([...]): a list comprehension makes it twice as fast as a
    # generator, and a request may make a thousand of these
    return tuple([(provider_id, class_name, amount) for class_name, amount in resources])


def _single_stream(world: World, plan: GroupSearch, anchor: int) -> Iterator[GroupCandidate]:
    """All resources of the group from one provider (docs: "Granular
    groups"); a resourceless group (1.36+) picks providers by traits and
    aggregates only, and allocates nothing."""
    root = world.providers[anchor]
    passes = plan.single_passes
    for provider in world.members[anchor]:
        if passes(provider, root):
            yield _single_candidate(anchor, provider.id, plan.resources)


def _may_have_traits(world: World, plan: GroupSearch, anchor: int) -> bool:
    """Do the members of ``anchor`` have a spread group's required traits
    together? No combination of them can have a trait none of them has."""
    traits_checks = plan.spread.together
    if not traits_checks:
        return True
    members = world.members[anchor]
    parts = _serving_parts(world, plan, anchor)
    if parts is None:
        offered = frozenset().union(*(provider.traits for provider in members))
    else:
        own_count, (_, serving_traits) = parts
        offered = serving_traits.union(*(provider.traits for provider in members[:own_count]))
    return all(check.passes(offered) for check in traits_checks)


def _serving_parts(world: World, plan: GroupSearch, anchor: int
                   ) -> tuple[int, tuple[list[list[int]], frozenset[str]]] | None:
    """For members made of the anchor's own and a set of sharing providers
    serving many trees (``World.member_parts``): how many are its own, and
    what the serving ones give the spread (per class, those able to give
    it; their traits together), worked out once per set. None when the
    members are not made so, or when whether a sharing provider passes
    depends on the root."""
    if plan.spread.foreign_sees_root:
        return None
    parts = world.member_parts(anchor)
    if parts is None:
        return None
    own_count, serving_ids, serving = parts
    given = plan.spread_serving.get(serving_ids)
    if given is None:
        root = world.providers[anchor]
        passes, foreign = plan.spread_passes, plan.spread_foreign
        options: list[list[int]] = [[] for _ in plan.resources]
        for provider in serving:
            gives = foreign.get(provider.id)
            if gives is None:
                gives = foreign[provider.id] = (
                    _classes_given(plan, provider) if passes(provider, root) else ())
            for index in gives:
                options[index].append(provider.id)
        given = plan.spread_serving[serving_ids] = (
            options, frozenset().union(*(provider.traits for provider in serving)))
    return own_count, given


def _spread_options(world: World, plan: GroupSearch, anchor: int) -> list[list[int]]:
    """Per class of the spread, the members of ``anchor`` able to give it,
    in the order of the members: those passing the checks that do not
    depend on the class, with room for the class's amount."""
    options = plan.spread_options.get(anchor)
    if options is None:
        root = world.providers[anchor]
        passes, able, foreign = plan.spread_passes, plan.spread_able, plan.spread_foreign
        # a sharing provider passes at every tree it serves or at none,
        # unless a check looks at the root: asked once then
        foreign_once = not plan.spread.foreign_sees_root
        members = world.members[anchor]
        parts = _serving_parts(world, plan, anchor)
        if parts is not None:
            members = members[:parts[0]]
        options = [[] for _ in plan.resources]
        for provider in members:
            if foreign_once and provider.root_id != anchor:
                gives = foreign.get(provider.id)
                if gives is None:
                    gives = foreign[provider.id] = (
                        _classes_given(plan, provider) if passes(provider, root) else ())
            elif passes(provider, root):
                gives = able.get(provider.id)
                if gives is None:
                    gives = able[provider.id] = _classes_given(plan, provider)
            else:
                continue
            for index in gives:
                options[index].append(provider.id)
        if parts is not None:
            options = [own + serving for own, serving in zip(options, parts[1][0], strict=True)]
        plan.spread_options[anchor] = options
    return options


def _classes_given(plan: GroupSearch, provider: Provider) -> tuple[int, ...]:
    """The indexes in ``plan.resources`` of the classes ``provider`` has
    room for."""
    inventories = provider.inventories
    return tuple([index for index, amount in enumerate(plan.resources)
                  if fits_every_class(inventories, (amount,))])


def _first_spread_choice(world: World, plan: GroupSearch, anchor: int
                         ) -> tuple[int, ...] | None:
    """The first combination of the spread: the first member able to give
    each class; None when some class has none."""
    options = _spread_options(world, plan, anchor)
    if not all(options):
        return None
    return tuple([option[0] for option in options])


def _spread_stream(world: World, plan: GroupSearch, anchor: int) -> Iterator[GroupCandidate]:
    """The unsuffixed group over trees and sharing providers (docs: "spread
    over a tree"): one provider per class, every combination of the
    members able to give each (``_spread_options``) whose providers have
    the required traits together."""
    resources = plan.resources
    for choice in _spread_choices(world, plan, anchor):
        yield _choice_candidate(anchor, choice, resources)


def _spread_choices(world: World, plan: GroupSearch, anchor: int) -> Iterator[tuple[int, ...]]:
    """The choices (a provider per class, in the order of ``plan.resources``)
    of ``_spread_stream``."""
    if not _may_have_traits(world, plan, anchor):
        return
    options = _spread_options(world, plan, anchor)
    if _every_choice_has_traits(world, plan, options):
        yield from itertools.product(*options)
        return
    for choice in itertools.product(*options):
        if _has_traits(world, plan, choice):
            yield choice


def _every_choice_has_traits(world: World, plan: GroupSearch, options: list[list[int]]
                             ) -> bool:
    """Do the providers every choice takes (the only option of a class)
    have a spread group's required traits together already? Then so does
    every choice (more providers bring more traits): the usual tree, whose
    traits are the root's, which alone gives VCPU."""
    return _has_traits(world, plan, [option[0] for option in options if len(option) == 1])


def _has_traits(world: World, plan: GroupSearch, provider_ids: Iterable[int]) -> bool:
    """Do these providers have a spread group's required traits together?"""
    traits_checks = plan.spread.together
    if not traits_checks:
        return True
    records = world.providers
    together = frozenset().union(*[records[provider_id].traits for provider_id in provider_ids])
    return all([check.passes(together) for check in traits_checks])


def _spread_candidate(world: World, plan: GroupSearch, anchor: int,
                      choice: tuple[int, ...]) -> GroupCandidate | None:
    """The candidate of ``choice`` (a provider per class, in the order of
    ``plan.resources``), unless its providers lack a required trait
    together."""
    if not _has_traits(world, plan, choice):
        return None
    return _choice_candidate(anchor, choice, plan.resources)


def _choice_candidate(anchor: int, choice: tuple[int, ...],
                      resources: tuple[tuple[str, int], ...]) -> GroupCandidate:
    return GroupCandidate(anchor, tuple([
        (provider_id, class_name, amount)
        for provider_id, (class_name, amount) in zip(choice, resources, strict=True)]),
        frozenset(choice))


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


def search(world: World, groups: list[RequestGroup], options: SearchOptions
           ) -> list[Result | OneProviderResult]:
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
        if root_allowed is not None and not root_allowed(anchor):
            return None
        candidates: dict[int, list[GroupCandidate]] = {}
        for index in order:
            first = first_alike[index]
            if first in candidates:
                found = candidates[first]
            else:
                found = group_candidates(world, plans[first], anchor)
                if options.randomize:
                    random.shuffle(found)
            if not found:
                return None
            candidates[index] = found
            if isolated and index == isolated[-1] and len(set().union(
                    *(c.providers for i in isolated for c in candidates[i]))) < len(isolated):
                return None
        return [candidates[index] for index in range(len(groups))]

    lone = _lone(world, groups, options)

    def search_anchor(anchor: int) -> Iterator[Result]:
        if lone:
            if root_allowed is not None and not root_allowed(anchor):
                return iter(())
            candidates: Iterable[GroupCandidate] = group_candidate_stream(
                world, plans[0], anchor)
            if options.randomize:
                candidates = list(candidates)
                random.shuffle(candidates)
            return _lone_group_results(groups[0], candidates)
        per_anchor = per_group(anchor)
        if per_anchor is None:
            return iter(())
        return combined_results(world, groups, options, per_anchor)

    # Randomized, the anchors come in a random order and each group's
    # candidates at an anchor too: the first results are a random sample
    # of every result, not only of the trees.
    if options.max_candidates > 0:
        stream = _taking_turns(_first_generated(
            world, world.anchors(options.randomize), search_anchor, options))
    elif lone and not options.randomize:
        stream = _lone_turns(world, plans[0], world.anchor_batches(),
                             root_allowed)  # its own repeats out
    else:
        anchors = world.anchors(options.randomize)
        # lazily: with a limit, the later anchors are never searched
        stream = _taking_turns(search_anchor(anchor) for anchor in anchors)
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
    first candidate only (``first_group_candidate``), the later ones go
    on with the candidates of those that had one.

    Most trees' first candidate is their root alone, giving everything
    (a compute, with or without a sharing disk beside it): which roots
    have room is asked of the world for a whole batch (``roots_fitting``),
    and those trees look no further."""
    suffix, resources = plan.group.suffix, plan.resources
    first_candidate = first_candidate_finder(world, plan)
    members_of, providers = world.members, world.providers
    root_filters = plan.single_filters
    sharing = world.sharing
    seen: set[tuple] = set()

    def new(result: Result | OneProviderResult | SpreadResult
            ) -> Result | OneProviderResult | SpreadResult | None:
        """``result``, None when it was given already (``_repeated``, asked
        only of a result of sharing providers: the others, nearly all,
        cannot be, and this is asked of each)."""
        if sharing and sharing.issuperset(result.giving()) and _repeated(world, result, seen):
            return None
        return result

    def root_result(anchor: int) -> OneProviderResult | None:
        """``new`` of the root of ``anchor`` giving everything (the most
        common result: asked without a call)."""
        result = OneProviderResult(anchor, resources, suffix)
        if sharing and anchor in sharing and _repeated(world, result, seen):
            return None
        return result

    # per anchor that had a first candidate and may have others: the
    # anchor, or its candidates after the first when they are already
    # being made (a tree of one provider has one candidate at most)
    had_one: list[int | Iterator[GroupCandidate]] = []
    for batch in batches:
        fitting = world.roots_fitting(batch, resources) if resources else ()
        for anchor in batch:
            if root_allowed is not None and not root_allowed(anchor):
                continue
            root = providers[anchor]
            members = members_of[anchor]
            if (anchor in fitting and members[0] is root
                    and (root_filters is None or root_filters(root, root))):
                # the root gives everything: the tree's first candidate,
                # spreading or not (the checks of one provider taking
                # everything are those of the root alone spreading)
                if len(members) > 1:
                    had_one.append(anchor)
                result = root_result(anchor)
            else:
                first = first_candidate(anchor)
                if first is None:
                    continue
                if first is NOT_AT_ONCE:
                    results = _lone_result_stream(world, plan, anchor)
                    result = next(results, None)
                    if result is None:
                        continue
                    had_one.append(results)
                    result = new(result)
                else:
                    if len(members) > 1:
                        had_one.append(anchor)
                    result = new(Result(first.allocations, {suffix: first.providers}))
            if result is not None:
                yield result

    def the_others() -> Iterator[Iterator[Result | OneProviderResult | SpreadResult]]:
        for item in had_one:
            yield (itertools.islice(_lone_result_stream(world, plan, item), 1, None)
                   if isinstance(item, int) else item)
    for found in _taking_turns(the_others()):
        result = new(found)
        if result is not None:
            yield result


def _lone_result_stream(world: World, plan: GroupSearch, anchor: int
                        ) -> Iterator[Result | OneProviderResult | SpreadResult]:
    """The results of a request of one group at ``anchor``: those of its
    ``group_candidate_stream``, a spread made of its choices alone (the
    most common result after a tree's first: a compute with each sharing
    disk serving it)."""
    group = plan.group
    # Only a group asking resources spreads; with an in_tree no provider
    # has, no provider passes its checks, so it has no choice.
    if _spreads(world, plan, anchor):
        suffix, resources = group.suffix, plan.resources
        return (SpreadResult(choice, resources, suffix)
                for choice in _spread_choices(world, plan, anchor))
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
