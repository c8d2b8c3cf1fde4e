"""The in-memory candidate search: ordering, stopping and sampling options
(the property test compares the full sets, these check what it leaves out)."""

from __future__ import annotations

import collections

from placement.candidates.filters import TraitFilter
from placement.candidates.model import (
    OneProviderResult,
    Provider,
    RequestGroup,
    Result,
    SearchOptions,
    SpreadResult,
)
from placement.candidates.search import search
from placement.candidates.world import World, world_of
from placement.objects.inventory import InventoryUsage


def vcpu(total: int) -> dict[str, InventoryUsage]:
    return {"VCPU": InventoryUsage(total, 0, 1, total, 1, 1.0, 0)}


def two_flat_providers_with_two_children_each() -> World:
    """Roots 1 and 4, each with two children holding 1 VCPU."""
    providers = [
        Provider(1, "r1", None, 1), Provider(2, "c2", 1, 1, vcpu(1)),
        Provider(3, "c3", 1, 1, vcpu(1)),
        Provider(4, "r4", None, 4), Provider(5, "c5", 4, 4, vcpu(1)),
        Provider(6, "c6", 4, 4, vcpu(1)),
    ]
    return world_of(providers, {}, True, {})


GROUPS = [RequestGroup("1", {"VCPU": 1}), RequestGroup("2", {"VCPU": 1})]


def roots_of(world: World, results) -> list[int]:
    return [world.providers[next(iter(r.mappings["1"]))].root_id for r in results]


def test_trees_take_turns_whatever_the_strategy():
    """The first result of every tree, then the second...: a limit spreads
    the answer over as many trees as it can."""
    world = two_flat_providers_with_two_children_each()
    for breadth_first in (False, True):
        options = SearchOptions(group_policy="isolate", breadth_first=breadth_first)
        assert roots_of(world, search(world, GROUPS, options)) == [1, 4, 1, 4]


def test_the_strategy_chooses_what_max_candidates_generates():
    """depth-first exhausts one tree before the next, breadth-first takes
    the trees in turn, until max_allocation_candidates results exist."""
    world = two_flat_providers_with_two_children_each()
    depth_first = SearchOptions(group_policy="isolate", max_candidates=2)
    assert roots_of(world, search(world, GROUPS, depth_first)) == [1, 1]
    breadth_first = SearchOptions(group_policy="isolate", max_candidates=2, breadth_first=True)
    assert roots_of(world, search(world, GROUPS, breadth_first)) == [1, 4]


def wide_trees(roots: int, children: int) -> World:
    """``roots`` roots without inventory, each with ``children`` children
    holding 1 VCPU."""
    providers = []
    for root in range(roots):
        root_id = 100 * (root + 1)
        providers.append(Provider(root_id, f"r{root_id}", None, root_id))
        providers += [Provider(root_id + child, f"c{root_id + child}", root_id, root_id, vcpu(1))
                      for child in range(1, children + 1)]
    return world_of(providers, {}, True, {})


def test_a_limit_covers_every_tree_that_fits():
    """A limit below the number of results takes from every tree before
    taking a second result of any."""
    world = wide_trees(20, 8)
    groups = [RequestGroup(str(index), {"VCPU": 1}) for index in range(1, 5)]
    results = search(world, groups, SearchOptions(group_policy="isolate", limit=1000))
    assert len(results) == 1000
    per_root = collections.Counter(roots_of(world, results))
    assert len(per_root) == 20
    assert set(per_root.values()) == {50}


def test_a_randomized_limit_of_one_draws_any_candidate():
    """Randomized, a limit of one samples the candidates, not the trees:
    every child of every tree comes up, not only each tree's first."""
    world = wide_trees(3, 4)
    drawn = {next(iter(search(world, [RequestGroup("1", {"VCPU": 1})], SearchOptions(
        limit=1, randomize=True))[0].mappings["1"])) for _ in range(300)}
    assert drawn == {provider_id for provider_id, provider in world.providers.items()
                     if provider.parent_id is not None}


def test_limit_and_max_candidates_stop_the_search():
    world = two_flat_providers_with_two_children_each()
    assert len(search(world, GROUPS, SearchOptions(group_policy="isolate", limit=3))) == 3
    assert len(search(world, GROUPS, SearchOptions(group_policy="isolate",
                                                   max_candidates=2, limit=3))) == 2


def test_randomized_sample_keeps_limit_distinct_results():
    world = two_flat_providers_with_two_children_each()
    every = {r.key() for r in search(world, GROUPS, SearchOptions(group_policy="isolate"))}
    for _ in range(10):
        sample = search(world, GROUPS, SearchOptions(group_policy="isolate", limit=3,
                                                     randomize=True))
        keys = [r.key() for r in sample]
        assert len(keys) == 3
        assert len(set(keys)) == 3
        assert set(keys) <= every
    shuffled = search(world, GROUPS, SearchOptions(group_policy="isolate", randomize=True))
    assert {r.key() for r in shuffled} == every


def test_randomized_search_starts_at_random_trees():
    """A randomized search takes the trees in a random order: a limit of one
    does not always give the first tree's first result."""
    world = two_flat_providers_with_two_children_each()
    roots = {roots_of(world, search(world, GROUPS, SearchOptions(
        group_policy="isolate", limit=1, randomize=True)))[0] for _ in range(50)}
    assert roots == {1, 4}


