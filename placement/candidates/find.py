"""Allocation candidates: which sets of providers could satisfy a request now.

``find`` validates the names of the request, takes the providers from this
process's copy (``placement.candidates.snapshot``, brought up to date
with the database's changes at each request), reads the usages of the
providers it looks at (long id lists are sent in chunks), runs the
in-memory search of ``placement.candidates.search`` and describes
the providers involved. It never writes.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import NamedTuple

import sqlalchemy as sa

from placement import exceptions, metrics
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.memo import Key, Memo, V
from placement.candidates.search import (
    Provider,
    RequestGroup,
    Result,
    SearchOptions,
    World,
    search,
)
from placement.candidates.snapshot import (
    CachedProvider,
    Snapshot,
    random_order,
    usages,
)
from placement.candidates.snapshot import snapshot as current_snapshot
from placement.objects import resource_class, trait
from placement.objects.inventory import InventoryUsage

__all__ = ["AllocationRequest", "Candidates", "Prepared", "ProviderSummary", "RequestGroup",
           "SearchOptions", "SnapshotWorld", "find", "kept_bytes", "prepare"]


# Allocation requests and provider summaries are never changed once made:
# one may serve several requests, while its tree (or provider) and their
# usages stay the same. ``rendered`` keeps what the API makes of it.


@dataclasses.dataclass(slots=True)
class AllocationRequest:
    # provider uuid -> {resource class: amount}
    allocations: dict[str, dict[str, int]]
    # group suffix -> uuids of the providers that satisfied it
    mappings: dict[str, list[str]]
    rendered: Memo = dataclasses.field(default_factory=Memo, compare=False, repr=False)


@dataclasses.dataclass(slots=True)
class ResourceSummary:
    capacity: int
    used: int


@dataclasses.dataclass(slots=True)
class ProviderSummary:
    uuid: str
    parent_provider_uuid: str | None
    root_provider_uuid: str
    resources: dict[str, ResourceSummary]
    traits: list[str]
    rendered: Memo = dataclasses.field(default_factory=Memo, compare=False, repr=False)


@dataclasses.dataclass(slots=True)
class Candidates:
    allocation_requests: list[AllocationRequest]
    provider_summaries: list[ProviderSummary]
    # a kept answer is given to several requests (see _KeptAnswer)
    rendered: Memo = dataclasses.field(default_factory=Memo, compare=False, repr=False)


class Prepared(NamedTuple):
    """What a search of the provider snapshot for one request starts from."""

    snapshot: Snapshot
    world: SnapshotWorld
    # requested class name -> id
    class_ids: dict[str, int]


def prepare(connection: sa.engine.Connection, groups: list[RequestGroup],
            options: SearchOptions) -> Prepared:
    """The snapshot and the world to search for ``groups`` (resources keyed
    by class name). Unknown classes or traits raise InvalidInput."""
    # in request order, so that the first unknown name is the one reported
    requested_classes = list(dict.fromkeys(
        name for group in groups for name in group.resources))
    try:
        class_ids = resource_class.ids_from_names(connection, requested_classes)
    except exceptions.NotFound as error:
        raise exceptions.InvalidInput(
            f"Invalid resource class in resources parameter: {error}") from None
    trait_names = [name for traits in [*(group.traits for group in groups), options.root_traits]
                   for name in sorted(traits.names())]
    try:
        trait.ids_from_names(connection, trait_names)
    except exceptions.NotFound as error:
        raise exceptions.InvalidInput(str(error)) from None
    snapshot = current_snapshot(connection)
    world = SnapshotWorld(connection, snapshot, groups, options, class_ids)
    return Prepared(snapshot, world, class_ids)


def find(connection: sa.engine.Connection, groups: list[RequestGroup],
         options: SearchOptions, summarize_all_classes: bool) -> Candidates:
    """The allocation candidates for ``groups`` (resources keyed by class
    name). Unknown classes or traits raise InvalidInput. Summaries list every
    class a provider has when ``summarize_all_classes``, else only the
    requested ones."""
    snapshot, world, class_ids = prepare(connection, groups, options)
    # A random order makes every answer new: nothing to keep.
    key = None if options.randomize else _Answer(
        world.shape, options.limit, options.max_candidates, options.breadth_first,
        summarize_all_classes)
    kept = None if key is None else snapshot.kept.get(key)
    if kept is not None and kept.serial == snapshot.serial and world.reads_again(kept.reads):
        metrics.count_kept_answer("allocation_candidates", "given")
        return kept.candidates
    metrics.count_kept_answer("allocation_candidates", "none" if kept is None else "stale")
    results = search(world, groups, options)
    world.keep_empty_run()
    summaries = _summaries(connection, snapshot, world, results, options.nested_aware,
                           None if summarize_all_classes else set(class_ids))
    candidates = Candidates([_allocation_request(world, result) for result in results],
                            summaries)
    if key is not None:
        snapshot.kept.put(key, _KeptAnswer(snapshot.serial, world.reads, candidates),
                          _answer_bytes(world.reads, candidates))
    return candidates


def _allocation_request(world: World, result: Result) -> AllocationRequest:
    """The request of ``result``, made once per result (results are kept
    between searches)."""
    request = result.memo.get(_REQUEST_OF_RESULT)
    if request is None:
        request = result.memo.put(_REQUEST_OF_RESULT, _new_allocation_request(world, result))
    return request


def _new_allocation_request(world: World, result: Result) -> AllocationRequest:
    providers = world.providers
    allocations: dict[str, dict[str, int]] = {}
    for provider_id, class_name, amount in result.allocations:
        uuid = providers[provider_id].uuid
        if uuid in allocations:
            allocations[uuid][class_name] = amount
        else:
            allocations[uuid] = {class_name: amount}
    mappings = {suffix: [providers[provider_id].uuid for provider_id in sorted(provider_ids)]
                for suffix, provider_ids in result.mappings.items()}
    return AllocationRequest(allocations, mappings)


# Loading -----------------------------------------------------------------

def _with_usage(inventory_usage: InventoryUsage, used: int) -> InventoryUsage:
    # the snapshot's records are shared between requests: never changed in place
    return dataclasses.replace(inventory_usage, used=used) if used else inventory_usage


# The fewest anchors a batch loads (see SnapshotWorld.anchors).
_SMALLEST_BATCH = 8

# What is kept with a cached provider (its search records, one per set of
# requested classes seen; its summaries; a root's members): a bound on the
# memory of unusual requests.
def _filter_key(names: TraitFilter | AggregateFilter) -> tuple:
    return (tuple(sorted(tuple(sorted(any_of)) for any_of in names.required)),
            tuple(sorted(names.forbidden)))


def _request_key(groups: list[RequestGroup], options: SearchOptions) -> tuple:
    """What the results at one anchor depend on, besides its members: the
    groups in order and the options that act within a tree."""
    return (tuple((group.suffix, tuple(group.resources.items()), _filter_key(group.traits),
                   _filter_key(group.aggregates), group.in_tree) for group in groups),
            options.group_policy, _filter_key(options.root_traits),
            tuple(tuple(suffixes) for suffixes in options.same_subtree),
            options.nested_aware, options.max_candidates > 0)


# What find keeps: in a provider record's memo (made from the record and
# the request's classes), in a result's memo, and in the kept store (made
# from a root's members and the shape of the request, see SnapshotWorld).

class _SearchRecord(Key[Provider]):
    """The search record of a provider none of the requested classes of
    which is used."""
    # classes: tuple[tuple[int, str], ...] ((id, name) of the requested classes)
    __slots__ = ()


class _Members(Key["tuple[int, tuple[int, ...]]"]):
    """The members of a root (``_members_of``), with the ``places`` of the
    snapshot they were found in."""
    # class_ids: frozenset[int] | None (None: whole trees are searched)
    __slots__ = ()


class _Summary(Key["tuple[tuple[int, ...], ProviderSummary]"]):
    """A provider's summary, with the usages it was made with."""
    # only_classes: frozenset[str] | None (None: every class)
    __slots__ = ()


