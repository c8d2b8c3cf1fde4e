"""Property test: the allocation-candidate search (database loading, pruned
depth-first combination) finds exactly the candidates that a brute-force
reading of allocation-candidates.md sections 2-4 finds, on random small
provider worlds and requests."""

from __future__ import annotations

import dataclasses
import itertools
import os

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement.candidates import find
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.model import RequestGroup, SearchOptions
from placement.db import tables
from tests.db import FreshDatabase
from tests.fixtures.candidates import ProviderWriter

pytestmark = pytest.mark.slow

CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
TRAITS = ("CUSTOM_A", "CUSTOM_B")
SHARING = "MISC_SHARES_VIA_AGGREGATE"
AGGREGATES = ("X", "Y")


# The random world -----------------------------------------------------------

@dataclasses.dataclass
class Inventory:
    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    used: int

    def fits(self, amount: int) -> bool:
        return (self.used + amount <= (self.total - self.reserved) * self.allocation_ratio
                and self.min_unit <= amount <= self.max_unit
                and amount % self.step_size == 0)


@dataclasses.dataclass
class Provider:
    name: str
    parent: str | None
    inventories: dict[str, Inventory]
    traits: set[str]
    aggregates: set[str]


def mostly(usual, *others):
    """A strategy giving ``usual`` about four times in five, else one of
    ``others`` (so that most random requests have some answer)."""
    return st.sampled_from([usual] * 4 + list(others))


@st.composite
def inventories(draw) -> Inventory:
    total = draw(st.integers(1, 6))
    reserved = draw(mostly(0, 1)) if total > 1 else 0
    min_unit = draw(mostly(1, 2))
    max_unit = draw(mostly(max(min_unit, total), min_unit))
    return Inventory(total, reserved, min_unit, max_unit, draw(mostly(1, 2)),
                     draw(mostly(1.0, 1.5, 2.0)), draw(mostly(0, 1, 2)))


@st.composite
def worlds(draw) -> list[Provider]:
    providers = []
    for index in range(draw(st.integers(2, 7))):
        parent = None
        if providers and draw(st.booleans()):
            parent = draw(st.sampled_from([p.name for p in providers]))
        classes = draw(st.sets(st.sampled_from(CLASSES), min_size=1, max_size=2))
        traits = draw(st.sets(st.sampled_from(TRAITS)))
        if draw(st.integers(0, 6)) == 0:
            traits.add(SHARING)
        providers.append(Provider(
            f"P{index}", parent, {name: draw(inventories()) for name in sorted(classes)},
            traits, draw(st.sets(st.sampled_from(AGGREGATES)))))
    return providers


def trait_filters(min_required: int = 0):
    return st.builds(
        lambda required, forbidden: TraitFilter([{t} for t in sorted(required)],
                                                forbidden - required),
        st.sets(st.sampled_from(TRAITS), min_size=min_required, max_size=2),
        st.sets(st.sampled_from(TRAITS), max_size=1))


aggregate_filters = st.builds(
    lambda required, forbidden: AggregateFilter([required] if required else [], forbidden),
    st.sets(st.sampled_from(AGGREGATES), max_size=2),
    st.sets(st.sampled_from(AGGREGATES), max_size=1))


