"""``World``: the providers one search reads, its anchors and their
members (the providers of a tree and the sharing providers serving it).
A world with everything at hand (``world_of``) serves the tests and the
brute-force models; ``placement.candidates.copy_world`` loads one from the
provider copy as the search goes."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator
from operator import attrgetter

from placement.candidates.checks import fits_every_class
from placement.candidates.model import Provider, RequestGroup


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
                      ) -> set[int]:
        """The anchors of ``batch`` whose root alone has room for each
        (class, amount): ``fits_every_class`` of each root, which a world
        keeping its roots' capacities may answer for a whole batch at once."""
        providers = self.providers
        return {anchor for anchor in batch
                if fits_every_class(providers[anchor].inventories, amounts)}

    def roots_passing(self, roots: set[int], group: RequestGroup,
                      passes: Callable[[Provider, Provider], bool]) -> set[int]:
        """The anchors of ``roots`` whose root passes ``passes``: the
        provider filters of ``group`` (traits, aggregates, in_tree) asked of
        the root taking everything. A world with indexes of its providers'
        traits and aggregates may answer for them all at once."""
        providers = self.providers
        return {anchor for anchor in roots if passes(providers[anchor], providers[anchor])}

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
