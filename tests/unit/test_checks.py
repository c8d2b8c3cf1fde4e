"""The named checks of a request group (placement/candidates/checks.py):
the rules that look at the tree a provider serves, which only a spread
group has."""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st

from placement.candidates.checks import Check, TraitsCheck, group_checks
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.model import Provider, RequestGroup
from placement.objects.inventory import InventoryUsage

ROOT = Provider(1, "root", None, 1, aggregates=frozenset({"A"}), traits=frozenset({"T1"}))
CHILD = Provider(2, "child", 1, 1, {"VCPU": InventoryUsage(4, 0, 1, 4, 1, 1.0, 3)},
                 traits=frozenset({"T2"}))
# a sharing provider, root of its own tree, serving the tree of ROOT
SHARING = Provider(3, "sharing", None, 3, aggregates=frozenset({"B"}))


def check_named(group: RequestGroup, spread: bool, constraint: str) -> Check | TraitsCheck:
    checks = group_checks(group, spread, {"root": 1, "child": 1, "sharing": 3})
    return next(check for check in checks.filters if check.constraint == constraint)


def test_member_of_counts_the_root_only_for_a_spread_group_and_its_own_tree():
    group = RequestGroup("", {"VCPU": 1}, aggregates=AggregateFilter(required=[{"A"}]))
    single, spread = (check_named(group, spread, "member_of") for spread in (False, True))
    assert not single.passes(CHILD, ROOT)
    assert spread.passes(CHILD, ROOT)
    # a foreign sharing provider must be in the aggregates itself
    assert not spread.passes(SHARING, ROOT)
    assert spread.why(SHARING, ROOT, True) == ("member_of", "in none of A")


def test_forbidden_aggregate_of_the_root_rules_out_a_spread_group_only():
    group = RequestGroup("", {"VCPU": 1}, aggregates=AggregateFilter(forbidden={"A"}))
    single, spread = (check_named(group, spread, "member_of_forbidden")
                      for spread in (False, True))
    assert single.passes(CHILD, ROOT)
    assert not spread.passes(CHILD, ROOT)
    assert spread.why(CHILD, ROOT, True) == ("member_of_forbidden",
                                             "in the forbidden aggregates A")


def test_in_tree_keeps_a_sharing_provider_only_for_a_single_provider_group():
    group = RequestGroup("", {"VCPU": 1}, in_tree="sharing")
    single, spread = (check_named(group, spread, "in_tree") for spread in (False, True))
    # the sharing provider is in the named tree; spreading over the tree of
    # ROOT it is foreign there
    assert single.passes(SHARING, ROOT)
    assert not spread.passes(SHARING, ROOT)
    assert spread.passes(SHARING, SHARING)
    assert not single.passes(CHILD, ROOT)
    unknown = check_named(RequestGroup("", {"VCPU": 1}, in_tree="nowhere"), False, "in_tree")
    assert unknown.why(CHILD, ROOT, True) == ("in_tree", "no provider has that uuid")


def test_required_traits_of_a_spread_group_are_met_together():
    group = RequestGroup("", {"VCPU": 1}, traits=TraitFilter(required=[{"T1"}, {"T2"}]))
    single, spread = (check_named(group, spread, "required_traits") for spread in (False, True))
    assert isinstance(single, Check) and isinstance(spread, TraitsCheck)
    assert not single.passes(CHILD, ROOT)
    assert single.why(CHILD, ROOT, True) == ("required_traits", "lacks T1")
    assert spread.passes(ROOT.traits | CHILD.traits)
    assert not spread.passes(CHILD.traits)


def test_capacity_names_the_rule_broken():
    group = RequestGroup("", {"VCPU": 2})
    class_checks = group_checks(group, False, {}).resources[0]
    assert class_checks.inventory.passes(CHILD, ROOT)
    assert not class_checks.inventory.passes(ROOT, ROOT)
    assert not class_checks.capacity.passes(CHILD, ROOT)
    assert class_checks.capacity.why(CHILD, ROOT, True) == (
        "capacity", "VCPU: requested 2, free 1 of capacity 4 (used 3)")


NAMES = ("A", "B", "C", "D")


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(
    names_of=st.dictionaries(st.integers(1, 30), st.frozensets(st.sampled_from(NAMES))),
    required=st.lists(st.sets(st.sampled_from(NAMES), min_size=1), max_size=3),
    forbidden=st.sets(st.sampled_from(NAMES), max_size=2))
def test_members_among_are_those_a_filter_lets_through(names_of, required, forbidden):
    """The batch form of a filter (set operations on an index of names)
    keeps exactly the ids the filter's test of each passes."""
    members_of: dict[str, frozenset[int]] = {
        name: frozenset(provider_id for provider_id, names in names_of.items() if name in names)
        for name in NAMES}
    names_filter = TraitFilter(required=required, forbidden=forbidden)
    assert names_filter.members_among(set(names_of), members_of) == {
        provider_id for provider_id, names in names_of.items()
        if names_filter.satisfied_by(names)}
