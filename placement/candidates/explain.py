"""Explaining allocation candidates: why a request gets the candidates it gets.

``explain`` takes the request of ``find.find`` and answers,
for each request group, the funnel of its constraints in the order they
apply, with how many providers (and trees) entered and left each; then the
steps that act on whole trees, each with how many trees entered and left;
and the number of allocation requests. The groups' funnels are counted on
the same provider copy and usages as the search, with the search's
own checks (``placement.candidates.checks``, in the order listed there);
the tree steps run the search's own group candidates and
combination (``search``) at every tree; and the final count is the
length of the search's own results, without a limit. It never writes.

For named providers it also tells the first constraint that rules each out,
with the numbers.

The unsuffixed group in a database with nested or sharing providers may
take each class from a different provider of a tree (it *spreads*): its
class steps then count, each from the providers entering the resource
steps, the providers able to give that class, the providers leaving the
resource steps are those able to give one of the classes, and its required
(and any-of) traits count a provider when the providers of its tree left
so far have them together. Whether a tree can put a spread group together
is the tree step of that group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import NamedTuple

import sqlalchemy as sa

from placement.candidates import find, search
from placement.candidates.checks import Check, GroupChecks, TraitsCheck, Why
from placement.candidates.copy_world import CopyWorld
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.groups import group_candidates, group_search
from placement.candidates.kept import kept_bytes
from placement.candidates.memo import Key
from placement.candidates.model import ISOLATE, Provider, RequestGroup, Result, SearchOptions
from placement.candidates.provider_copy import ProviderCopy
from placement.candidates.world import World

# What rules a provider out, or None (see ``checks.Why``). A test writes
# the detail only when asked (the second argument): it is asked again for
# the named providers only.
Verdict = Why | None
Test = Callable[[Provider, bool], Verdict]
# provider id -> the reason and the test ruling it out
RuledOutBy = dict[int, tuple[str, Test]]

@dataclasses.dataclass
class Count:
    providers: int
    trees: int


@dataclasses.dataclass
class GroupStep:
    constraint: str  # inventory, capacity, required_traits, any_of_traits, ...
    description: str
    entered: Count
    left: Count
    # capacity steps: reason -> providers it ruled out
    ruled_out: dict[str, int] | None = None


@dataclasses.dataclass
class GroupFunnel:
    suffix: str
    spread: bool
    steps: list[GroupStep]


@dataclasses.dataclass
class TreeStep:
    constraint: str  # reachable, root_required, group, resources_together, ...
    description: str
    entered: int
    left: int
    # group steps: trees left only thanks to sharing providers
    only_through_sharing: int | None = None


@dataclasses.dataclass
class RuledOut:
    constraint: str
    detail: str
    suffix: str | None = None  # the group, for group constraints


@dataclasses.dataclass
class ProviderExplanation:
    uuid: str
    found: bool
    root_provider_uuid: str | None = None
    # the first constraint ruling it (or its tree) out; None: none did
    ruled_out: RuledOut | None = None
    # suffix -> the group constraint ruling it out of that group (None: none)
    groups: dict[str, RuledOut | None] = dataclasses.field(default_factory=dict)
    # allocation requests it gives resources to or is mapped in
    allocation_requests: int = 0


@dataclasses.dataclass
class Explanation:
    groups: list[GroupFunnel]
    trees: list[TreeStep]
    allocation_requests: int
    providers: list[ProviderExplanation]


def explain(connection: sa.engine.Connection, groups: list[RequestGroup],
            options: SearchOptions, provider_uuids: Iterable[str] = ()) -> Explanation:
    """The explanation of the allocation candidates of ``groups`` (the
    ``limit`` of ``options`` is ignored: the count is of every candidate).
    Unknown classes or traits raise InvalidInput, as for the candidates."""
    options = dataclasses.replace(options, limit=None, randomize=False)
    copy, world, _ = find.prepare(connection, groups, options)
    # First the search itself: it loads the world's trees and usages.
    results = search.search(world, groups, options)
    provider_uuids = list(dict.fromkeys(provider_uuids))
    records: dict[int, Provider] = {}
    funnels, group_verdicts = [], []
    # groups asking the same (resources1 and resources2 of one flavor)
    # have the same funnel: the first such group's is reused
    made: list[tuple[RequestGroup, GroupFunnel, RuledOutBy]] = []
    for group in groups:
        alike = next(((funnel, verdicts) for other, funnel, verdicts in made
                      if search.alike(other, group)), None)
        if alike is not None:
            funnel, verdicts = dataclasses.replace(alike[0], suffix=group.suffix), alike[1]
        else:
            # named providers need the verdicts, which are not kept
            funnel = None if provider_uuids else _kept_funnel(copy, world, group)
            verdicts = {}
            if funnel is None:
                records = records or _records(copy, world)
                funnel, verdicts = _group_funnel(world, records, group)
                _keep_funnel(copy, world, group, funnel)
            made.append((group, funnel, verdicts))
        funnels.append(funnel)
        group_verdicts.append(verdicts)
    tree_steps, tree_verdicts = _tree_steps(copy, world, groups, options, results)
    providers = [_provider_explanation(uuid, copy, records, groups, group_verdicts,
                                       tree_verdicts, results)
                 for uuid in provider_uuids]
    return Explanation(funnels, tree_steps, len(results), providers)


def _records(copy: ProviderCopy, world: CopyWorld
             ) -> dict[int, Provider]:
    """The search record of every provider, with its usages."""
    return {provider_id: world.record(provider_id) for provider_id in copy.providers}


# Group funnels ---------------------------------------------------------------
#
# A funnel depends on the providers, their usages of the requested classes
# and the group: it is kept (in the copy's store of what requests keep)
# for the next request finding the same providers (the copy makes a new
# mapping of them at any change) and the same usages. The verdicts against
# providers are not kept: a request naming providers makes its funnels anew.

class _FunnelOf(Key["tuple[dict, dict, GroupFunnel]"]):
    """A group's funnel, with the providers and usages it was counted on:
    what it depends on of the group (not its suffix) and of the world."""
    # granular: bool
    # resources: tuple[tuple[str, int], ...]
    # traits: tuple
    # aggregates: tuple
    # in_tree: str | None
    # spread_unsuffixed: bool
    # tree_roots: tuple[tuple[str, int], ...]
    __slots__ = ()


def _funnel_key(world: CopyWorld, group: RequestGroup) -> _FunnelOf:
    def names(filter_: TraitFilter | AggregateFilter) -> tuple:
        return (frozenset(frozenset(any_of) for any_of in filter_.required),
                frozenset(filter_.forbidden))
    return _FunnelOf(group.granular, tuple(group.resources.items()),
                     names(group.traits), names(group.aggregates), group.in_tree,
                     world.spread_unsuffixed, tuple(sorted(world.tree_roots_by_uuid.items())))


def _kept_funnel(copy: ProviderCopy, world: CopyWorld,
                 group: RequestGroup) -> GroupFunnel | None:
    kept = copy.kept.get(_funnel_key(world, group))
    if kept is None:
        return None
    providers, used, funnel = kept
    if providers is not copy.providers or used != world.every_usage():
        return None
    return dataclasses.replace(funnel, suffix=group.suffix)


def _keep_funnel(copy: ProviderCopy, world: CopyWorld,
                 group: RequestGroup, funnel: GroupFunnel) -> None:
    used = dict(world.every_usage())
    copy.kept.put(_funnel_key(world, group), (copy.providers, used, funnel),
                      kept_bytes(len(used)))


def _trees(pool: Iterable[Provider]) -> int:
    return len({provider.root_id for provider in pool})


def _count(pool: list[Provider]) -> Count:
    return Count(len(pool), _trees(pool))


def _verdict(world: World, check: Check) -> Test:
    """``check`` asked of a provider serving its own tree."""
    def verdict(provider: Provider, detailed: bool) -> Verdict:
        root = world.providers[provider.root_id]
        return None if check.passes(provider, root) else check.why(provider, root, detailed)
    return verdict


def _pooled_verdict(world: World, check: TraitsCheck,
                    tree_traits: dict[int, frozenset[str]]) -> Test:
    """A spread group's required traits asked of a provider: with the traits
    of its tree's providers left (``tree_traits``), or of a sharing
    provider's own."""
    def verdict(provider: Provider, detailed: bool) -> Verdict:
        offered = provider.traits
        if provider.id not in world.sharing:
            offered = tree_traits.get(provider.root_id, offered)
        return None if check.passes(offered) else check.why(offered, detailed)
    return verdict


