"""Group candidates: every way one request group can be satisfied within
one anchor's tree and the sharing providers serving it (docs: "How one
group finds its candidates"), made one anchor at a time as the search
reaches it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from placement.candidates.checks import (
    Check,
    ClassChecks,
    GroupChecks,
    TraitsCheck,
    fits_every_class,
    group_checks,
)
from placement.candidates.model import (
    GroupCandidate,
    OneProviderResult,
    Provider,
    RequestGroup,
    SpreadResult,
    new_one_provider_result,
    new_spread_result,
    one_provider_allocations,
)
from placement.candidates.world import World

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
        if amounts and not fits_every_class(provider.inventories, amounts):
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
    are asked for (see ``first_result_finder``)."""
    group = plan.group
    if not group.resources:
        if plan.single.filters:
            yield from _single_stream(world, plan, anchor)
        return
    if group.in_tree is not None and group.in_tree not in world.tree_roots_by_uuid:
        return
    if spreads(world, plan, anchor):
        yield from _spread_stream(world, plan, anchor)
    else:
        yield from _single_stream(world, plan, anchor)


# What first_result_finder's finder answers when the first result is
# further than it looks (the group_candidate_stream then finds it).
NOT_AT_ONCE = object()


def first_result_finder(world: World, plan: GroupSearch
                        ) -> Callable[[int], OneProviderResult | SpreadResult | None | object]:
    """For a request of ``plan``'s group alone: the first result at any
    anchor (its first candidate of ``group_candidate_stream``), made as a
    result at once, without the candidate: None when there is none,
    NOT_AT_ONCE when finding it takes more than a look at each member (a
    spread group whose first combination lacks a required trait, a
    resourceless group). The trees take turns and a limit often takes
    only the first result of each: this is what a request of one group
    asks of most trees. What does not depend on the anchor is looked up
    once."""
    group = plan.group
    if not group.resources:
        return lambda anchor: NOT_AT_ONCE
    if group.in_tree is not None and group.in_tree not in world.tree_roots_by_uuid:
        return lambda anchor: None
    members_of, providers = world.members, world.providers
    single_passes, resources, suffix = plan.single_passes, plan.resources, group.suffix
    spreads = plan.spread is not None

    def first(anchor: int) -> OneProviderResult | SpreadResult | None | object:
        members = members_of[anchor]
        root = providers[anchor]
        if not spreads or (len(members) == 1 and members[0] is root):
            for provider in members:
                if single_passes(provider, root):
                    return new_one_provider_result((provider.id, resources, suffix))
            return None
        if not _may_have_traits(world, plan, anchor):
            return None
        choice = _first_spread_choice(world, plan, anchor)
        if choice is None:
            return None
        if not _has_traits(world, plan, choice):
            return NOT_AT_ONCE
        return new_spread_result((choice, resources, suffix))
    return first


def spreads(world: World, plan: GroupSearch, anchor: int) -> bool:
    """Does the group spread at ``anchor``? Not when the root is the only
    provider there (no child and no sharing provider serving it, the most
    common tree): spreading over it is taking everything from it."""
    if plan.spread is None:
        return False
    members = world.members[anchor]
    return len(members) != 1 or members[0].id != anchor


def _single_candidate(anchor: int, provider_id: int, resources: tuple[tuple[str, int], ...]
                      ) -> GroupCandidate:
    return GroupCandidate(anchor, one_provider_allocations(provider_id, resources),
                          frozenset((provider_id,)))


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
        offered = frozenset().union(*[provider.traits for provider in members])
    else:
        own_count, (_, serving_traits) = parts
        offered = serving_traits.union(*[provider.traits for provider in members[:own_count]])
    return _traits_pass(traits_checks, offered)


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
        options: list[list[int]] = [[] for _ in plan.resources]
        for provider in serving:  # each of another tree
            for index in _classes_able(plan, provider, anchor, root):
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
        members = world.members[anchor]
        parts = _serving_parts(world, plan, anchor)
        if parts is not None:
            members = members[:parts[0]]
        options = [[] for _ in plan.resources]
        for provider in members:
            for index in _classes_able(plan, provider, anchor, root):
                options[index].append(provider.id)
        if parts is not None:
            options = [own + serving for own, serving in zip(options, parts[1][0], strict=True)]
        plan.spread_options[anchor] = options
    return options


def _classes_able(plan: GroupSearch, provider: Provider, anchor: int, root: Provider
                  ) -> tuple[int, ...]:
    """The indexes in ``plan.resources`` of the classes a member of
    ``anchor`` can give the spread: none unless it passes the checks that
    do not depend on the class; those it has room for. What a provider
    can give is kept for the request (the same at every anchor it
    serves); whether it passes, for a sharing provider serving other
    trees, too, unless a check looks at the root."""
    if provider.root_id != anchor and not plan.spread.foreign_sees_root:
        gives = plan.spread_foreign.get(provider.id)
        if gives is None:
            gives = plan.spread_foreign[provider.id] = (
                _classes_given(plan, provider) if plan.spread_passes(provider, root) else ())
        return gives
    if not plan.spread_passes(provider, root):
        return ()
    gives = plan.spread_able.get(provider.id)
    if gives is None:
        gives = plan.spread_able[provider.id] = _classes_given(plan, provider)
    return gives