class _RequestOfResult(Key[AllocationRequest]):
    """The allocation request a result makes."""
    __slots__ = ()


_REQUEST_OF_RESULT = _RequestOfResult()


class _ResultsAt(Key["_KeptResults"]):
    """The results at a root for requests of one shape."""
    # anchor: int
    # shape: tuple
    __slots__ = ()


class _ValueAt(Key["_KeptAt"]):
    """What a caller (``kind``) finds at a root for requests of one shape."""
    # anchor: int
    # kind: str
    # shape: tuple
    __slots__ = ()


class _Lazy(dict):
    """A dict making each missing value with ``make(key)`` when first asked;
    ``make`` is a method of the dict's owner. The dict holds its owner
    weakly: a world holding its own lazy dicts would be a reference cycle,
    freed only by the garbage collector's rare full collections (see
    deploy.GC_THRESHOLDS), and a world holds a request's usages and
    records: megabytes at 20 000 computes."""

    __slots__ = ("_owner", "_make")

    def __init__(self, make: Callable[[int], object]):
        super().__init__()
        self._owner = weakref.ref(make.__self__)  # type: ignore[attr-defined]
        self._make = make.__func__  # type: ignore[attr-defined]

    def __missing__(self, key: int) -> object:
        value = self[key] = self._make(self._owner(), key)
        return value


