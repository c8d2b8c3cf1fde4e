"""The provider copy: a per-process copy of what providers are (trees,
inventories, traits, aggregates) and the indexes the allocation-candidate
search starts from.

These change rarely and the search reads them for thousands of providers,
so each process keeps them, and at each request asks the database what
changed since (``placement.db.provider_changes``, followed by
``placement.candidates.follower``): one sum when nothing did, the changed
providers' rows when some did. A request's work on the copy follows what
changed, not how many providers exist.

What is not kept here, because it changes with every claim: usages.
Callers read those per request, for the providers they look at.

A ``ProviderCopy`` is never modified once made: requests of other threads
may be reading it. A refresh makes a new one that shares every unchanged
record; the containers it changes are copied, which costs microseconds per
thousand providers, and only when something changed.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TypeVar

import os_traits

from placement.candidates.kept import KeptStore
from placement.candidates.memo import Key, Memo, V
from placement.objects.inventory import InventoryUsage

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE


@dataclasses.dataclass(frozen=True, slots=True)
class CachedProvider:
    id: int
    uuid: str
    parent_id: int | None
    root_id: int
    # resource class id -> the inventory, with ``used`` 0 (usages are per request)
    inventories: dict[int, InventoryUsage]
    # trait names in trait id order (the order provider summaries list them)
    trait_names: tuple[str, ...]
    traits: frozenset[str]
    aggregates: frozenset[str]  # uuids
    # what readers derive from this provider alone: it lives as long as
    # this record (until the provider changes)
    memo: Memo = dataclasses.field(default_factory=lambda: Memo(_PROVIDER_ENTRIES),
                                   compare=False, repr=False)

    @property
    def sharing(self) -> bool:
        return SHARING_TRAIT in self.traits


def _same_place(old: CachedProvider | None, new: CachedProvider | None) -> bool:
    """Does ``new`` sit in every index of a copy exactly where ``old``
    does (only inventory amounts or other traits changed)?"""
    return (old is not None and new is not None and old.uuid == new.uuid
            and old.parent_id == new.parent_id and old.root_id == new.root_id
            and old.inventories.keys() == new.inventories.keys()
            and old.aggregates == new.aggregates and old.sharing == new.sharing)


# Entries of a ProviderCopy's and of a CachedProvider's memo, made by requests
# as they need them (a bound on the memory of unusual requests; the common
# ones are few).
_COPY_ENTRIES = 64
_PROVIDER_ENTRIES = 8

def _intersection(reaches: list[frozenset[int] | list[frozenset[int]]]) -> frozenset[int]:
    """The roots in every reach of ``reaches``: a set, or a list of sets
    of which a root must be in one. An intersection costs the size of its
    smaller set, and the reaches are kept sets of up to every root: the
    sets are intersected smallest first, then each list's sets with what
    is left, whose union is never built whole."""
    sets = sorted([reach[0] if isinstance(reach, list) else reach for reach in reaches
                   if not isinstance(reach, list) or len(reach) == 1], key=len)
    roots = frozenset.intersection(*sets)
    for any_of in reaches:
        if isinstance(any_of, list) and len(any_of) > 1:
            roots = frozenset().union(*[roots.intersection(reach) for reach in any_of])
    return roots


class _Reach:
    """The roots a request's classes and traits reach (``roots``), and the
    part of each aggregate's reach within them, made when first asked:
    requests of one flavor differ mostly by their member_of, among the
    cloud's aggregates, and intersecting an aggregate's roots with a
    reach of most of the cloud is most of what narrowing costs. What is
    kept of the aggregates stays within the size of ``roots``."""

    __slots__ = ("roots", "_within", "_kept_size")

    def __init__(self, roots: frozenset[int]):
        self.roots = roots
        self._within: dict[str, frozenset[int]] = {}
        self._kept_size = 0

    def within(self, aggregate_uuid: str, reach_of: Callable[[str], frozenset[int]]
               ) -> frozenset[int]:
        """The roots of ``reach_of(aggregate_uuid)`` within ``roots``."""
        within = self._within.get(aggregate_uuid)
        if within is None:
            within = self.roots.intersection(reach_of(aggregate_uuid))
            if self._kept_size + len(within) <= len(self.roots):
                self._kept_size += len(within)
                self._within[aggregate_uuid] = within
        return within

    def within_any(self, aggregate_uuids: frozenset[str],
                   reach_of: Callable[[str], frozenset[int]]) -> frozenset[int]:
        """The roots within ``roots`` that any of ``aggregate_uuids``
        reaches: a single aggregate's kept set as it is, not copied."""
        if len(aggregate_uuids) == 1:
            return self.within(next(iter(aggregate_uuids)), reach_of)
        return frozenset().union(*[self.within(aggregate_uuid, reach_of)
                                   for aggregate_uuid in aggregate_uuids])