def _classes_given(plan: GroupSearch, provider: Provider) -> tuple[int, ...]:
    """The indexes in ``plan.resources`` of the classes ``provider`` has
    room for."""
    inventories = provider.inventories
    given = []
    # fits_every_class of each class, inlined: asked of every member of
    # every tree the spread visits
    for index, (class_name, amount) in enumerate(plan.resources):
        inventory = inventories.get(class_name)
        if inventory is not None and inventory.fits(amount):
            given.append(index)
    return tuple(given)


def _first_spread_choice(world: World, plan: GroupSearch, anchor: int
                         ) -> tuple[int, ...] | None:
    """The first combination of the spread: the first member able to give
    each class (the first option of each class, ``_spread_options``);
    None when some class has none. Found by looking at the members in
    order until each class has one, without making every class's options
    (a tree's first result is all the first turn asks of most trees: a
    nested compute gives every class from its root and first child)."""
    options = plan.spread_options.get(anchor)
    if options is not None:
        return tuple([option[0] for option in options]) if all(options) else None
    root = world.providers[anchor]
    choice: list[int | None] = [None] * len(plan.resources)
    missing = len(choice)
    for provider in world.members[anchor]:
        for index in _classes_able(plan, provider, anchor, root):
            if choice[index] is None:
                choice[index] = provider.id
                missing -= 1
        if not missing:
            return tuple(choice)  # type: ignore[arg-type]
    return None


def _spread_stream(world: World, plan: GroupSearch, anchor: int) -> Iterator[GroupCandidate]:
    """The unsuffixed group over trees and sharing providers (docs: "spread
    over a tree"): one provider per class, every combination of the
    members able to give each (``_spread_options``) whose providers have
    the required traits together."""
    resources = plan.resources
    for choice in spread_choices(world, plan, anchor):
        yield _choice_candidate(anchor, choice, resources)


def spread_choices(world: World, plan: GroupSearch, anchor: int) -> Iterator[tuple[int, ...]]:
    """The choices (a provider per class, in the order of ``plan.resources``)
    of ``_spread_stream``. Usually every choice has the traits: the
    product itself is returned then (iterated at C speed, without a
    generator's frame per choice)."""
    if not _may_have_traits(world, plan, anchor):
        return iter(())
    options = _spread_options(world, plan, anchor)
    if _every_choice_has_traits(world, plan, options):
        return itertools.product(*options)
    return _choices_with_traits(world, plan, options)


def _choices_with_traits(world: World, plan: GroupSearch, options: list[list[int]]
                         ) -> Iterator[tuple[int, ...]]:
    """The choices of the product of ``options`` whose providers have a
    spread group's required traits together, in the product's order. The
    last class's options are sorted out once per choice of the others, by
    their traits (a nested tree's disk is its root's, whose traits
    complete the choice, or one of the sharing providers', all alike)."""
    records, checks = world.providers, plan.spread.together
    *others, last = options
    last_traits = [(provider_id, records[provider_id].traits) for provider_id in last]
    for chosen in itertools.product(*others):
        traits = frozenset().union(*[records[provider_id].traits for provider_id in chosen])
        completes: dict[frozenset[str], bool] = {}
        for provider_id, own in last_traits:
            passes = completes.get(own)
            if passes is None:
                passes = completes[own] = _traits_pass(checks, traits | own)
            if passes:
                yield (*chosen, provider_id)


def root_spread_choices(world: World, plan: GroupSearch, anchor: int
                        ) -> Iterator[tuple[int, ...]] | None:
    """``spread_choices`` at an anchor whose root alone passed the group's
    checks taking everything, for a tree of its root alone served by a set
    of sharing providers (``_serving_parts``): the root then passes the
    spread's provider checks, has room for every class and has every
    required trait, so each class's options are the root and the set's,
    worked out once per set. None when the tree is not so (or when a
    choice without the root may lack a trait): ``spread_choices`` then."""
    parts = _serving_parts(world, plan, anchor)
    if parts is None or parts[0] != 1:
        return None
    serving_options = parts[1][0]
    options = [[anchor, *serving] for serving in serving_options]
    # a class only the root gives puts the root, with its traits, in every
    # choice
    if all(serving_options) and not _every_choice_has_traits(world, plan, options):
        return None
    return itertools.product(*options)


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
    return _traits_pass(traits_checks, frozenset().union(
        *[records[provider_id].traits for provider_id in provider_ids]))


def _traits_pass(traits_checks: tuple[TraitsCheck, ...], together: frozenset[str]) -> bool:
    """Do the traits of a choice's providers, ``together``, pass a spread
    group's traits checks?"""
    return all([check.passes(together) for check in traits_checks])


def _choice_candidate(anchor: int, choice: tuple[int, ...],
                      resources: tuple[tuple[str, int], ...]) -> GroupCandidate:
    return GroupCandidate(anchor, tuple([
        (provider_id, class_name, amount)
        for provider_id, (class_name, amount) in zip(choice, resources, strict=True)]),
        frozenset(choice))