def test_shared_provider_reached_from_two_trees_counted_once():
    disk = {"DISK_GB": InventoryUsage(100, 0, 1, 100, 1, 1.0, 0)}
    providers = [Provider(1, "cn1", None, 1, vcpu(4)), Provider(2, "cn2", None, 2, vcpu(4)),
                 Provider(3, "ss", None, 3, disk)]
    world = world_of(providers, {3: {1, 2, 3}}, False, {})
    results = search(world, [RequestGroup("", {"DISK_GB": 10})], SearchOptions())
    assert [r.allocations for r in results] == [((3, "DISK_GB", 10),)]
    both = search(world, [RequestGroup("", {"DISK_GB": 10, "VCPU": 1})], SearchOptions())
    assert sorted(sorted(r.allocations) for r in both) == [
        [(1, "VCPU", 1), (3, "DISK_GB", 10)], [(2, "VCPU", 1), (3, "DISK_GB", 10)]]


def test_max_candidates_counts_results_dropped_below_1_29():
    """Section 4: max_allocation_candidates (step 8) counts results before
    the pre-1.29 rule (step 9) drops those using two providers of a tree."""
    world = two_flat_providers_with_two_children_each()
    world = world_of([*world.providers.values(), Provider(7, "flat7", None, 7, vcpu(2))],
                     {}, True, {})
    options = {"group_policy": "none", "nested_aware": False}
    # depth-first: roots 1 and 4 give two results each (two children), root 7 one
    assert search(world, GROUPS, SearchOptions(**options, max_candidates=4)) == []
    kept = search(world, GROUPS, SearchOptions(**options, max_candidates=5))
    assert [r.allocations for r in kept] == [((7, "VCPU", 2),)]
    assert len(search(world, GROUPS, SearchOptions(**options))) == 1


def test_alike_groups_share_candidates_but_not_unlike_ones():
    """resources1 and resources2 asking the same reuse one candidate list;
    a group differing only by its traits does not."""
    world = two_flat_providers_with_two_children_each()
    world.providers[3].traits = frozenset({"CUSTOM_FAST"})
    world.providers[6].traits = frozenset({"CUSTOM_FAST"})
    results = search(world, GROUPS, SearchOptions(group_policy="isolate"))
    assert [(set(r.mappings["1"]), set(r.mappings["2"])) for r in results] == [
        ({2}, {3}), ({5}, {6}), ({3}, {2}), ({6}, {5})]
    fast = [GROUPS[0], RequestGroup("2", {"VCPU": 1}, TraitFilter(required=[{"CUSTOM_FAST"}]))]
    results = search(world, fast, SearchOptions(group_policy="isolate"))
    assert [(set(r.mappings["1"]), set(r.mappings["2"])) for r in results] == [
        ({2}, {3}), ({5}, {6})]


def test_one_provider_result_is_the_result_it_stands_for():
    resources = (("DISK_GB", 10), ("VCPU", 2))
    short = OneProviderResult(7, resources, "_a")
    full = Result(((7, "DISK_GB", 10), (7, "VCPU", 2)), {"_a": frozenset({7})})
    assert (short.allocations, short.mappings) == (full.allocations, full.mappings)
    assert short.key() == full.key()
    assert set(short.giving()) == set(full.giving()) == {7}


def test_spread_result_is_the_result_it_stands_for():
    resources = (("DISK_GB", 10), ("MEMORY_MB", 512), ("VCPU", 2))
    short = SpreadResult((9, 7, 7), resources, "")
    full = Result(((9, "DISK_GB", 10), (7, "MEMORY_MB", 512), (7, "VCPU", 2)),
                  {"": frozenset({7, 9})})
    assert (short.allocations, short.mappings) == (full.allocations, full.mappings)
    assert short.key() == full.key()
    assert set(short.giving()) == set(full.giving()) == {7, 9}


def test_a_tree_and_each_sharing_disk_serving_it_after_its_root():
    """The later turns of a request of one group give each tree with each
    sharing disk serving it, in the order the trees took their first."""
    disk = {"DISK_GB": InventoryUsage(100, 0, 1, 100, 1, 1.0, 0)}
    computes = [Provider(root, f"cn{root}", None, root, {**vcpu(4), **disk})
                for root in (1, 2)]
    disks = [Provider(sharing, f"ss{sharing}", None, sharing, disk) for sharing in (5, 6)]
    world = world_of([*computes, *disks], {5: {1, 2, 5}, 6: {1, 2, 6}}, False, {})
    group = RequestGroup("", {"DISK_GB": 10, "VCPU": 1})
    results = search(world, [group], SearchOptions(limit=100))
    assert [sorted(r.allocations) for r in results] == [
        [(1, "DISK_GB", 10), (1, "VCPU", 1)], [(2, "DISK_GB", 10), (2, "VCPU", 1)],
        [(1, "VCPU", 1), (5, "DISK_GB", 10)], [(2, "VCPU", 1), (5, "DISK_GB", 10)],
        [(1, "VCPU", 1), (6, "DISK_GB", 10)], [(2, "VCPU", 1), (6, "DISK_GB", 10)]]
    assert {type(result) for result in results[2:]} == {SpreadResult}