Step = tuple[str, str, Test]  # constraint, description, test


def _step(world: World, check: Check) -> Step:
    return check.constraint, check.description, _verdict(world, check)


def _filter_steps(world: World, checks: GroupChecks,
                  tree_traits: dict[int, frozenset[str]]) -> list[Step]:
    """The trait, aggregate and in_tree steps of the group, those it has."""
    return [(check.constraint, check.description, _pooled_verdict(world, check, tree_traits))
            if isinstance(check, TraitsCheck) else _step(world, check)
            for check in checks.filters]


class _Funnel:
    """The steps of one group's funnel as they are applied, and the first
    verdict against each provider."""

    def __init__(self) -> None:
        self.steps: list[GroupStep] = []
        self.ruled_out: RuledOutBy = {}

    def apply(self, constraint: str, description: str, test: Test,
              entering: list[Provider]) -> tuple[list[Provider], RuledOutBy]:
        """The providers passing ``test``, and the reason against each other one."""
        left, failed, reasons = [], {}, {}
        for provider in entering:
            verdict = test(provider, False)
            if verdict is None:
                left.append(provider)
                continue
            failed[provider.id] = (verdict[0], test)
            reasons[verdict[0]] = reasons.get(verdict[0], 0) + 1
        self.steps.append(GroupStep(constraint, description, _count(entering), _count(left),
                                    reasons if constraint == "capacity" else None))
        return left, failed

    def rule_out(self, failed: RuledOutBy) -> None:
        for provider_id, verdict in failed.items():
            self.ruled_out.setdefault(provider_id, verdict)