@st.composite
def requests(draw) -> tuple[list[RequestGroup], SearchOptions]:
    suffixes = draw(st.lists(st.sampled_from(["", "1", "2", "3"]), min_size=1, max_size=3,
                             unique=True))
    groups = []
    for suffix in suffixes:
        resources = draw(st.dictionaries(st.sampled_from(CLASSES), mostly(1, 2),
                                         min_size=1, max_size=draw(mostly(1, 2))))
        traits = draw(st.one_of(st.just(TraitFilter()), trait_filters()))
        aggregates = draw(st.one_of(st.just(AggregateFilter()), aggregate_filters))
        groups.append(RequestGroup(suffix, resources, traits, aggregates))
    # sometimes a resourceless granular group, tied by same_subtree
    same_subtree = []
    if draw(st.booleans()):
        groups.append(RequestGroup("_R", {}, draw(trait_filters(min_required=1))))
        granular = [g.suffix for g in groups[:-1] if g.suffix]
        others = draw(st.lists(st.sampled_from(granular), unique=True, max_size=2)
                      ) if granular else []
        same_subtree.append(["_R", *others])
    elif draw(st.booleans()):
        granular = [g.suffix for g in groups if g.suffix]
        if len(granular) >= 2:
            same_subtree.append(granular[:2])
    options = SearchOptions(
        group_policy=draw(st.sampled_from(["none", "isolate"])),
        root_traits=draw(st.one_of(st.just(TraitFilter()), trait_filters())),
        same_subtree=same_subtree,
        nested_aware=draw(st.booleans()),
    )
    return groups, options


@st.composite
def served_worlds(draw) -> list[Provider]:
    """Roots without children served by four to six sharing providers: the
    search takes what a set of sharing providers gives a tree from the set,
    worked out once (``World.member_parts``), and a tree whose root alone
    gives everything its later candidates from the root and the set at
    once; ``worlds`` rarely draws several sharing providers serving one
    tree."""
    providers = []
    for index in range(draw(st.integers(1, 3))):
        classes = draw(st.sets(st.sampled_from(CLASSES), min_size=1, max_size=3))
        providers.append(Provider(
            f"P{index}", None, {name: draw(inventories()) for name in sorted(classes)},
            draw(st.sets(st.sampled_from(TRAITS))),
            draw(st.sets(st.sampled_from(AGGREGATES), min_size=1))))
    for index in range(len(providers), len(providers) + draw(st.integers(4, 6))):
        classes = draw(st.sets(st.sampled_from(CLASSES), min_size=1, max_size=2))
        providers.append(Provider(
            f"P{index}", None, {name: draw(inventories()) for name in sorted(classes)},
            draw(st.sets(st.sampled_from(TRAITS))) | {SHARING},
            {draw(mostly(*AGGREGATES))}))
    return providers


@st.composite
def lone_requests(draw) -> tuple[list[RequestGroup], SearchOptions]:
    """One unsuffixed group (a flavor), with or without trait and aggregate
    filters."""
    resources = draw(st.dictionaries(st.sampled_from(CLASSES), mostly(1, 2),
                                     min_size=1, max_size=3))
    group = RequestGroup("", resources,
                         draw(st.one_of(st.just(TraitFilter()), trait_filters())),
                         draw(st.one_of(st.just(AggregateFilter()), aggregate_filters)))
    return [group], SearchOptions(nested_aware=draw(st.booleans()))


# The reference: brute force over the spec -------------------------------------