# The entries of a copy's memo: each is made from the indexes alone.

class _AggregateRoots(Key[frozenset[int]]):
    # aggregate_uuid: str
    __slots__ = ()


class _AggregateReach(Key[frozenset[int]]):
    # aggregate_uuid: str
    __slots__ = ()


class _SharingByAggregate(Key[dict[str, frozenset[int]]]):
    __slots__ = ()


class _Anchors(Key[tuple[int, ...]]):
    # class_sets: tuple[tuple[int, frozenset[str]], ...]
    # aggregate_sets: tuple[frozenset[str], ...]
    # tree_roots: frozenset[int]
    # trait_sets: tuple[frozenset[str], ...]
    # root_traits: tuple[tuple[frozenset[str], ...], frozenset[str]]
    # any_class: bool
    # traits_serial: int (only when trait_sets, root_traits or class_sets
    #   name traits)
    __slots__ = ()


class _ClassesReach(Key[_Reach]):
    # class_sets: tuple[tuple[int, frozenset[str]], ...]
    # any_class: bool
    # trait_sets: tuple[frozenset[str], ...]
    # traits_serial: int | None (None when no trait is named)
    __slots__ = ()


class _TraitReach(Key[frozenset[int]]):
    # trait: str
    # traits_serial: int
    __slots__ = ()


class _SharingWith(Key[frozenset[int]]):
    # class_ids: frozenset[int]
    __slots__ = ()


class _ClassReach(Key[frozenset[int]]):
    # class_id: int
    # forbidden_traits: frozenset[str]
    # traits_serial: int | None (None when no trait is forbidden)
    __slots__ = ()