def _group_funnel(world: World, records: dict[int, Provider], group: RequestGroup
                  ) -> tuple[GroupFunnel, RuledOutBy]:
    """The funnel of ``group`` over every provider, and provider id -> the
    first constraint ruling it out of the group."""
    checks = group_search(world, group).checks
    funnel = _Funnel()
    pool = [records[provider_id] for provider_id in sorted(records)]
    resource_steps = [(_step(world, class_checks.inventory), _step(world, class_checks.capacity))
                      for class_checks in checks.resources]
    if checks.spread:
        # each class from the providers entering the resource steps; out of
        # the group only the providers able to give none of them
        able: set[int] = set()
        for class_steps in resource_steps:
            class_pool = pool
            for constraint, description, test in class_steps:
                class_pool, _ = funnel.apply(constraint, description, test, class_pool)
            able.update(provider.id for provider in class_pool)

        def gives_no_class(provider: Provider, detailed: bool) -> Verdict:
            details = []
            for (_, _, has_inventory), (_, _, fits) in resource_steps:
                verdict = has_inventory(provider, True) or fits(provider, True)
                if verdict is not None:
                    details.append(verdict[1])
            return "resources", "; ".join(details)

        funnel.rule_out({provider.id: ("resources", gives_no_class)
                         for provider in pool if provider.id not in able})
        pool = [provider for provider in pool if provider.id in able]
    else:
        for class_steps in resource_steps:
            for constraint, description, test in class_steps:
                pool, failed = funnel.apply(constraint, description, test, pool)
                funnel.rule_out(failed)
    tree_traits: dict[int, frozenset[str]] = {}
    if checks.spread:
        for provider in pool:
            tree_traits[provider.root_id] = tree_traits.get(
                provider.root_id, frozenset()) | provider.traits
    for constraint, description, test in _filter_steps(world, checks, tree_traits):
        pool, failed = funnel.apply(constraint, description, test, pool)
        funnel.rule_out(failed)
    return GroupFunnel(group.suffix, checks.spread, funnel.steps), funnel.ruled_out