class Reference:
    def __init__(self, providers: list[Provider]):
        self.by_name = {p.name: p for p in providers}
        self.has_nesting = any(p.parent for p in providers)
        self.sharing = [p.name for p in providers if SHARING in p.traits]

    def root(self, name: str) -> str:
        while self.by_name[name].parent:
            name = self.by_name[name].parent
        return name

    def is_ancestor_or_self(self, ancestor: str, name: str | None) -> bool:
        while name is not None:
            if name == ancestor:
                return True
            name = self.by_name[name].parent
        return False

    def anchors(self, name: str) -> set[str]:
        """Roots a provider's resources can serve: its own, plus for a
        sharing provider the roots of trees with a provider in one of its
        aggregates."""
        anchors = {self.root(name)}
        if name in self.sharing:
            aggregates = self.by_name[name].aggregates
            anchors |= {self.root(p.name) for p in self.by_name.values()
                        if p.aggregates & aggregates}
        return anchors

    def root_ok(self, root: str, options: SearchOptions) -> bool:
        return options.root_traits.satisfied_by(self.by_name[root].traits)

    def group_candidates(self, group: RequestGroup, options: SearchOptions
                         ) -> list[tuple[str, frozenset, frozenset]]:
        """(anchor, frozenset of (provider, class, amount), mapped providers)."""
        names = list(self.by_name)
        found = []
        if not group.resources:
            if not (group.traits or group.aggregates):
                return []
            for name in names:
                provider = self.by_name[name]
                if (group.traits.satisfied_by(provider.traits)
                        and group.aggregates.satisfied_by(provider.aggregates)):
                    found += [(anchor, frozenset(), frozenset([name]))
                              for anchor in self.anchors(name) if self.root_ok(anchor, options)]
            return found
        classes = sorted(group.resources)
        if group.suffix == "" and (self.has_nesting or self.sharing):
            positive = AggregateFilter(required=group.aggregates.required)
            for anchor in {self.root(name) for name in names}:
                if not self.root_ok(anchor, options):
                    continue
                root = self.by_name[anchor]
                for choice in itertools.product(names, repeat=len(classes)):
                    ok = True
                    for name, class_name in zip(choice, classes, strict=True):
                        provider = self.by_name[name]
                        inventory = provider.inventories.get(class_name)
                        own_tree = self.root(name) == anchor
                        shared = (name in self.sharing and anchor in self.anchors(name)
                                  and positive.satisfied_by(provider.aggregates))
                        ok = ok and (inventory is not None
                                     and inventory.fits(group.resources[class_name])
                                     and (own_tree or shared)
                                     and (positive.satisfied_by(provider.aggregates)
                                          or positive.satisfied_by(root.aggregates))
                                     and not (group.aggregates.forbidden
                                              & (provider.aggregates | root.aggregates))
                                     and not (group.traits.forbidden & provider.traits))
                    traits = set().union(*(self.by_name[n].traits for n in choice))
                    if ok and group.traits.satisfied_by(traits):
                        found.append((anchor, frozenset(
                            (name, class_name, group.resources[class_name])
                            for name, class_name in zip(choice, classes, strict=True)),
                            frozenset(choice)))
            return found
        for name in names:
            provider = self.by_name[name]
            if all(c in provider.inventories and provider.inventories[c].fits(a)
                   for c, a in group.resources.items()) \
                    and group.traits.satisfied_by(provider.traits) \
                    and group.aggregates.satisfied_by(provider.aggregates):
                allocations = frozenset((name, c, a) for c, a in group.resources.items())
                found += [(anchor, allocations, frozenset([name]))
                          for anchor in self.anchors(name) if self.root_ok(anchor, options)]
        return found

    def results(self, groups: list[RequestGroup], options: SearchOptions) -> set:
        per_group = [self.group_candidates(group, options) for group in groups]
        found = set()
        for choice in itertools.product(*per_group):
            if len({anchor for anchor, _, _ in choice}) != 1:
                continue
            if options.group_policy == "isolate":
                mapped = [next(iter(mapped)) for group, (_, _, mapped)
                          in zip(groups, choice, strict=True) if group.suffix]
                if len(set(mapped)) != len(mapped):
                    continue
            mappings = {group.suffix: mapped
                        for group, (_, _, mapped) in zip(groups, choice, strict=True)}
            if not all(self.same_subtree(set().union(*(mappings[s] for s in suffixes)))
                       for suffixes in options.same_subtree):
                continue
            totals: dict[tuple[str, str], int] = {}
            for _, allocations, _ in choice:
                for name, class_name, amount in allocations:
                    totals[(name, class_name)] = totals.get((name, class_name), 0) + amount
            if not all(self.fits_total(name, class_name, amount)
                       for (name, class_name), amount in totals.items()):
                continue
            givers = {name for name, _ in totals}
            if not options.nested_aware and self.has_nesting and \
                    len({self.root(name) for name in givers}) != len(givers):
                continue
            found.add((frozenset(totals.items()), frozenset(mappings.items())))
        return found

    def same_subtree(self, providers: set[str]) -> bool:
        return len(providers) <= 1 or any(
            all(self.is_ancestor_or_self(top, other) for other in providers)
            for top in providers)

    def fits_total(self, name: str, class_name: str, amount: int) -> bool:
        inventory = self.by_name[name].inventories[class_name]
        capacity = int((inventory.total - inventory.reserved) * inventory.allocation_ratio)
        return inventory.used + amount <= capacity and amount <= inventory.max_unit