@dataclasses.dataclass(frozen=True)
class ProviderCopy:
    """Every provider at one moment, with the indexes the search needs."""

    providers: dict[int, CachedProvider]
    # root id -> the providers of its tree, in id order
    trees: dict[int, tuple[int, ...]]
    ids_by_uuid: dict[str, int]
    # providers that have a parent
    nested_count: int
    # root id -> the classes some provider of the tree has an inventory of
    tree_classes: dict[int, frozenset[int]]
    # class id -> roots of the trees with an inventory of it
    holder_roots: dict[int, frozenset[int]]
    # class id -> the providers with an inventory of it
    class_members: dict[int, frozenset[int]]
    # aggregate uuid -> the providers in it
    aggregate_members: dict[str, frozenset[int]]
    # trait name -> the providers that have it
    trait_members: dict[str, frozenset[int]]
    # the providers sharing their inventories with their aggregates
    sharing: frozenset[int]
    # moves on whenever the indexes above change (a provider came, went or
    # moved, or its classes or aggregates changed): what readers derive
    # from the indexes for one provider stays valid while it stays the same
    places: int
    # moves on whenever ``trait_members`` changes, which does not move
    # ``places`` (a trait is no place in a tree): what is derived from the
    # trait index is kept under it
    traits_serial: int
    # what requests keep for later ones (shared by every copy of the cache)
    kept: KeptStore
    # this copy's own number, never given to another: what a request
    # keeps from a copy's whole contents names it
    serial: int
    # what requests derive from the indexes above (made at most once per
    # copy, dropped when the indexes change)
    memo: Memo = dataclasses.field(default_factory=lambda: Memo(_COPY_ENTRIES),
                                   compare=False, repr=False)
    # the anchors of the requests' shapes, kept apart from ``memo``: every
    # new shape makes one, and they must not crowd out what they are made of
    anchor_memo: Memo = dataclasses.field(default_factory=lambda: Memo(_COPY_ENTRIES),
                                          compare=False, repr=False)

    @property
    def has_nesting(self) -> bool:
        return self.nested_count > 0

    def remember(self, provider: CachedProvider, key: Key[V], value: V, size: int) -> V:
        """Put ``value`` in the provider's memo, counting ``size`` against
        what the kept store bounds (KeptStore.count_memo) unless it replaces
        a value of the same key."""
        if key not in provider.memo:
            self.kept.count_memo(size)
        return provider.memo.put(key, value)

    # -- sharing providers

    def aggregate_roots(self, aggregate_uuid: str) -> frozenset[int]:
        """The roots of the trees with a provider in the aggregate."""
        return self.memo.get_or_make(_AggregateRoots(aggregate_uuid), lambda: frozenset(
            self.providers[provider_id].root_id
            for provider_id in self.aggregate_members.get(aggregate_uuid, ())))

    def sharing_reach(self, sharing_ids: Iterable[int]) -> frozenset[int]:
        """The roots of the trees the sharing providers share with: their
        own, and those with a provider in one of their aggregates. Each
        aggregate is taken once: hundreds of sharing providers may share a
        handful of aggregates of thousands of trees each."""
        roots = set()
        aggregates: set[str] = set()
        for sharing_id in sharing_ids:
            provider = self.providers[sharing_id]
            roots.add(provider.root_id)
            aggregates.update(provider.aggregates)
        return frozenset(roots).union(*(self.aggregate_roots(uuid) for uuid in aggregates))

    def _sharing_by_aggregate(self) -> dict[str, frozenset[int]]:
        def make() -> dict[str, frozenset[int]]:
            by_aggregate: dict[str, set[int]] = defaultdict(set)
            for sharing_id in self.sharing:
                for uuid in self.providers[sharing_id].aggregates:
                    by_aggregate[uuid].add(sharing_id)
            return {uuid: frozenset(ids) for uuid, ids in by_aggregate.items()}
        return self.memo.get_or_make(_SharingByAggregate(), make)

    def sharing_serving(self, root_id: int) -> set[int]:
        """The sharing providers that share with the tree of ``root_id``
        (the ones in the tree included)."""
        by_aggregate = self._sharing_by_aggregate()
        serving = set()
        for provider_id in self.trees[root_id]:
            provider = self.providers[provider_id]
            if provider_id in self.sharing:
                serving.add(provider_id)
            for uuid in provider.aggregates:
                serving.update(by_aggregate.get(uuid, ()))
        return serving

    # -- where the search starts

    def anchors(self, class_sets: Iterable[tuple[int, frozenset[str]]],
                aggregate_sets: Iterable[frozenset[str]], tree_roots: Collection[int],
                trait_sets: Iterable[frozenset[str]] = (),
                root_traits: tuple[Iterable[frozenset[str]], Collection[str]] = ((), ()),
                any_class: bool = False) -> tuple[int, ...]:
        """The roots of the trees that reach every (class, forbidden
        traits) of ``class_sets`` (a provider of the tree, or a sharing
        provider serving it, with an inventory of the class and none of the
        traits), every set of ``aggregate_sets`` (the tree, or a sharing
        provider serving it, in one of the set's aggregates), every tree of
        ``tree_roots`` (the tree itself, or one a sharing provider of that
        tree shares with) and every set of ``trait_sets`` (a provider of
        the tree, or a sharing provider serving it, with one of the set's
        traits); and whose root has one trait of every set of
        ``root_traits[0]`` and none of ``root_traits[1]``; in id order.
        Each is necessary for a tree to have a candidate: these indexes
        narrow the trees a search visits, instead of the search testing
        each tree. With ``any_class``, the trees reaching one of the
        classes of ``class_sets`` instead of every one."""
        class_sets = tuple(class_sets)
        aggregate_sets = tuple(aggregate_sets)
        tree_roots = frozenset(tree_roots)
        trait_sets = tuple(trait_sets)
        root_required, root_forbidden = tuple(root_traits[0]), frozenset(root_traits[1])
        # what the trait index decides (traits required of the tree or its
        # root, forbidden to it or to a class's providers) is kept under
        # its serial
        names_traits = bool(trait_sets or root_required or root_forbidden
                            or any(forbidden for _, forbidden in class_sets))

        def make() -> tuple[int, ...]:
            if not class_sets:
                return ()
            reach = self._classes_reach(class_sets, any_class, trait_sets)
            # each a set of roots, or a list of sets of which a root is in
            # one; the roots each set of aggregates reaches within the
            # classes' reach, if any, are within it already
            reaches: list[frozenset[int] | list[frozenset[int]]] = [
                reach.within_any(aggregate_uuids, self._aggregate_reach)
                for aggregate_uuids in aggregate_sets] or [reach.roots]
            reaches += [self._tree_reach(root_id) for root_id in tree_roots]
            reaches += [[self.trait_members.get(name, frozenset()) for name in traits]
                        for traits in root_required]
            roots = _intersection(reaches)
            for name in root_forbidden:
                roots = roots - self.trait_members.get(name, frozenset())
            return tuple(sorted(roots))
        return self.anchor_memo.get_or_make(
            _Anchors(class_sets, aggregate_sets, tree_roots, trait_sets,
                     (root_required, root_forbidden), any_class,
                     self.traits_serial if names_traits else None), make)

    def _classes_reach(self, class_sets: tuple[tuple[int, frozenset[str]], ...],
                       any_class: bool, trait_sets: tuple[frozenset[str], ...] = ()) -> _Reach:
        """The roots every (with ``any_class``: one) ``_class_reach`` of
        ``class_sets`` reaches, and that reach one trait of each set of
        ``trait_sets`` (``_trait_reach``), kept: requests of one flavor and
        traits, whatever their other filters, all start from it (a cloud
        asks few of those, and intersecting sets of every root is most of
        what narrowing a request's trees costs)."""
        def make() -> _Reach:
            reaches = sorted((self._class_reach(class_id, forbidden)
                              for class_id, forbidden in class_sets), key=len)
            roots = (frozenset().union(*reaches) if any_class
                     else reaches[0].intersection(*reaches[1:]))
            return _Reach(_intersection([roots, *([self._trait_reach(name) for name in traits]
                                                  for traits in trait_sets)]))
        names_traits = bool(trait_sets) or any(forbidden for _, forbidden in class_sets)
        return self.memo.get_or_make(_ClassesReach(
            class_sets, any_class, trait_sets, self.traits_serial if names_traits else None),
            make)

    def _class_reach(self, class_id: int, forbidden: frozenset[str]) -> frozenset[int]:
        """Roots of trees with a provider that has an inventory of the
        class and none of the ``forbidden`` traits, or served by a sharing
        provider that does."""
        def make() -> frozenset[int]:
            holders = self.class_members.get(class_id, frozenset())
            for name in forbidden:
                holders = holders - self.trait_members.get(name, frozenset())
            return self.sharing_reach(holders & self.sharing).union(
                self.providers[provider_id].root_id for provider_id in holders)
        return self.memo.get_or_make(
            _ClassReach(class_id, forbidden, self.traits_serial if forbidden else None), make)

    def _trait_reach(self, trait: str) -> frozenset[int]:
        """Roots of trees with a provider that has ``trait``, or served by
        a sharing provider that has it."""
        def make() -> frozenset[int]:
            members = self.trait_members.get(trait, frozenset())
            return self.sharing_reach(members & self.sharing).union(
                self.providers[provider_id].root_id for provider_id in members)
        return self.memo.get_or_make(_TraitReach(trait, self.traits_serial), make)

    def sharing_with(self, class_ids: frozenset[int]) -> frozenset[int]:
        """The sharing providers with an inventory of one of the classes."""
        return self.memo.get_or_make(_SharingWith(class_ids), lambda: frozenset(
            sharing_id for sharing_id in self.sharing
            if not class_ids.isdisjoint(self.providers[sharing_id].inventories)))

    def _aggregate_reach(self, aggregate_uuid: str) -> frozenset[int]:
        """Roots of trees with a provider in the aggregate, or served by a
        sharing provider in it: a group requiring it has no candidate
        elsewhere, whichever provider (or root) must be in it."""
        def make() -> frozenset[int]:
            sharing_in = self._sharing_by_aggregate().get(aggregate_uuid, ())
            return self.sharing_reach(sharing_in) | self.aggregate_roots(aggregate_uuid)
        return self.memo.get_or_make(_AggregateReach(aggregate_uuid), make)

    def _tree_reach(self, root_id: int) -> frozenset[int]:
        """The tree of ``root_id`` and the trees its sharing providers
        share with: where the providers of a group in that tree can be
        anchored."""
        return frozenset([root_id]) | self.sharing_reach(
            provider_id for provider_id in self.trees.get(root_id, ())
            if provider_id in self.sharing)

    # -- changes

    def updated(self, loaded: dict[int, CachedProvider], gone: Collection[int]) -> ProviderCopy:
        """This copy with the ``loaded`` providers put in (new or
        replacing their old record) and the ``gone`` ones taken out."""
        providers = {**self.providers, **loaded}
        for provider_id in gone:
            providers.pop(provider_id, None)
        if all(_same_place(self.providers.get(provider_id), provider)
               for provider_id, provider in loaded.items()) and not any(
                provider_id in self.providers for provider_id in gone):
            # the usual change (an inventory total, a trait): every index
            # holds but the traits'
            trait_members = _regrouped(
                self.trait_members, [self.providers[provider_id] for provider_id in loaded],
                loaded.values(), _traits_of)
            traits_serial = (self.traits_serial if trait_members is self.trait_members
                             else next(_serials))
            return dataclasses.replace(self, providers=providers, serial=next(_serials),
                                       memo=self.memo, anchor_memo=self.anchor_memo,
                                       trait_members=trait_members,
                                       traits_serial=traits_serial)
        return _Reindexing(self, providers, [*loaded, *gone]).copy()