class _KeptAt:
    """Something found at a root and the members it was found with (their
    records and usages): it holds while they are the same."""

    __slots__ = ("members", "usages", "value")

    def __init__(self, members: tuple[CachedProvider, ...], usages: tuple,
                 value: object = None):
        self.members = members
        # (provider, class, used) of the members with usages
        self.usages = usages
        self.value = value

    def valid_for(self, members: tuple[CachedProvider, ...], usages: tuple) -> bool:
        # the records are compared by identity first (a provider changed is
        # a new record), by value only when it changed
        return usages == self.usages and members == self.members


class _KeptResults(_KeptAt):
    """The results found at a root, as far as a search took them."""

    __slots__ = ("results", "complete")

    def __init__(self, members: tuple[CachedProvider, ...], usages: tuple):
        super().__init__(members, usages)
        self.results: list[Result] = []  # in the order the search gives them
        self.complete = False  # all of them, or only the first ones


class _EmptyRun(Key["_KeptRun"]):
    """The first anchors, in the search's order, that gave requests of one
    shape no result."""
    # shape: tuple
    __slots__ = ()


class _KeptRun:
    """Anchors that gave no result, with what they gave none from: the
    members of each, and the records and usages of all of them (each
    provider once, in id order)."""

    __slots__ = ("anchors", "member_ids", "provider_ids", "members", "usages")

    def __init__(self, anchors: tuple[int, ...], member_ids: tuple[tuple[int, ...], ...],
                 provider_ids: tuple[int, ...], members: tuple[CachedProvider, ...],
                 usages: tuple):
        self.anchors = anchors
        self.member_ids = member_ids
        self.provider_ids = provider_ids
        self.members = members
        self.usages = usages


# A read of usages: the providers and classes named (None: any), and the
# amounts it gave, by (provider id, class id).
_UsageRead = tuple[list[int] | None, list[int] | None, dict[tuple[int, int], int]]


def _read_key(provider_ids: list[int] | None, class_ids: list[int] | None) -> tuple:
    return tuple(None if ids is None else tuple(ids) for ids in (provider_ids, class_ids))


class _Answer(Key["_KeptAnswer"]):
    """The whole answer to requests of one kind."""
    # shape (SnapshotWorld.shape), limit, max_candidates, breadth_first,
    # summarize_all_classes
    __slots__ = ()


class _KeptAnswer:
    """An answer, and what it was made from besides the request: the
    snapshot (by its serial) and the usages the search and the summaries
    read, in order. The search being a function of those, the answer holds
    while every read gives again what it gave."""

    __slots__ = ("serial", "reads", "candidates")

    def __init__(self, serial: int, reads: list[_UsageRead], candidates: Candidates):
        self.serial = serial
        self.reads = reads
        self.candidates = candidates