# Tree steps ------------------------------------------------------------------

def _results_by_anchor(world: World, results: list[Result]
                       ) -> dict[int, list[Result]]:
    """The results of each tree, those made with a provider of that tree
    (a result of sharing providers only could come from any tree they serve)."""
    by_anchor: dict[int, list[Result]] = {}
    for result in results:
        roots = {world.providers[provider_id].root_id
                 for providers in result.mappings.values() for provider_id in providers
                 if provider_id not in world.sharing}
        if len(roots) == 1:
            by_anchor.setdefault(roots.pop(), []).append(result)
    return by_anchor


class _TreeVerdict(NamedTuple):
    """What the tree steps make of one tree: the index of the first step
    ruling it out (None: none does) with the detail, and for each group
    whether it takes a provider from outside the tree in every way found."""

    failed_step: int | None
    detail: str
    through_sharing: tuple[bool, ...]


class _TreeSteps:
    """The steps acting on whole trees, in the order the search applies
    them, each looked into one tree at a time with the search's own group
    candidates and combination."""

    def __init__(self, world: World, groups: list[RequestGroup], options: SearchOptions):
        self.world, self.groups, self.options = world, groups, options
        self.plans = [group_search(world, group) for group in groups]
        # (constraint, description, the options the combination obeys,
        # or None for the steps that are no combination)
        steps: list[tuple[str, str, SearchOptions | None]] = []
        if options.root_traits:
            steps.append(("root_required", _root_description(options), None))
        steps += [("group", _group_description(group), None) for group in groups]
        relaxed = dataclasses.replace(options, group_policy=None, same_subtree=[],
                                      nested_aware=True)
        if len(groups) > 1:
            steps.append(("resources_together", "the groups' amounts fitting together",
                          relaxed))
        if not options.nested_aware and world.has_nesting:
            relaxed = dataclasses.replace(relaxed, nested_aware=False)
            steps.append(("one_provider_per_tree", "one provider per tree (before 1.29)",
                          relaxed))
        if options.group_policy == ISOLATE:
            relaxed = dataclasses.replace(relaxed, group_policy=ISOLATE)
            steps.append(("group_policy", "group_policy=isolate", relaxed))
        if options.same_subtree:
            steps.append(("same_subtree", "same_subtree=" + "&same_subtree=".join(
                ",".join(suffixes) for suffixes in options.same_subtree), options))
        self.steps = steps

    def _outside(self, anchor: int, providers: frozenset[int]) -> bool:
        return any(self.world.providers[p].root_id != anchor for p in providers)

    def of_results(self, anchor: int, results: list[Result]) -> _TreeVerdict:
        """The verdict of a tree with results: it passes every step."""
        return _TreeVerdict(None, "", tuple(
            all(self._outside(anchor, result.mappings[group.suffix]) for result in results)
            for group in self.groups))

    def diagnose(self, anchor: int) -> _TreeVerdict:
        """The verdict of a tree without results."""
        world, groups = self.world, self.groups
        index = 0
        if self.options.root_traits:
            if not self.options.root_traits.satisfied_by(world.providers[anchor].traits):
                return _TreeVerdict(0, "the root lacks the root_required traits", ())
            index = 1
        per_group, through_sharing = [], []
        for group, plan in zip(groups, self.plans, strict=True):
            candidates = group_candidates(world, plan, anchor)
            if not candidates:
                return _TreeVerdict(index, f"group {group.suffix or '(unsuffixed)'} has no "
                                           "provider in the tree or a sharing provider "
                                           "serving it", tuple(through_sharing))
            per_group.append(candidates)
            through_sharing.append(all(self._outside(anchor, candidate.providers)
                                       for candidate in candidates))
            index += 1
        for _, description, step_options in self.steps[index:]:
            combined = search.combined_results(world, groups, step_options, per_group)
            if next(combined, None) is None:
                return _TreeVerdict(index, "no combination of the groups' candidates obeys "
                                           + description, tuple(through_sharing))
            index += 1
        return _TreeVerdict(None, "", tuple(through_sharing))