_serials = itertools.count(1)
EMPTY = ProviderCopy({}, {}, {}, 0, {}, {}, {}, {}, {}, frozenset(), 0, 0, KeptStore(0), 0)


def _traits_of(provider: CachedProvider) -> frozenset[str]:
    return provider.traits


def _classes_of(provider: CachedProvider) -> Collection[int]:
    return provider.inventories.keys()


def _aggregates_of(provider: CachedProvider) -> frozenset[str]:
    return provider.aggregates


Name = TypeVar("Name", str, int)


def _regrouped(members: dict[Name, frozenset[int]], before: Iterable[CachedProvider],
               after: Iterable[CachedProvider],
               names_of: Callable[[CachedProvider], Collection[Name]]
               ) -> dict[Name, frozenset[int]]:
    """``members`` (name -> the providers having it: a trait, an
    aggregate, a class) after the providers ``before`` became ``after``
    (gone or new ones in one list only); ``members`` itself when nothing
    moved."""
    gained: dict[Name, set[int]] = defaultdict(set)
    lost: dict[Name, set[int]] = defaultdict(set)
    for provider in before:
        for name in names_of(provider):
            lost[name].add(provider.id)
    for provider in after:
        for name in names_of(provider):
            if provider.id in lost.get(name, ()):
                lost[name].discard(provider.id)
            else:
                gained[name].add(provider.id)
    changed = [name for name in gained.keys() | lost.keys() if gained[name] or lost[name]]
    if not changed:
        return members
    members = dict(members)
    for name in changed:
        members[name] = members.get(name, frozenset()).difference(lost[name]).union(gained[name])
        if not members[name]:
            del members[name]
    return members


