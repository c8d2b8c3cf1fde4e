"""One shape counted: per root, how many more whole instances fit, and the
class that runs out first (see the package docstring for which trees are
counted exactly and which by simulated claims)."""

from __future__ import annotations

import dataclasses
import sys
from collections import defaultdict
from collections.abc import Sequence
from itertools import repeat

import sqlalchemy as sa

from placement.candidates import find
from placement.candidates.copy_world import CopyWorld, filter_key
from placement.candidates.groups import GroupSearch, group_search
from placement.candidates.memo import Key
from placement.candidates.model import RequestGroup, SearchOptions
from placement.candidates.provider_copy import ProviderCopy
from placement.capacity.simulate import SimulatedWorld
from placement.capacity.tables import class_table, free_slots
from placement.capacity.usages import Usages


@dataclasses.dataclass
class Counted:
    """One shape counted on one copy with one read of the usages."""

    copy: ProviderCopy
    # root id -> instances that still fit there
    roots: dict[int, int]
    # every root was counted exactly (else some are lower bounds)
    exact: bool
    # class name -> amount, every group's summed
    amounts: dict[str, int]
    # class name -> root id -> that class's slots (the roots counted exactly)
    class_slots: dict[str, dict[int, int]]
    # root id -> the class running out first (the roots simulated)
    simulated_binding: dict[int, str | None]

    @property
    def total(self) -> int:
        return sum(self.roots.values())

    def binding(self, root_id: int) -> str | None:
        """The class that runs out first at ``root_id`` (fewest slots)."""
        if root_id in self.simulated_binding:
            return self.simulated_binding[root_id]
        return min(self.class_slots, key=lambda name: self.class_slots[name].get(root_id, 0),
                   default=None)


def read_usages(connection: sa.engine.Connection) -> Usages:
    """The usages a count (or a scrape of several) reads, each class once,
    as the counts first ask for it (in ``connection``'s transaction)."""
    return Usages(connection)


def count(connection: sa.engine.Connection, groups: list[RequestGroup],
          options: SearchOptions, used: Usages | None = None,
          drained: frozenset[int] = frozenset()) -> Counted:
    """How many more instances of the shape (``groups``, ``options``) fit
    per root, the ``drained`` providers taken out; ``used``: the usages
    (None: read here, those of the shape's classes). Unknown classes or
    traits raise InvalidInput, as for the candidates."""
    copy, world, class_ids = find.prepare(connection, groups, options)
    if used is None:
        used = read_usages(connection)
    amounts: dict[str, int] = defaultdict(int)
    for group in groups:
        for class_name, amount in group.resources.items():
            amounts[class_name] += amount
    anchors = world.searched_anchors
    if drained:
        anchors = tuple(anchor for anchor in anchors if anchor not in drained)
    counted = Counted(copy, {}, True, dict(amounts), {}, {})
    simulated = set(anchors)
    if _single_group(groups, options):
        simulated = _exact_counts(counted, world, groups[0], class_ids, used, anchors, drained)
    if simulated:
        _simulate(counted, world, groups, options, class_ids, used, simulated, drained)
    return counted


def _single_group(groups: list[RequestGroup], options: SearchOptions) -> bool:
    return len(groups) == 1 and bool(groups[0].resources) and not options.same_subtree


def _exact_counts(counted: Counted, world: CopyWorld, group: RequestGroup,
                  class_ids: dict[str, int], used: Usages, anchors: tuple[int, ...],
                  drained: frozenset[int]) -> set[int]:
    """Count the roots of ``anchors`` from free slots; the roots left to
    simulate: those a sharing provider of a requested class serves (its
    slots are any of its trees'), and, for a spread group requiring
    traits, those whose holders have them only together."""
    copy = counted.copy
    plan = group_search(world, group)
    spread = plan.spread is not None
    checks = plan.spread if spread else plan.single
    passes = (plan.spread_passes if spread else plan.single_filters
              ) if checks.provider_filters else None
    key = (filter_key(group.traits), filter_key(group.aggregates), group.in_tree, spread)
    simulated = _coupled(copy, frozenset(class_ids.values())).intersection(anchors)
    tables = {name: class_table(copy, class_ids[name], key if passes else None, passes)
              for name in group.resources}
    if spread and checks.together:
        apart, lacking = _trees_by_traits(copy, plan, tables, (
            tuple(sorted(class_ids[name] for name in group.resources)), key))
        simulated |= apart.intersection(anchors)
    else:
        lacking = frozenset()
    wanted = ([anchor for anchor in anchors if anchor not in simulated] if simulated
              else anchors)
    for name, amount in group.resources.items():
        table = tables[name]
        class_id = class_ids[name]
        slots = free_slots(table, used.of(class_id), amount, drained,
                           used.room(class_id, table))
        if spread:
            counted.class_slots[name] = _root_sums(table.root_ids, slots, table.own_rows)
        else:
            counted.class_slots[name] = dict(zip(table.provider_ids, slots, strict=True))
    if spread:
        per_class = [map(sums.get, wanted, repeat(0)) for sums in counted.class_slots.values()]
        # (with a bound, min takes one class as well as several)
        counted.roots.update(zip(wanted, map(min, *per_class, repeat(sys.maxsize)),
                                 strict=False))
    else:
        _providers_totals(counted, wanted)
    for root_id in lacking.intersection(wanted):
        counted.roots[root_id] = 0
    return simulated