# What the kept store's entries cost, in bytes, as measured
# (tests/functional/test_kept_memory.py): an entry with its key and its
# members' tuple; a usage it was made with; a result with its allocation
# request and their JSON, and each (provider, class) amount of it.
_ENTRY_BYTES = 600
_USAGE_BYTES = 100
_RESULT_BYTES = 1400
_AMOUNT_BYTES = 400
_LISTED_BYTES = 400


# What a provider's memo entries cost, in bytes, as measured (the same
# test): a search record (three inventories), a tree's members (and each
# member), a summary with its JSON.
_RECORD_BYTES = 400
_MEMBERS_BYTES = 150
_MEMBER_BYTES = 10
_SUMMARY_BYTES = 1200


def _remember(snapshot: Snapshot, provider: CachedProvider, key: Key[V], value: V,
              size: int) -> V:
    """Put ``value`` in the provider's memo, counting ``size`` against what
    the snapshot's kept store bounds (KeptStore.count_memo)."""
    snapshot.kept.count_memo(size)
    return provider.memo.put(key, value)


def kept_bytes(usages: int, results: Iterable[Result] = ()) -> int:
    """About what an entry of the kept store holds, in bytes: made with
    ``usages`` usages, keeping ``results``."""
    return (_ENTRY_BYTES + _USAGE_BYTES * usages
            + sum(_RESULT_BYTES + _AMOUNT_BYTES * len(result.allocations) for result in results))


def _answer_bytes(reads: list[_UsageRead], candidates: Candidates) -> int:
    """About what a kept answer holds besides what the results at its
    roots hold (its requests and summaries are theirs): its reads, its
    lists and the JSON of the whole answer (``rendered``)."""
    return (_ENTRY_BYTES + _USAGE_BYTES * sum(len(used) for _, _, used in reads)
            + _LISTED_BYTES * (len(candidates.allocation_requests)
                               + len(candidates.provider_summaries)))


def _from_kept(kept: _KeptResults, search_again: Callable[[], Iterator[Result]]
               ) -> Iterator[Result]:
    """The kept results; then, when they were only the first ones and the
    search wants more, the rest of a new search of the tree (which gives
    the same first ones again)."""
    taken = 0
    while True:
        # read before the length: another request may still be adding to
        # them, and marks them complete after its last one
        complete = kept.complete
        if taken == len(kept.results):
            break
        yield kept.results[taken]
        taken += 1
    if not complete:
        yield from itertools.islice(search_again(), taken, None)