# The comparison ---------------------------------------------------------------

def write_world(providers: list[Provider], database: FreshDatabase) -> None:
    with database.db.writer() as connection:
        writer = ProviderWriter(connection)
        # custom traits exist whether or not a provider has them
        connection.execute(sa.insert(tables.traits), [{"name": name} for name in TRAITS])
        for provider in providers:
            writer.provider(provider.name, provider.parent, traits=tuple(sorted(provider.traits)),
                            aggregates=tuple(sorted(provider.aggregates)))
            for class_name, inventory in provider.inventories.items():
                writer.inventory(provider.name, class_name, inventory.total, inventory.reserved,
                                 inventory.min_unit, inventory.max_unit, inventory.step_size,
                                 inventory.allocation_ratio)
                if inventory.used:
                    writer.allocation(provider.name, class_name, inventory.used)


def with_aggregate_uuids(groups: list[RequestGroup]) -> list[RequestGroup]:
    """The groups with aggregate names replaced by the uuids written."""
    def uuid_of(name: str) -> str:
        # an aggregate no provider is in is unknown: any uuid will do
        return os.environ.get(f"AGG_{name}_UUID", f"00000000-0000-0000-0000-00000000000{name}")

    return [dataclasses.replace(group, aggregates=AggregateFilter(
        [{uuid_of(a) for a in any_of} for any_of in group.aggregates.required],
        {uuid_of(a) for a in group.aggregates.forbidden})) for group in groups]


def fast_results(providers: list[Provider], groups: list[RequestGroup],
                 options: SearchOptions) -> set:
    database = FreshDatabase()
    try:
        for name in AGGREGATES:
            os.environ.pop(f"AGG_{name}_UUID", None)
        write_world(providers, database)
        with database.db.reader() as connection:
            candidates = find.find(
                connection, with_aggregate_uuids(groups), options, summarize_all_classes=True)
    finally:
        database.close()
    name_of = {os.environ[f"{p.name}_UUID"]: p.name for p in providers}
    return {
        (frozenset(((name_of[uuid], class_name), amount)
                   for uuid, resources in request.allocations.items()
                   for class_name, amount in resources.items()),
         frozenset((suffix, frozenset(name_of[uuid] for uuid in uuids))
                   for suffix, uuids in request.mappings.items()))
        for request in candidates.allocation_requests
    }


def assert_matches_brute_force(providers: list[Provider],
                               request: tuple[list[RequestGroup], SearchOptions]) -> None:
    groups, options = request
    expected = Reference(providers).results(groups, options)
    assert fast_results(providers, groups, options) == expected


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds(), requests())
def test_search_matches_brute_force(providers, request):
    assert_matches_brute_force(providers, request)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(served_worlds(), lone_requests())
def test_search_of_trees_served_by_sets_matches_brute_force(providers, request):
    assert_matches_brute_force(providers, request)


def test_reference_finds_worked_example_e3():
    """The reference itself agrees with the spec's nested example."""
    providers = [
        Provider("R", None, {}, set(), set()),
        Provider("N0", "R", {"VCPU": Inventory(4, 0, 1, 4, 1, 1.0, 0)}, set(), set()),
        Provider("N1", "R", {"VCPU": Inventory(4, 0, 1, 4, 1, 1.0, 0)}, set(), set()),
    ]
    groups = [RequestGroup("1", {"VCPU": 1}), RequestGroup("2", {"VCPU": 1})]
    isolate = SearchOptions(group_policy="isolate")
    assert len(Reference(providers).results(groups, isolate)) == 2
    assert len(Reference(providers).results(groups, SearchOptions(group_policy="none"))) == 4
    assert fast_results(providers, groups, isolate) == Reference(providers).results(
        groups, isolate)
