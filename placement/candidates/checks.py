"""What a provider must pass to serve one request group, written once.

The search (``placement.candidates.search``) keeps the providers passing
every check of a group; the explanation (``placement.candidates.explain``)
applies the same checks one after the other, in the order listed here,
and counts what each lets through. A check is named after the constraint
an explanation reports (``inventory``, ``capacity``, ``required_traits``,
``forbidden_traits``, ``any_of_traits``, ``member_of``,
``member_of_forbidden``, ``in_tree``).

A provider is checked as it would serve one tree, given by that tree's
root: its own tree's, or, for a sharing provider, the tree of each anchor
it serves (there it is *foreign*). Only the unsuffixed group spreading
over a tree and its sharing providers (``spread``) looks at the root:

* it is in the wanted aggregates when the provider is, or, for a
  provider of the tree itself, when the tree's root is; neither the
  provider nor the root may be in a forbidden aggregate;
* with ``in_tree`` it takes nothing from a foreign provider;
* its required (and any-of) traits are met by the providers it takes
  from together: those checks (``TraitsCheck``) are asked of a set of
  traits, not of one provider.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.model import Provider, RequestGroup
from placement.objects.inventory import InventoryUsage

# What rules a provider out: (reason, detail). The reason is the
# constraint, or, for capacity, which part of it; the detail is written
# only when asked (the last argument): it is asked for named providers.
Why = tuple[str, str]


class Check(NamedTuple):
    constraint: str
    description: str  # what the request asks, as an explanation shows it
    # does the provider pass, serving the tree of the given root?
    passes: Callable[[Provider, Provider], bool]
    # why it does not (asked only of a provider that does not pass)
    why: Callable[[Provider, Provider, bool], Why]


class TraitsCheck(NamedTuple):
    """Required traits of a spread group, met by several providers together."""

    constraint: str
    description: str
    passes: Callable[[frozenset[str]], bool]
    why: Callable[[frozenset[str], bool], Why]


class ClassChecks(NamedTuple):
    """The two checks of one requested class: the provider has it, and
    the amount fits what is left of it."""

    class_name: str
    amount: int
    inventory: Check
    capacity: Check


class GroupChecks(NamedTuple):
    """Every check of one group, in the order an explanation applies them."""

    spread: bool
    resources: list[ClassChecks]
    filters: list[Check | TraitsCheck]
    # the filters split by what they are asked of: one provider at a time,
    # or (a spread group's required traits) the providers it takes from
    # together
    provider_filters: tuple[Check, ...]
    together: tuple[TraitsCheck, ...]
    # do the provider filters of a foreign provider look at the root
    # (spreading, with forbidden aggregates or in_tree)? If not, a
    # sharing provider passes them at every tree it serves or at none
    foreign_sees_root: bool


def group_checks(group: RequestGroup, spread: bool,
                 tree_roots_by_uuid: dict[str, int]) -> GroupChecks:
    """The checks of ``group``, spreading over a tree or not (see the
    module's docstring); ``tree_roots_by_uuid``: provider uuid -> the root
    of its tree, for ``in_tree``."""
    resources = [_class_checks(class_name, amount)
                 for class_name, amount in group.resources.items()]
    filters = [*_trait_checks(group.traits, spread), *_aggregate_checks(group.aggregates, spread)]
    # in_tree does not choose the providers of a resourceless group
    if group.in_tree is not None and group.resources:
        filters.append(_in_tree_check(group.in_tree, tree_roots_by_uuid.get(group.in_tree),
                                      spread))
    foreign_sees_root = spread and bool(
        group.aggregates.forbidden or (group.in_tree is not None and group.resources))
    return GroupChecks(spread, resources, filters,
                       tuple(check for check in filters if isinstance(check, Check)),
                       tuple(check for check in filters if isinstance(check, TraitsCheck)),
                       foreign_sees_root)


def fits_every_class(inventories: dict[str, InventoryUsage],
                     amounts: tuple[tuple[str, int], ...]) -> bool:
    """Does a provider with these ``inventories`` have each (class,
    amount) of ``amounts``: the class, and room for the amount (the
    ``inventory`` and ``capacity`` checks of each class, in one call)?"""
    for class_name, amount in amounts:
        inventory = inventories.get(class_name)
        if inventory is None or not inventory.fits(amount):
            return False
    return True


def _names(names: set[str] | frozenset[str], separator: str = ", ") -> str:
    return separator.join(sorted(names))


def _class_checks(class_name: str, amount: int) -> ClassChecks:
    def has_inventory(provider: Provider, root: Provider) -> bool:
        return class_name in provider.inventories

    def no_inventory(provider: Provider, root: Provider, detailed: bool) -> Why:
        return "inventory", f"no {class_name} inventory" if detailed else ""

    def fits(provider: Provider, root: Provider) -> bool:
        return provider.inventories[class_name].fits(amount)

    def misfit(provider: Provider, root: Provider, detailed: bool) -> Why:
        inventory = provider.inventories[class_name]
        reason = inventory.misfit(amount) or ""
        if not detailed:
            return reason, ""
        if reason == "capacity":
            free = max(0, inventory.capacity - inventory.used)
            return reason, (f"{class_name}: requested {amount}, free {free} of capacity "
                            f"{inventory.capacity} (used {inventory.used})")
        return reason, f"{class_name}: requested {amount}, {reason} {getattr(inventory, reason)}"

    return ClassChecks(class_name, amount,
                       Check("inventory", class_name, has_inventory, no_inventory),
                       Check("capacity", f"{class_name}: {amount}", fits, misfit))


def _trait_checks(traits: TraitFilter, spread: bool) -> list[Check | TraitsCheck]:
    checks: list[Check | TraitsCheck] = []
    plain = [any_of for any_of in traits.required if len(any_of) == 1]
    if plain:
        checks.append(_required_traits_check("required_traits",
                                             _names(set().union(*plain), ","), plain, spread))
    if traits.forbidden:
        forbidden = frozenset(traits.forbidden)

        def clear(provider: Provider, root: Provider) -> bool:
            return forbidden.isdisjoint(provider.traits)

        def present(provider: Provider, root: Provider, detailed: bool) -> Why:
            return "forbidden_traits", (f"has {_names(forbidden & provider.traits)}"
                                        if detailed else "")

        checks.append(Check("forbidden_traits",
                            ",".join(f"!{name}" for name in sorted(forbidden)), clear, present))
    any_ofs = [any_of for any_of in traits.required if len(any_of) > 1]
    if any_ofs:
        checks.append(_required_traits_check(
            "any_of_traits", "&".join(f"in:{_names(names, ',')}" for names in any_ofs),
            any_ofs, spread))
    return checks


def _required_traits_check(constraint: str, description: str, any_ofs: list[set[str]],
                           spread: bool) -> Check | TraitsCheck:
    wanted = TraitFilter(required=any_ofs)

    def missing(offered: frozenset[str], detailed: bool) -> Why:
        if not detailed:
            return constraint, ""
        return constraint, "lacks " + "; ".join(
            f"one of {_names(any_of)}" if len(any_of) > 1 else _names(any_of)
            for any_of in any_ofs if any_of.isdisjoint(offered))

    if spread:
        return TraitsCheck(constraint, description, wanted.satisfied_by, missing)
    return Check(constraint, description,
                 lambda provider, root: wanted.satisfied_by(provider.traits),
                 lambda provider, root, detailed: missing(provider.traits, detailed))


def _aggregate_checks(aggregates: AggregateFilter, spread: bool) -> list[Check]:
    checks = []
    if aggregates.required:
        member_of = AggregateFilter(required=aggregates.required)

        def in_aggregates(provider: Provider, root: Provider) -> bool:
            return member_of.satisfied_by(provider.aggregates) or (
                spread and provider.root_id == root.id
                and member_of.satisfied_by(root.aggregates))

        def outside(provider: Provider, root: Provider, detailed: bool) -> Why:
            return "member_of", ("in none of " + "; ".join(
                _names(any_of) for any_of in aggregates.required
                if any_of.isdisjoint(provider.aggregates)) if detailed else "")

        checks.append(Check("member_of", "&".join(f"in:{_names(any_of, ',')}"
                                                  for any_of in aggregates.required),
                            in_aggregates, outside))
    if aggregates.forbidden:
        forbidden = frozenset(aggregates.forbidden)

        def present_in(provider: Provider, root: Provider) -> frozenset[str]:
            return forbidden & provider.aggregates or (
                forbidden & root.aggregates if spread else frozenset())

        def clear(provider: Provider, root: Provider) -> bool:
            return not present_in(provider, root)

        def inside(provider: Provider, root: Provider, detailed: bool) -> Why:
            return "member_of_forbidden", (
                f"in the forbidden aggregates {_names(present_in(provider, root))}"
                if detailed else "")

        checks.append(Check("member_of_forbidden", "!in:" + _names(forbidden, ","),
                            clear, inside))
    return checks


def _in_tree_check(in_tree: str, tree_root: int | None, spread: bool) -> Check:
    def in_the_tree(provider: Provider, root: Provider) -> bool:
        # a spread group takes nothing from a sharing provider serving
        # another tree; a single provider may be one (it serves every
        # tree it shares with)
        return provider.root_id == tree_root and (not spread or root.id == tree_root)

    def elsewhere(provider: Provider, root: Provider, detailed: bool) -> Why:
        return "in_tree", ("in another tree" if tree_root is not None
                           else "no provider has that uuid")

    return Check("in_tree", in_tree, in_the_tree, elsewhere)