class SnapshotWorld(World):
    """The part of the provider snapshot the search needs, as ``Provider``
    records with this request's usages, made as the search goes: the trees
    of the anchors (roots) in batches of growing size, each batch just
    before its anchors are searched, with the sharing providers serving
    them. With a limit, the search usually stops long before the last batch.

    The anchors are the trees that have an inventory of a requested class
    or a sharing provider with one serving them, narrowed to the trees a
    group's ``member_of`` or ``in_tree`` can reach (snapshot.anchors).
    Providers carry the inventories of the requested classes; providers
    without a requested class matter only to resourceless groups and
    same_subtree, so whole trees are taken only when the request has those.
    """

    def __init__(self, connection: sa.engine.Connection, snapshot: Snapshot,
                 groups: list[RequestGroup], options: SearchOptions, class_ids: dict[str, int]):
        self._connection = connection
        self._snapshot = snapshot
        self._class_names = {class_id: name for name, class_id in class_ids.items()}
        self._whole_trees = bool(options.same_subtree) or not all(
            group.resources for group in groups)
        # without a limit everything is consumed anyway
        self._first_batch = (None if options.limit is None
                             else max(_SMALLEST_BATCH, options.limit // 8))
        # the search records of providers without usage depend on the
        # classes only: they are kept with the cached provider
        self._record_key = _SearchRecord(tuple(sorted(self._class_names.items())))
        tree_roots_by_uuid = {
            uuid: snapshot.providers[snapshot.ids_by_uuid[uuid]].root_id
            for uuid in {group.in_tree for group in groups if group.in_tree is not None}
            if uuid in snapshot.ids_by_uuid}
        # Provider records and members are made when the search first asks
        # for them: an anchor whose kept results still hold needs neither.
        super().__init__(_Lazy(self._new_record), snapshot.sharing, snapshot.has_nesting,
                         tree_roots_by_uuid, _Lazy(self._new_members))
        # The results at a root are kept (snapshot.kept, by root and kind of
        # request) for the next request of the same kind that finds its
        # members unchanged. Besides them and the request, they depend on
        # facts of the whole database only.
        self.shape = (_request_key(groups, options), self.has_nesting,
                      self.spread_unsuffixed, tuple(sorted(tree_roots_by_uuid.items())))
        self._members_key = _Members(None if self._whole_trees
                                     else frozenset(self._class_names))
        # every usage read so far, in order; those made by reads_again
        self.reads: list[_UsageRead] = []
        self._read_before: dict[tuple, dict[tuple[int, int], int]] = {}
        # (provider id, class id) -> used, of the providers loaded so far
        self._used: dict[tuple[int, int], int] = {}
        self._using: set[int] = set()  # the providers of those
        self._loaded: set[int] = set()  # the providers whose usages were read
        self._every_usage_read = False  # those of the providers in no searched tree too
        # root -> ids of its members
        self._member_ids: dict[int, tuple[int, ...]] = {}
        # The anchors, from the first, that gave no result (the search takes
        # them in id order), while ``_run_open``; how many of them were a
        # kept run this search skipped (see anchors).
        self._empty_run: list[int] = []
        self._run_open = False
        self._skipped_run = 0
        if any(group.in_tree is not None and group.in_tree not in tree_roots_by_uuid
               for group in groups if group.resources):
            self._anchor_ids: tuple[int, ...] = ()  # a group with no possible provider
        else:
            self._anchor_ids = snapshot.anchors(
                self._class_names.keys(),
                dict.fromkeys(frozenset().union(*group.aggregates.required)
                              for group in groups if group.aggregates.required),
                {tree_roots_by_uuid[group.in_tree] for group in groups
                 if group.resources and group.in_tree is not None})

    def anchor_ids(self) -> tuple[int, ...]:
        return self._anchor_ids

    def anchors(self, randomize: bool = False) -> Iterator[int]:
        # An anchor gives from none to dozens of results (a tree served by
        # many sharing providers): batches start at an eighth of the limit
        # and grow fourfold, so that what is loaded for nothing stays small
        # next to what the search needed, in a few queries.
        anchor_ids = self._anchor_ids
        size, remaining = self._first_batch or len(anchor_ids), len(anchor_ids)
        if randomize:
            order = random_order(anchor_ids)
        else:
            # The first anchors of earlier searches, full trees for instance,
            # are passed over at once while they would give nothing again:
            # checked together, not one by one.
            self._run_open = True
            run = self._snapshot.kept.get(_EmptyRun(self.shape))
            order = iter(anchor_ids)
            if run is not None and anchor_ids[:len(run.anchors)] == run.anchors:
                batch = list(itertools.islice(order, len(run.anchors)))
                remaining -= len(batch)
                self._add_trees(batch, every=not remaining)
                if self._still_empty(run):
                    self._skipped_run = len(batch)
                    self._empty_run.extend(batch)
                    metrics.count_skipped_trees(len(batch))
                else:
                    yield from batch
        while remaining:
            if 2 * size >= remaining:
                size = remaining  # two batches would read more usages than one
            batch = list(itertools.islice(order, size))
            self._add_trees(batch, every=len(batch) == len(anchor_ids))
            yield from batch
            remaining -= len(batch)
            size *= 4

    def _add_trees(self, batch: list[int], every: bool) -> None:
        """The members of the trees of ``batch`` (``every``: all anchors)
        and their usages."""
        for root_id in batch:
            self._member_ids[root_id] = self._members_of(root_id)
        new = sorted({provider_id for root_id in batch for provider_id in self._member_ids[root_id]}
                     .difference(self._loaded))
        self._loaded.update(new)
        # all at once is cheaper than naming the providers of every tree
        self._read_usages(None if every else new)

    def _read(self, provider_ids: list[int] | None, class_ids: list[int] | None
              ) -> dict[tuple[int, int], int]:
        """``usages`` of this request's transaction, each read recorded
        (``reads``); a read ``reads_again`` already made is not made twice."""
        used = (self._read_before.pop(_read_key(provider_ids, class_ids), None)
                if self._read_before else None)
        if used is None:
            used = usages(self._connection, provider_ids, class_ids)
        self.reads.append((provider_ids, class_ids, used))
        return used

    def reads_again(self, reads: list[_UsageRead]) -> bool:
        """Make ``reads`` (another request's, in their order) again: do
        they give what they gave then? The search asks for its first reads
        in that order whatever the usages, so that what was read here
        before a read differed serves the search (``_read``)."""
        for provider_ids, class_ids, used in reads:
            now = self._read_before[_read_key(provider_ids, class_ids)] = usages(
                self._connection, provider_ids, class_ids)
            if now != used:
                return False
        return True

    def _read_usages(self, provider_ids: list[int] | None) -> None:
        """Read the usages of ``provider_ids`` (None: of every provider)."""
        used = self._read(provider_ids, sorted(self._class_names))
        self._used.update(used)
        self._using.update(provider_id for provider_id, _ in used)
        self._every_usage_read = self._every_usage_read or provider_ids is None

    def usages_of(self, provider_ids: list[int]) -> dict[tuple[int, int], int]:
        """(provider id, class id) -> amount used, of every class of these
        providers (where any is used). What the search read is taken as it
        is (the same transaction): only the providers it did not read, or
        that have classes it did not ask for, are read now."""
        providers, requested = self._snapshot.providers, self._class_names.keys()
        unread = [provider_id for provider_id in provider_ids
                  if not (self._every_usage_read or provider_id in self._loaded)
                  or not requested >= providers[provider_id].inventories.keys()]
        if not unread:  # the usual request: the caller only reads it
            return self._used
        # a copy: the search's own holds the requested classes only
        return {**self._used, **self._read(unread, None)}

    def every_usage(self) -> dict[tuple[int, int], int]:
        """(provider id, class id) -> amount used, of the requested classes
        of every provider, in a searched tree or not (where any is used)."""
        if not self._every_usage_read:
            self._read_usages(None)
        return self._used

    def record(self, provider_id: int) -> Provider:
        """The search record of any provider of the snapshot, in a searched
        tree or not, with its usages (for explaining why it is no candidate)."""
        self.every_usage()
        return self.providers[provider_id]

    def _members_of(self, root_id: int) -> tuple[int, ...]:
        """The providers of the tree of ``root_id`` the search may use, and
        the sharing providers serving it, in id order (kept with the root
        while the snapshot's indexes stay the same)."""
        snapshot = self._snapshot
        root = snapshot.providers[root_id]
        kept = root.memo.get(self._members_key)
        if kept is not None and kept[0] == snapshot.places:
            return kept[1]
        tree = snapshot.trees[root_id]
        members = tree if self._whole_trees or len(tree) == 1 else [
            provider_id for provider_id in tree
            if provider_id == root_id or self._useful(provider_id)]
        serving = [provider_id for provider_id in snapshot.sharing_serving(root_id)
                   if provider_id in self._useful_sharing
                   and snapshot.providers[provider_id].root_id != root_id]
        member_ids = tuple(sorted([*members, *serving]) if serving else members)
        _remember(snapshot, root, self._members_key, (snapshot.places, member_ids),
                  _MEMBERS_BYTES + _MEMBER_BYTES * len(member_ids))
        return member_ids

    def _new_members(self, root_id: int) -> list[Provider]:
        return [self.providers[provider_id] for provider_id in self._member_ids[root_id]]

    # Where nothing fitted, nothing fits while the providers are the same
    # and none of their usages went down: every check of the search asks
    # for free capacity, which more usage only takes away. So an anchor, or
    # a run of anchors, that gave no result is not searched again while
    # its members' records are the same and their usages only grew (a
    # compute filling up, its sharing disk still taking claims of others).

    def _only_grew(self, usages: tuple) -> bool:
        """Is every usage of ``usages`` ((provider, class, used) as a kept
        entry holds them) at least as high now?"""
        used = self._used
        return all(used.get((provider_id, class_id), 0) >= amount
                   for provider_id, class_id, amount in usages)

    def _still_empty(self, run: _KeptRun) -> bool:
        """Would the anchors of ``run`` (loaded) give nothing again?"""
        member_ids = tuple(self._member_ids[anchor] for anchor in run.anchors)
        return (member_ids == run.member_ids
                and tuple(map(self._snapshot.providers.__getitem__,
                              run.provider_ids)) == run.members
                and self._only_grew(run.usages))

    def keep_empty_run(self) -> None:
        """Keep the first anchors that gave this search no result, for the
        next search of its shape (once it is done: the run is what it
        searched)."""
        run = self._empty_run
        if len(run) == self._skipped_run:  # none, or only the kept one again
            return
        member_ids = tuple(self._member_ids[anchor] for anchor in run)
        provider_ids = tuple(sorted({provider_id for ids in member_ids for provider_id in ids}))
        members, usages = self._records_and_usages(provider_ids)
        self._snapshot.kept.put(_EmptyRun(self.shape),
                                _KeptRun(tuple(run), member_ids, provider_ids, members, usages),
                                kept_bytes(len(usages)) + _MEMBERS_BYTES * len(run)
                                + _MEMBER_BYTES * len(provider_ids))

    def _member_state(self, root_id: int) -> tuple[tuple[CachedProvider, ...], tuple]:
        """The records of the members of ``root_id`` and their usages."""
        return self._records_and_usages(self._member_ids[root_id])

    def _records_and_usages(self, member_ids: Collection[int]
                            ) -> tuple[tuple[CachedProvider, ...], tuple]:
        """The records of these providers, and their usages."""
        records = tuple(map(self._snapshot.providers.__getitem__, member_ids))
        using = self._using
        if using.isdisjoint(member_ids):
            return records, ()
        usages = tuple((record.id, class_id, self._used.get((record.id, class_id), 0))
                       for record in records if record.id in using
                       for class_id in record.inventories)
        return records, usages

    def anchor_results(self, anchor: int, search_anchor: Callable[[int], Iterator[Result]]
                       ) -> Iterator[Result]:
        members, usages = self._member_state(anchor)

        store, key = self._snapshot.kept, _ResultsAt(anchor, self.shape)

        def search_and_keep() -> Iterator[Result]:
            kept = _KeptResults(members, usages)
            store.put(key, kept, kept_bytes(len(usages)))
            for result in search_anchor(anchor):
                kept.results.append(result)
                yield result
            kept.complete = True
            store.put(key, kept, kept_bytes(len(usages), kept.results))

        kept = store.get(key)
        if kept is None:
            self._run_open = False
            return search_and_keep()
        if (kept.complete and not kept.results and kept.members == members
                and self._only_grew(kept.usages)):
            if self._run_open:
                self._empty_run.append(anchor)
            return iter(())
        self._run_open = False
        if kept.valid_for(members, usages):
            return _from_kept(kept, search_and_keep)
        return search_and_keep()

    def anchor_value(self, anchor: int, kind: str, make: Callable[[int], object]) -> object:
        members, usages = self._member_state(anchor)
        store, key = self._snapshot.kept, _ValueAt(anchor, kind, self.shape)
        kept = store.get(key)
        if kept is not None and kept.valid_for(members, usages):
            return kept.value
        value = make(anchor)
        store.put(key, _KeptAt(members, usages, value), kept_bytes(len(usages)))
        return value

    def _useful(self, provider_id: int) -> bool:
        """Can the provider be a member of a tree searched: does it have a
        requested class (any provider, when whole trees are searched)?"""
        return self._whole_trees or not self._class_names.keys().isdisjoint(
            self._snapshot.providers[provider_id].inventories)

    @functools.cached_property
    def _useful_sharing(self) -> frozenset[int]:
        snapshot = self._snapshot
        return (snapshot.sharing if self._whole_trees
                else snapshot.sharing_with(frozenset(self._class_names)))

    def _new_record(self, provider_id: int) -> Provider:
        """The search record of a provider, with its usages. Without any,
        it depends on the classes only: it is kept with the cached one."""
        cached = self._snapshot.providers[provider_id]
        if provider_id in self._using:
            return self._new_provider(cached, self._used)
        record = cached.memo.get(self._record_key)
        if record is None:
            record = _remember(self._snapshot, cached, self._record_key,
                               self._new_provider(cached, {}), _RECORD_BYTES)
        return record

    def _new_provider(self, cached: CachedProvider, used: dict[tuple[int, int], int]
                      ) -> Provider:
        inventories = {}
        for class_id, inventory_usage in cached.inventories.items():
            class_name = self._class_names.get(class_id)
            if class_name is not None:
                inventories[class_name] = _with_usage(
                    inventory_usage, used.get((cached.id, class_id), 0))
        return Provider(cached.id, cached.uuid, cached.parent_id, cached.root_id, inventories,
                        cached.traits, cached.aggregates)


# Provider summaries --------------------------------------------------------

def _summaries(connection: sa.engine.Connection, snapshot: Snapshot, world: SnapshotWorld,
               results: list[Result], nested_aware: bool, only_classes: set[str] | None
               ) -> list[ProviderSummary]:
    """Every provider of every tree giving resources to a result (only the
    giving providers themselves below 1.29 in a nested world), with the
    usages ``world`` searched with."""
    giving = {provider_id for result in results for provider_id, _, _ in result.allocations}
    if nested_aware or not snapshot.has_nesting:
        roots = {snapshot.providers[provider_id].root_id for provider_id in giving}
        wanted = sorted(provider_id for root_id in roots for provider_id in snapshot.trees[root_id])
    else:
        wanted = sorted(giving)
    used = world.usages_of(wanted)
    summaries = []
    missing = []  # (index, record, usages) of the summaries to make
    key = _Summary(None if only_classes is None else frozenset(only_classes))
    for provider_id in wanted:
        provider = snapshot.providers[provider_id]
        usages = tuple(used.get((provider_id, class_id), 0) for class_id in provider.inventories)
        kept = provider.memo.get(key)
        if kept is not None and kept[0] == usages:
            summaries.append(kept[1])
        else:
            missing.append((len(summaries), provider, usages))
            summaries.append(None)
    class_names = resource_class.names_from_ids(connection, {
        class_id for _, provider, _ in missing for class_id in provider.inventories})
    for index, provider, usages in missing:
        summaries[index] = summary = _summary(snapshot, provider, dict(
            zip(provider.inventories, usages, strict=True)), class_names, only_classes)
        _remember(snapshot, provider, key, (usages, summary), _SUMMARY_BYTES)
    return summaries


def _summary(snapshot: Snapshot, provider: CachedProvider, used: dict[int, int],
             class_names: dict[int, str], only_classes: set[str] | None) -> ProviderSummary:
    resources = {}
    for class_id in sorted(provider.inventories):
        class_name = class_names[class_id]
        if only_classes is None or class_name in only_classes:
            resources[class_name] = ResourceSummary(provider.inventories[class_id].capacity,
                                                    used[class_id])
    return ProviderSummary(
        uuid=provider.uuid,
        parent_provider_uuid=(None if provider.parent_id is None
                              else snapshot.providers[provider.parent_id].uuid),
        root_provider_uuid=snapshot.providers[provider.root_id].uuid,
        resources=resources,
        traits=list(provider.trait_names),
    )
