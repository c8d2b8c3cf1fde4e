"""Explaining allocation candidates: why a request gets the candidates it gets.

``explain`` takes the request of ``find.find`` and answers,
for each request group, the funnel of its constraints in the order they
apply, with how many providers (and trees) entered and left each; then the
steps that act on whole trees, each with how many trees entered and left;
and the number of allocation requests. The groups' funnels are counted on
the same provider snapshot and usages as the search, with the same
predicates (``InventoryUsage.misfit`` beside ``fits``, the filters'
``satisfied_by``); the tree steps run the search's own group candidates and
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
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.memo import Key
from placement.candidates.search import (
    ISOLATE,
    Provider,
    RequestGroup,
    SearchOptions,
    World,
)
from placement.candidates.snapshot import Snapshot

# What rules a provider out, or None: (reason, detail) (the reason names
# the constraint or, for capacity steps, which part of it). A check writes
# the detail only when asked (the second argument): it is asked again for
# the named providers only.
Verdict = tuple[str, str] | None
Check = Callable[[Provider, bool], Verdict]
# provider id -> the reason and the check ruling it out
RuledOutBy = dict[int, tuple[str, Check]]

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
    snapshot, world, _ = find.prepare(connection, groups, options)
    # First the search itself: it loads the world's trees and usages.
    results = search.search(world, groups, options)
    provider_uuids = list(dict.fromkeys(provider_uuids))
    records: dict[int, Provider] = {}
    funnels, group_verdicts = [], []
    # groups asking the same (resources1 and resources2 of one flavor)
    # have the same funnel: the first such group's is reused
    made: list[tuple[RequestGroup, GroupFunnel, RuledOutBy]] = []
    for group in groups:
        unsuffixed = dataclasses.replace(group, suffix="")
        alike = next(((funnel, verdicts) for other, funnel, verdicts in made
                      if other.granular == group.granular
                      and dataclasses.replace(other, suffix="") == unsuffixed), None)
        if alike is not None:
            funnel, verdicts = dataclasses.replace(alike[0], suffix=group.suffix), alike[1]
        else:
            # named providers need the verdicts, which are not kept
            funnel = None if provider_uuids else _kept_funnel(snapshot, world, group)
            verdicts = {}
            if funnel is None:
                records = records or _records(snapshot, world)
                funnel, verdicts = _group_funnel(world, records, group)
                _keep_funnel(snapshot, world, group, funnel)
            made.append((group, funnel, verdicts))
        funnels.append(funnel)
        group_verdicts.append(verdicts)
    tree_steps, tree_verdicts = _tree_steps(snapshot, world, groups, options, results)
    providers = [_provider_explanation(uuid, snapshot, records, groups, group_verdicts,
                                       tree_verdicts, results)
                 for uuid in provider_uuids]
    return Explanation(funnels, tree_steps, len(results), providers)


def _records(snapshot: Snapshot, world: find.SnapshotWorld
             ) -> dict[int, Provider]:
    """The search record of every provider, with its usages."""
    return {provider_id: world.record(provider_id) for provider_id in snapshot.providers}


# Group funnels ---------------------------------------------------------------
#
# A funnel depends on the providers, their usages of the requested classes
# and the group: it is kept (in the snapshot's store of what requests keep)
# for the next request finding the same providers (the snapshot makes a new
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


def _funnel_key(world: find.SnapshotWorld, group: RequestGroup) -> _FunnelOf:
    def names(filter_: TraitFilter | AggregateFilter) -> tuple:
        return (frozenset(frozenset(any_of) for any_of in filter_.required),
                frozenset(filter_.forbidden))
    return _FunnelOf(group.granular, tuple(group.resources.items()),
                     names(group.traits), names(group.aggregates), group.in_tree,
                     world.spread_unsuffixed, tuple(sorted(world.tree_roots_by_uuid.items())))


def _kept_funnel(snapshot: Snapshot, world: find.SnapshotWorld,
                 group: RequestGroup) -> GroupFunnel | None:
    kept = snapshot.kept.get(_funnel_key(world, group))
    if kept is None:
        return None
    providers, used, funnel = kept
    if providers is not snapshot.providers or used != world.every_usage():
        return None
    return dataclasses.replace(funnel, suffix=group.suffix)


def _keep_funnel(snapshot: Snapshot, world: find.SnapshotWorld,
                 group: RequestGroup, funnel: GroupFunnel) -> None:
    snapshot.kept.put(_funnel_key(world, group),
                      (snapshot.providers, dict(world.every_usage()), funnel), 1)


def _trees(pool: Iterable[Provider]) -> int:
    return len({provider.root_id for provider in pool})


def _count(pool: list[Provider]) -> Count:
    return Count(len(pool), _trees(pool))


def _names(names: Iterable[str], separator: str = ", ") -> str:
    return separator.join(sorted(names))


def _inventory_check(class_name: str) -> Check:
    def check(provider: Provider, detailed: bool) -> Verdict:
        if class_name in provider.inventories:
            return None
        return "inventory", f"no {class_name} inventory" if detailed else ""
    return check


def _capacity_check(class_name: str, amount: int) -> Check:
    def check(provider: Provider, detailed: bool) -> Verdict:
        inventory = provider.inventories[class_name]
        reason = inventory.misfit(amount)
        if reason is None or not detailed:
            return reason and (reason, "")
        if reason == "capacity":
            free = max(0, inventory.capacity - inventory.used)
            return reason, (f"{class_name}: requested {amount}, free {free} of capacity "
                            f"{inventory.capacity} (used {inventory.used})")
        limit = getattr(inventory, reason)
        return reason, f"{class_name}: requested {amount}, {reason} {limit}"
    return check


def _resource_steps(group: RequestGroup) -> list[tuple[str, str, Check]]:
    steps = []
    for class_name, amount in group.resources.items():
        steps.append(("inventory", class_name, _inventory_check(class_name)))
        steps.append(("capacity", f"{class_name}: {amount}", _capacity_check(class_name, amount)))
    return steps


def _filter_steps(world: World, group: RequestGroup, spread: bool,
                  tree_traits: dict[int, frozenset[str]]) -> list[tuple[str, str, Check]]:
    """The trait, aggregate and in_tree steps of ``group``, those it has.
    ``tree_traits``: root id -> the traits of the providers of its tree able
    to give resources (a spread group's required traits may come from any
    of them)."""
    traits, aggregates = group.traits, group.aggregates
    steps: list[tuple[str, str, Check]] = []

    def root_of(provider: Provider) -> Provider:
        return world.providers[provider.root_id]

    def required(any_ofs: list[set[str]], constraint: str) -> Check:
        wanted = TraitFilter(required=any_ofs)

        def check(provider: Provider, detailed: bool) -> Verdict:
            offered = provider.traits
            if spread and provider.id not in world.sharing:
                offered = tree_traits.get(provider.root_id, offered)
            if wanted.satisfied_by(offered):
                return None
            if not detailed:
                return constraint, ""
            return constraint, "lacks " + "; ".join(
                f"one of {_names(any_of)}" if len(any_of) > 1 else _names(any_of)
                for any_of in any_ofs if any_of.isdisjoint(offered))
        return check

    def forbidden_traits(provider: Provider, detailed: bool) -> Verdict:
        present = traits.forbidden & provider.traits
        return None if not present else ("forbidden_traits",
                                         f"has {_names(present)}" if detailed else "")

    member_of = AggregateFilter(required=aggregates.required)

    def in_aggregates(provider: Provider, detailed: bool) -> Verdict:
        if member_of.satisfied_by(provider.aggregates) or (
                spread and member_of.satisfied_by(root_of(provider).aggregates)):
            return None
        if not detailed:
            return "member_of", ""
        return "member_of", "in none of " + "; ".join(
            _names(any_of) for any_of in aggregates.required
            if any_of.isdisjoint(provider.aggregates))

    def not_in_aggregates(provider: Provider, detailed: bool) -> Verdict:
        present = aggregates.forbidden & provider.aggregates
        if spread and not present:
            present = aggregates.forbidden & root_of(provider).aggregates
        return None if not present else (
            "member_of_forbidden",
            f"in the forbidden aggregates {_names(present)}" if detailed else "")

    tree_root = world.tree_roots_by_uuid.get(group.in_tree or "")

    def in_tree(provider: Provider, detailed: bool) -> Verdict:
        return None if provider.root_id == tree_root else (
            "in_tree", "in another tree" if tree_root is not None
            else "no provider has that uuid")

    plain = [any_of for any_of in traits.required if len(any_of) == 1]
    if plain:
        steps.append(("required_traits", _names(set().union(*plain), ","),
                      required(plain, "required_traits")))
    if traits.forbidden:
        steps.append(("forbidden_traits", ",".join(f"!{name}" for name in sorted(traits.forbidden)),
                      forbidden_traits))
    any_of = [any_of for any_of in traits.required if len(any_of) > 1]
    if any_of:
        steps.append(("any_of_traits", "&".join(f"in:{_names(names, ',')}" for names in any_of),
                      required(any_of, "any_of_traits")))
    if aggregates.required:
        steps.append(("member_of", "&".join(f"in:{_names(any_of, ',')}"
                                             for any_of in aggregates.required), in_aggregates))
    if aggregates.forbidden:
        steps.append(("member_of_forbidden", "!in:" + _names(aggregates.forbidden, ","),
                      not_in_aggregates))
    # in_tree does not choose the providers of a resourceless group
    if group.in_tree is not None and group.resources:
        steps.append(("in_tree", group.in_tree, in_tree))
    return steps


class _Funnel:
    """The steps of one group's funnel as they are applied, and the first
    verdict against each provider."""

    def __init__(self) -> None:
        self.steps: list[GroupStep] = []
        self.ruled_out: RuledOutBy = {}

    def apply(self, constraint: str, description: str, check: Check,
              entering: list[Provider]) -> tuple[list[Provider], RuledOutBy]:
        """The providers passing ``check``, and the reason against each other one."""
        left, failed, reasons = [], {}, {}
        for provider in entering:
            verdict = check(provider, False)
            if verdict is None:
                left.append(provider)
                continue
            failed[provider.id] = (verdict[0], check)
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
    spread = bool(group.resources) and not group.granular and world.spread_unsuffixed
    funnel = _Funnel()
    pool = [records[provider_id] for provider_id in sorted(records)]
    resource_steps = _resource_steps(group)
    if spread:
        # each class from the providers entering the resource steps; out of
        # the group only the providers able to give none of them
        able: set[int] = set()
        for inventory_step, capacity_step in zip(resource_steps[::2], resource_steps[1::2],
                                                 strict=True):
            class_pool = pool
            for constraint, description, check in (inventory_step, capacity_step):
                class_pool, _ = funnel.apply(constraint, description, check, class_pool)
            able.update(provider.id for provider in class_pool)

        def gives_no_class(provider: Provider, detailed: bool) -> Verdict:
            details = []
            for inventory_step, capacity_step in zip(resource_steps[::2], resource_steps[1::2],
                                                     strict=True):
                verdict = (inventory_step[2](provider, True)
                           or capacity_step[2](provider, True))
                if verdict is not None:
                    details.append(verdict[1])
            return "resources", "; ".join(details)

        funnel.rule_out({provider.id: ("resources", gives_no_class)
                         for provider in pool if provider.id not in able})
        pool = [provider for provider in pool if provider.id in able]
    else:
        for constraint, description, check in resource_steps:
            pool, failed = funnel.apply(constraint, description, check, pool)
            funnel.rule_out(failed)
    tree_traits: dict[int, frozenset[str]] = {}
    if spread:
        for provider in pool:
            tree_traits[provider.root_id] = tree_traits.get(
                provider.root_id, frozenset()) | provider.traits
    for constraint, description, check in _filter_steps(world, group, spread, tree_traits):
        pool, failed = funnel.apply(constraint, description, check, pool)
        funnel.rule_out(failed)
    return GroupFunnel(group.suffix, spread, funnel.steps), funnel.ruled_out


# Tree steps ------------------------------------------------------------------

def _results_by_anchor(world: World, results: list[search.Result]
                       ) -> dict[int, list[search.Result]]:
    """The results of each tree, those made with a provider of that tree
    (a result of sharing providers only could come from any tree they serve)."""
    by_anchor: dict[int, list[search.Result]] = {}
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

    def of_results(self, anchor: int, results: list[search.Result]) -> _TreeVerdict:
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
        for group in groups:
            candidates = search.group_candidates(world, group, anchor)
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


def _tree_steps(snapshot: Snapshot, world: World, groups: list[RequestGroup],
                options: SearchOptions, results: list[search.Result]
                ) -> tuple[list[TreeStep], dict[int, RuledOut]]:
    """The tree steps with the trees entering and leaving each, and root
    id -> the first one ruling the tree out. A tree with results passes
    every step; what the others make of them is kept like the search's
    results (see ``World.anchor_value``)."""
    with_results = _results_by_anchor(world, results)
    tree_steps = _TreeSteps(world, groups, options)
    anchors = sorted(world.anchor_ids())
    verdicts = {anchor: tree_steps.of_results(anchor, with_results[anchor])
                if anchor in with_results
                else world.anchor_value(anchor, "explanation", tree_steps.diagnose)
                for anchor in anchors}
    ruled_out: dict[int, RuledOut] = {
        root_id: RuledOut("reachable", "no inventory of a requested class in the tree or a "
                                       "sharing provider serving it, or outside member_of "
                                       "/ in_tree")
        for root_id in snapshot.trees if root_id not in verdicts}
    steps = [TreeStep("reachable", "a requested class in the tree or a sharing provider; "
                                   "member_of, in_tree", len(snapshot.trees), len(anchors))]
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

def _provider_explanation(uuid: str, snapshot: Snapshot, records: dict[int, Provider],
                          groups: list[RequestGroup], group_verdicts: list[RuledOutBy],
                          tree_verdicts: dict[int, RuledOut],
                          results: list[search.Result]) -> ProviderExplanation:
    provider_id = snapshot.ids_by_uuid.get(uuid)
    if provider_id is None:
        return ProviderExplanation(uuid, found=False)
    provider = snapshot.providers[provider_id]
    in_groups: dict[str, RuledOut | None] = {}
    for group, verdicts in zip(groups, group_verdicts, strict=True):
        verdict = verdicts.get(provider_id)
        if verdict is None:
            in_groups[group.suffix] = None
        else:
            reason, check = verdict
            detailed = check(records[provider_id], True)
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
    return ProviderExplanation(uuid, True, snapshot.providers[provider.root_id].uuid, ruled_out,
                               in_groups, used_in)