def _tree_steps(copy: ProviderCopy, world: World, groups: list[RequestGroup],
                options: SearchOptions, results: list[Result]
                ) -> tuple[list[TreeStep], dict[int, RuledOut]]:
    """The tree steps with the trees entering and leaving each, and root
    id -> the first one ruling the tree out. A tree with results passes
    every step; the others are diagnosed one by one."""
    with_results = _results_by_anchor(world, results)
    tree_steps = _TreeSteps(world, groups, options)
    anchors = sorted(world.anchor_ids())
    verdicts = {anchor: tree_steps.of_results(anchor, with_results[anchor])
                if anchor in with_results
                else tree_steps.diagnose(anchor)
                for anchor in anchors}
    ruled_out: dict[int, RuledOut] = {
        root_id: RuledOut("reachable", "no inventory of a requested class in the tree or a "
                                       "sharing provider serving it, or outside member_of "
                                       "/ in_tree")
        for root_id in copy.trees if root_id not in verdicts}
    steps = [TreeStep("reachable", "a requested class in the tree or a sharing provider; "
                                   "member_of, in_tree", len(copy.trees), len(anchors))]
    group_index = 0
    for index, (constraint, description, _) in enumerate(tree_steps.steps):
        entering = [verdict for verdict in verdicts.values()
                    if verdict.failed_step is None or verdict.failed_step >= index]
        left = [verdict for verdict in entering if verdict.failed_step != index]
        sharing = None
        if constraint == "group":
            sharing = sum(verdict.through_sharing[group_index] for verdict in left)
            group_index += 1
        steps.append(TreeStep(constraint, description, len(entering), len(left), sharing))
    for anchor, verdict in verdicts.items():
        if verdict.failed_step is not None:
            ruled_out[anchor] = RuledOut(tree_steps.steps[verdict.failed_step][0], verdict.detail)
    return steps, ruled_out


def _root_description(options: SearchOptions) -> str:
    traits = options.root_traits
    return ",".join([*(("in:" if len(any_of) > 1 else "") + ",".join(sorted(any_of))
                       for any_of in traits.required),
                     *(f"!{name}" for name in sorted(traits.forbidden))])


def _group_description(group: RequestGroup) -> str:
    name = f"resources{group.suffix}" if group.resources else f"group {group.suffix}"
    what = ",".join(f"{class_name}:{amount}" for class_name, amount in group.resources.items())
    return f"{name}={what}" if what else name


# Named providers ---------------------------------------------------------------

def _provider_explanation(uuid: str, copy: ProviderCopy, records: dict[int, Provider],
                          groups: list[RequestGroup], group_verdicts: list[RuledOutBy],
                          tree_verdicts: dict[int, RuledOut],
                          results: list[Result]) -> ProviderExplanation:
    provider_id = copy.ids_by_uuid.get(uuid)
    if provider_id is None:
        return ProviderExplanation(uuid, found=False)
    provider = copy.providers[provider_id]
    in_groups: dict[str, RuledOut | None] = {}
    for group, verdicts in zip(groups, group_verdicts, strict=True):
        verdict = verdicts.get(provider_id)
        if verdict is None:
            in_groups[group.suffix] = None
        else:
            reason, test = verdict
            detailed = test(records[provider_id], True)
            in_groups[group.suffix] = RuledOut(reason, detailed[1] if detailed else "",
                                               group.suffix)
    used_in = sum(1 for result in results
                  if any(provider_id in providers for providers in result.mappings.values()))
    # Ruled out of the request when no group can use it, or its tree is
    # out; never when a result uses it (a sharing provider's own tree may
    # have no result of its own while it serves the results of others).
    ruled_out = None
    if not used_in:
        if all(verdict is not None for verdict in in_groups.values()):
            ruled_out = next(iter(in_groups.values()))
        if ruled_out is None:
            ruled_out = tree_verdicts.get(provider.root_id)
    return ProviderExplanation(uuid, True, copy.providers[provider.root_id].uuid, ruled_out,
                               in_groups, used_in)
