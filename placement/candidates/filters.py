"""Trait and aggregate filters: what a provider must and must not have.

Plain data built by ``placement.query`` from the query string and used by
the candidate search (and by the ``GET /resource_providers`` handler,
which turns them into ``ProviderFilters``) to select providers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass
class _RequiredForbidden:
    """Names (trait names or aggregate uuids) a provider must and must not
    have: ``required`` is an AND of OR-sets (for each set the provider has
    at least one of its names), ``forbidden`` the names it may have none of.
    """

    required: list[set[str]] = dataclasses.field(default_factory=list)
    forbidden: set[str] = dataclasses.field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.required or self.forbidden)

    def names(self) -> set[str]:
        """Every name, required or forbidden."""
        return set().union(*self.required, self.forbidden)

    def satisfied_by(self, names: set[str] | frozenset[str]) -> bool:
        """True when a provider with ``names`` passes this filter."""
        # a loop, not all(): the candidate search asks this of every
        # provider it looks at
        for any_of in self.required:
            if any_of.isdisjoint(names):
                return False
        return self.forbidden.isdisjoint(names)

    def members_among(self, among: set[int], members_of: Mapping[str, frozenset[int]]
                      ) -> set[int]:
        """Those of ``among`` (ids) passing ``satisfied_by``, from
        ``members_of`` (name -> the ids having it): for a batch of providers
        at once, by set operations at C speed instead of a test of each."""
        passing = among
        for any_of in self.required:
            passing = set().union(*[passing.intersection(members_of.get(name, ()))
                                    for name in any_of])
        for name in self.forbidden:
            passing = passing.difference(members_of.get(name, ()))
        return passing


@dataclasses.dataclass
class TraitFilter(_RequiredForbidden):
    """Traits a provider must have and must not have.

    ``required`` is an AND of OR-sets: for each set the provider has at least
    one of its traits (a plain ``required=A,B`` gives ``[{A}, {B}]``).
    """


@dataclasses.dataclass
class AggregateFilter(_RequiredForbidden):
    """Aggregates a provider must and must not be associated with.

    ``required`` is an AND of OR-sets of aggregate uuids (one set per
    positive ``member_of`` occurrence); ``forbidden`` unions every
    ``!``-occurrence.
    """