class _Reindexing:
    """The indexes of a copy after some providers changed place: only
    the trees, classes and aggregates those providers were or are in are
    looked at again."""

    def __init__(self, old: ProviderCopy, providers: dict[int, CachedProvider],
                 changed: Iterable[int]):
        self.old = old
        self.providers = providers
        self.before = [old.providers[p] for p in changed if p in old.providers]
        self.after = [providers[p] for p in changed if p in providers]

    def copy(self) -> ProviderCopy:
        trees, tree_classes, holder_roots = self._trees()
        ids_by_uuid = dict(self.old.ids_by_uuid)
        for provider in self.before:
            del ids_by_uuid[provider.uuid]
        for provider in self.after:
            ids_by_uuid[provider.uuid] = provider.id
        nested_count = (self.old.nested_count
                        - sum(provider.parent_id is not None for provider in self.before)
                        + sum(provider.parent_id is not None for provider in self.after))
        sharing = (self.old.sharing.difference(provider.id for provider in self.before)
                   .union(provider.id for provider in self.after if provider.sharing))
        trait_members = _regrouped(self.old.trait_members, self.before, self.after,
                                   _traits_of)
        return ProviderCopy(self.providers, trees, ids_by_uuid, nested_count, tree_classes,
                        holder_roots,
                        _regrouped(self.old.class_members, self.before, self.after,
                                   _classes_of),
                        _regrouped(self.old.aggregate_members, self.before, self.after,
                                   _aggregates_of),
                        trait_members, sharing, self.old.places + 1,
                        next(_serials), self.old.kept, next(_serials))

    def _trees(self) -> tuple[dict, dict, dict]:
        old = self.old
        removed = {provider.id for provider in self.before}
        added: dict[int, list[int]] = defaultdict(list)
        for provider in self.after:
            added[provider.root_id].append(provider.id)
        roots = {provider.root_id for provider in self.before} | added.keys()
        trees = dict(old.trees)
        tree_classes = dict(old.tree_classes)
        gained: dict[int, set[int]] = defaultdict(set)  # class id -> roots
        lost: dict[int, set[int]] = defaultdict(set)
        for root_id in roots:
            members = sorted({*(p for p in old.trees.get(root_id, ()) if p not in removed),
                              *added.get(root_id, ())})
            classes = frozenset().union(
                *(self.providers[p].inventories.keys() for p in members))
            before = old.tree_classes.get(root_id, frozenset())
            for class_id in classes - before:
                gained[class_id].add(root_id)
            for class_id in before - classes:
                lost[class_id].add(root_id)
            if members:
                trees[root_id] = tuple(members)
                tree_classes[root_id] = classes
            else:
                trees.pop(root_id, None)
                tree_classes.pop(root_id, None)
        holder_roots = dict(old.holder_roots)
        for class_id in gained.keys() | lost.keys():
            holder_roots[class_id] = (holder_roots.get(class_id, frozenset())
                                      .difference(lost[class_id]).union(gained[class_id]))
            if not holder_roots[class_id]:
                del holder_roots[class_id]
        return trees, tree_classes, holder_roots


def random_order(items: tuple[int, ...]) -> Iterator[int]:
    """``items`` in a random order, drawn as they are consumed (a partial
    Fisher-Yates shuffle: taking k of n items costs k draws)."""
    pool = list(items)
    for index in range(len(pool)):
        pick = random.randrange(index, len(pool))
        pool[index], pool[pick] = pool[pick], pool[index]
        yield pool[index]