def _root_sums(root_ids: tuple[int, ...], slots: list[int], own_rows: int) -> dict[int, int]:
    """Root id -> the slots of its rows summed (the roots' own rows first:
    most trees are a root alone, taken at C speed)."""
    sums = dict(zip(root_ids[:own_rows], slots[:own_rows], strict=True))
    get = sums.get
    for root_id, free in zip(root_ids[own_rows:], slots[own_rows:], strict=True):
        sums[root_id] = get(root_id, 0) + free
    return sums


def _providers_totals(counted: Counted, wanted: Sequence[int]) -> None:
    """A group taking everything from one provider: each provider gives
    as many instances as its scarcest class allows, a root the sum of its
    tree's; ``class_slots`` become per root."""
    by_provider = list(counted.class_slots.values())
    trees = counted.copy.trees
    providers = counted.copy.providers
    for root_id in wanted:
        counted.roots[root_id] = sum(
            min(slots.get(provider_id, 0) for slots in by_provider)
            for provider_id in trees[root_id])
    for name, slots in counted.class_slots.items():
        sums: dict[int, int] = defaultdict(int)
        for provider_id, free in slots.items():
            sums[providers[provider_id].root_id] += free
        counted.class_slots[name] = dict(sums)


class _Coupled(Key[frozenset[int]]):
    # class_ids: frozenset[int]
    __slots__ = ()


def _coupled(copy: ProviderCopy, class_ids: frozenset[int]) -> frozenset[int]:
    """The roots a sharing provider with one of the classes serves."""
    return copy.memo.get_or_make(_Coupled(class_ids, copy.places), lambda: copy.sharing_reach(
        copy.sharing_with(class_ids)))


class _TraitsTogether(Key["tuple[frozenset[int], frozenset[int]]"]):
    # (class ids, filter key), places, traits_serial
    __slots__ = ()


def _trees_by_traits(copy: ProviderCopy, plan: GroupSearch, tables: dict, key: tuple
                     ) -> tuple[frozenset[int], frozenset[int]]:
    """A spread group's required traits are those of the providers it
    takes from together, more providers bringing more traits: a tree
    whose every holder has them alone counts as any other, one whose
    holders lack them even together has no candidate. The others
    (``apart``) are simulated. (apart, lacking)."""
    together = plan.spread.together

    def make() -> tuple[frozenset[int], frozenset[int]]:
        holders: dict[int, set[int]] = defaultdict(set)
        for table in tables.values():
            for provider_id, root_id in zip(table.provider_ids, table.root_ids, strict=True):
                holders[root_id].add(provider_id)
        apart, lacking = set(), set()
        for root_id, ids in holders.items():
            traits = [copy.providers[provider_id].traits for provider_id in ids]
            if all(check.passes(own) for own in traits for check in together):
                continue
            if all(check.passes(frozenset().union(*traits)) for check in together):
                apart.add(root_id)
            else:
                lacking.add(root_id)
        return frozenset(apart), frozenset(lacking)
    return copy.memo.get_or_make(
        _TraitsTogether(key, copy.places, copy.traits_serial), make)


def _simulate(counted: Counted, world: CopyWorld, groups: list[RequestGroup],
              options: SearchOptions, class_ids: dict[str, int], used: Usages,
              anchors: set[int], drained: frozenset[int]) -> None:
    """The ``anchors`` filled by simulated claims, in the search's order."""
    class_names = {class_id: name for name, class_id in class_ids.items()}
    simulated = SimulatedWorld(counted.copy, world, class_names, used.pairs(class_names),
                               anchors, drained)
    amounts = counted.amounts
    for anchor, claimed in simulated.fill(groups, options).items():
        counted.roots[anchor] = claimed
        counted.simulated_binding[anchor] = min(
            amounts, key=lambda name: simulated.free(anchor, name) // amounts[name],
            default=None)
    counted.exact = False
