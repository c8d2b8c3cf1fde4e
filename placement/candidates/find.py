"""Allocation candidates: which sets of providers could satisfy a request now.

``find`` validates the names of the request, takes the providers from this
process's copy (``placement.candidates.snapshot``, brought up to date
with the database's changes at each request), reads the usages of the
providers it looks at (long id lists are sent in chunks), runs the
in-memory search of ``placement.candidates.search`` and describes
the providers involved. It never writes.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import weakref
from collections.abc import Callable, Collection, Container, Iterable, Iterator
from typing import NamedTuple

import sqlalchemy as sa

from placement import exceptions, metrics
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.memo import Key, Memo, V
from placement.candidates.search import (
    OneProviderResult,
    Provider,
    RequestGroup,
    Result,
    SearchOptions,
    SpreadResult,
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

__all__ = ["AllocationRequest", "Candidates", "OneProviderRequest", "Prepared", "ProviderSummary",
           "RequestGroup", "SearchOptions", "SnapshotWorld", "SpreadRequest", "find", "kept_bytes",
           "prepare"]


class AllocationRequest(NamedTuple):
    # provider uuid -> {resource class: amount} (shared between requests,
    # never changed)
    allocations: dict[str, dict[str, int]]
    # group suffix -> uuids of the providers that satisfied it
    mappings: dict[str, list[str]]


class OneProviderRequest(NamedTuple):
    """An allocation request of one group taking everything from one
    provider, the most common: made, and written (the API's handler),
    without its dicts; ``allocations`` and ``mappings`` make them when
    asked."""

    uuid: str
    resources: dict[str, int]  # shared between requests, never changed
    suffix: str

    @property
    def allocations(self) -> dict[str, dict[str, int]]:
        return {self.uuid: self.resources}

    @property
    def mappings(self) -> dict[str, list[str]]:
        return {self.suffix: [self.uuid]}


class SpreadRequest(NamedTuple):
    """An allocation request of one group spread over a few providers (a
    compute with a sharing provider's disk, a NUMA node and its root),
    the most common after ``OneProviderRequest``: made, and written, as
    (uuid, resources) pairs and the uuids the group maps to."""

    givers: tuple[tuple[str, dict[str, int]], ...]  # resources shared, never changed
    suffix: str
    uuids: tuple[str, ...]  # of the providers, in id order

    @property
    def allocations(self) -> dict[str, dict[str, int]]:
        return dict(self.givers)

    @property
    def mappings(self) -> dict[str, list[str]]:
        return {self.suffix: list(self.uuids)}


@dataclasses.dataclass(slots=True)
class ResourceSummary:
    capacity: int
    used: int


# A provider summary is never changed once made: it serves every request
# while its provider and usages stay the same. ``rendered`` keeps what the
# API makes of it.
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
    allocation_requests: list[AllocationRequest | OneProviderRequest | SpreadRequest]
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
    snapshot = current_snapshot(connection)
    # A trait some provider of the copy has exists (a trait in use cannot
    # be deleted, and the copy is as new as this transaction or newer):
    # only the others are looked up.
    trait_names = [name for traits in [*(group.traits for group in groups), options.root_traits]
                   for name in sorted(traits.names()) if name not in snapshot.trait_members]
    try:
        trait.ids_from_names(connection, trait_names)
    except exceptions.NotFound as error:
        raise exceptions.InvalidInput(str(error)) from None
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
    if (isinstance(kept, _KeptAnswer) and kept.serial == snapshot.serial
            and world.reads_again(kept.reads)):
        metrics.count_kept_answer("allocation_candidates", "given")
        return kept.candidates
    metrics.count_kept_answer("allocation_candidates",
                              "stale" if isinstance(kept, _KeptAnswer) else "none")
    results = search(world, groups, options)
    summaries = _summaries(connection, snapshot, world, results, options.nested_aware,
                           None if summarize_all_classes else set(class_ids))
    candidates = Candidates(_allocation_requests(world, results), summaries)
    if key is not None:
        snapshot.kept.keep_once_asked_before(key, kept, lambda: (
            _KeptAnswer(snapshot.serial, world.reads, candidates),
            _answer_bytes(world.reads, candidates)), kept_bytes(0))
    return candidates


def _allocation_requests(world: World, results: list[Result | OneProviderResult | SpreadResult]
                         ) -> list[AllocationRequest | OneProviderRequest | SpreadRequest]:
    """The allocation requests of ``results``. Many take the same resources
    of a provider (every request of a lone group taking everything from
    one provider, the disk of a sharing provider in many): those share
    one dict, so that the answer's JSON encodes it once."""
    providers = world.providers
    shared = _SharedResources()
    givers = _SpreadGivers(shared)
    requests: list[AllocationRequest | OneProviderRequest | SpreadRequest] = []
    for result in results:
        if type(result) is OneProviderResult:  # the most common by far
            provider_id, amounts, suffix = result
            requests.append(OneProviderRequest(providers[provider_id].uuid, shared[amounts],
                                               suffix))
            continue
        if type(result) is SpreadResult:
            choice, amounts, suffix = result
            requests.append(SpreadRequest(
                tuple([(providers[choice[position]].uuid, resources)
                       for position, resources in givers(choice, amounts)]),
                suffix,
                tuple([providers[provider_id].uuid for provider_id in sorted(set(choice))])))
            continue
        requests.append(_allocation_request(
            providers, [(provider_id, (class_name, amount))
                        for provider_id, class_name, amount in result.allocations],
            result.mappings, shared))
    return requests


class _SharedResources(dict):
    """(class name, amount) pairs -> the one resources dict of the answer
    taking them (made when first asked)."""

    __slots__ = ()

    def __missing__(self, amounts: tuple[tuple[str, int], ...]) -> dict[str, int]:
        resources = self[amounts] = dict(amounts)
        return resources


class _SpreadGivers:
    """The providers of a spread choice (``SpreadResult``) and what each
    gives: (position in the choice of a provider's first class, its
    resources dict), in order. They depend on the group's resources and on
    where the choice repeats a provider only (for each class, the position
    of the first class taken from the same provider: its pattern), which
    many results share (a compute giving VCPU and memory, a sharing
    provider the disk): worked out once per pattern."""

    __slots__ = ("_shared", "_givers")

    def __init__(self, shared: _SharedResources):
        self._shared = shared
        self._givers: dict[tuple, list[tuple[int, dict[str, int]]]] = {}

    def __call__(self, choice: tuple[int, ...], amounts: tuple[tuple[str, int], ...]
                 ) -> list[tuple[int, dict[str, int]]]:
        pattern = tuple(map(choice.index, choice))
        givers = self._givers.get((pattern, amounts))
        if givers is None:
            amounts_at: dict[int, list[tuple[str, int]]] = {}
            for position, amount in zip(pattern, amounts, strict=True):
                amounts_at.setdefault(position, []).append(amount)
            givers = self._givers[pattern, amounts] = [
                (position, self._shared[tuple(given)]) for position, given in amounts_at.items()]
        return givers


def _allocation_request(providers: dict[int, Provider],
                        given: Iterable[tuple[int, tuple[str, int]]],
                        mappings: dict[str, frozenset[int]], shared: _SharedResources
                        ) -> AllocationRequest | OneProviderRequest:
    """The request giving each (provider id, (class name, amount)) of
    ``given``, mapping each suffix to its providers (ids)."""
    amounts_of: dict[int, list[tuple[str, int]]] = {}
    for provider_id, amount in given:
        if provider_id in amounts_of:
            amounts_of[provider_id].append(amount)
        else:
            amounts_of[provider_id] = [amount]
    if len(amounts_of) == 1 and len(mappings) == 1:
        # one group, one provider: the most common result
        (provider_id, amounts), = amounts_of.items()
        return OneProviderRequest(providers[provider_id].uuid, shared[tuple(amounts)],
                                  next(iter(mappings)))
    allocations: dict[str, dict[str, int]] = {}
    for provider_id, amounts in amounts_of.items():
        allocations[providers[provider_id].uuid] = shared[tuple(amounts)]
    return AllocationRequest(allocations, {
        suffix: [providers[provider_id].uuid for provider_id in sorted(provider_ids)]
        for suffix, provider_ids in mappings.items()})


# Loading -----------------------------------------------------------------

def _with_usage(inventory_usage: InventoryUsage, used: int) -> InventoryUsage:
    # the snapshot's records are shared between requests: never changed in place
    return inventory_usage.with_used(used) if used else inventory_usage


# The fewest anchors a batch loads (see SnapshotWorld.anchors).
_SMALLEST_BATCH = 8
# The fewest sharing providers serving a tree for the search to take what
# they give from the set (World.member_parts) rather than look at each:
# below, looking costs less than the bookkeeping.
_SERVING_SET = 4

# What is kept with a cached provider (its search records, one per set of
# requested classes seen; its summaries; a root's members): a bound on the
# memory of unusual requests.
def _filter_key(names: TraitFilter | AggregateFilter) -> tuple:
    return (tuple(sorted(tuple(sorted(any_of)) for any_of in names.required)),
            tuple(sorted(names.forbidden)))


def _request_key(groups: list[RequestGroup], options: SearchOptions) -> tuple:
    """What the search's results depend on, besides the providers and
    their usages: the groups in order and the options."""
    return (tuple((group.suffix, tuple(group.resources.items()), _filter_key(group.traits),
                   _filter_key(group.aggregates), group.in_tree) for group in groups),
            options.group_policy, _filter_key(options.root_traits),
            tuple(tuple(suffixes) for suffixes in options.same_subtree),
            options.nested_aware, options.max_candidates > 0)


# What find keeps: in a provider record's memo (made from the record and
# the request's classes), and in the kept store (whole answers, made from
# the snapshot, the usages read and the shape of the request).

class _SearchRecord(Key["tuple[tuple[int, ...], Provider, bool]"]):
    """The search record of a provider, with the usages of the requested
    classes it was made with (() when none is used), and whether those are
    all the classes it has."""
    # classes: tuple[tuple[int, str], ...] ((id, name) of the requested classes)
    __slots__ = ()


class _Members(Key["tuple[int, TreeMembers]"]):
    """The members of a root (``_members_of``), with the ``places`` of the
    snapshot they were found in."""
    # class_ids: frozenset[int] | None (None: whole trees are searched)
    __slots__ = ()


class _ServingSets(Key["dict[tuple[int, ...], tuple[int, ...]]"]):
    """Each set of sharing providers serving some trees, as one tuple (a
    snapshot's memo: the trees' kept members share it)."""
    __slots__ = ()


class _Summary(Key["tuple[tuple[int, ...], ProviderSummary]"]):
    """A provider's summary, with the usages it was made with."""
    # only_classes: frozenset[str] | None (None: every class)
    __slots__ = ()


class _Batch(Key["_KeptBatch | bool"]):
    """What a first batch of trees was loaded into, for requests of one
    set of classes (True: only seen once, see
    KeptStore.keep_once_asked_before)."""
    # record_key: _SearchRecord (the requested classes)
    # members_key: _Members (whole trees or not)
    # batch: tuple[int, ...] (the anchors, in the order searched)
    __slots__ = ()


class TreeMembers(NamedTuple):
    """The providers of a tree the search may use (``own``) and the sharing
    providers of other trees serving it (``serving``), ids in id order. A
    tree in an aggregate with sharing providers has them all as members:
    the serving tuple is one object for all the trees it serves, so that
    their member lists are made from one list of its records."""

    own: tuple[int, ...]
    serving: tuple[int, ...]
    # every member in id order, when the serving ones do not all follow
    # the own ones (None: ``own + serving`` is in id order)
    interleaved: tuple[int, ...] | None

    def ids(self) -> Iterable[int]:
        return itertools.chain(self.own, self.serving)


class _KeptBatch:
    """The members, usages and search records of a first batch of trees:
    they hold while no provider changed (the snapshot's serial) and the
    usages read for the batch are the same. ``capacities``: what
    ``_RootCapacities`` found of its roots, by class name."""

    __slots__ = ("serial", "batch", "used", "member_ids", "records", "members", "all_usages",
                 "capacities")

    def __init__(self, serial: int, batch: list[int], used: dict[tuple[int, int], int],
                 member_ids: dict[int, TreeMembers], records: dict[int, Provider],
                 members: dict[int, list[Provider]], all_usages: dict[int, tuple[int, ...]]):
        self.serial = serial
        self.batch = batch
        self.used = used
        self.member_ids = member_ids
        self.records = records
        self.members = members
        self.all_usages = all_usages
        self.capacities: dict[str, _RootCapacities | None] = {}


class _RootCapacities:
    """The roots of a batch with an inventory of one class, by the room
    left in it (capacity less usage), ascending: those with room for an
    amount are a tail of it, found by bisection and made a set at C speed.
    Only where ``min_unit`` is 1, ``step_size`` 1 and every ``max_unit``
    at least ``max_amount``, for amounts up to that: the unit rules then
    hold whatever the amount (``InventoryUsage.fits``)."""

    __slots__ = ("rooms", "anchors", "max_amount")

    def __init__(self, rooms: list[int], anchors: list[int], max_amount: int):
        self.rooms = rooms
        self.anchors = anchors
        self.max_amount = max_amount

    @classmethod
    def of(cls, batch: list[int], records: dict[int, Provider], class_name: str
           ) -> _RootCapacities | None:
        """Those of the roots of ``batch``; None when some root's unit
        rules are not so simple."""
        rooms = []
        max_amount = None
        for anchor in batch:
            inventory = records[anchor].inventories.get(class_name)
            if inventory is None:
                continue
            if inventory.min_unit != 1 or inventory.step_size != 1:
                return None
            rooms.append((inventory.capacity - inventory.used, anchor))
            max_amount = (inventory.max_unit if max_amount is None
                          else min(max_amount, inventory.max_unit))
        rooms.sort()
        return cls([room for room, _ in rooms], [anchor for _, anchor in rooms],
                   0 if max_amount is None else max_amount)

    def with_room(self, amount: int) -> set[int] | None:
        """The roots with room for ``amount``; None when beyond max_amount."""
        if not 1 <= amount <= self.max_amount:
            return None
        return set(self.anchors[bisect.bisect_left(self.rooms, amount):])


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


# A read of usages: the providers and classes named (None: any), and the
# amounts it gave, by (provider id, class id).
_UsageRead = tuple[list[int] | None, list[int] | None, dict[tuple[int, int], int]]


def _read_key(provider_ids: list[int] | None, class_ids: list[int] | None) -> tuple:
    return tuple(None if ids is None else tuple(ids) for ids in (provider_ids, class_ids))


class _Answer(Key["_KeptAnswer | bool"]):
    """The whole answer to requests of one kind (True: the kind only asked
    once, see KeptStore.keep_once_asked_before)."""
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
# (tests/functional/test_kept_memory.py): an entry with its key; a usage it
# was made with; an allocation request of a kept answer, and a summary it
# lists (the summary is its provider's), each with its share of the
# answer's JSON.
_ENTRY_BYTES = 600
_USAGE_BYTES = 100
_REQUEST_BYTES = 1100
_LISTED_BYTES = 300


# What a provider's memo entries cost, in bytes, as measured (the same
# test): a search record (three inventories), a tree's members (and each
# member), a summary with its JSON.
_RECORD_BYTES = 400
# per provider of a kept batch (its entries in the batch's dicts)
_BATCH_BYTES = 300
_MEMBERS_BYTES = 150
_MEMBER_BYTES = 10
_SUMMARY_BYTES = 1200


def _remember(snapshot: Snapshot, provider: CachedProvider, key: Key[V], value: V,
              size: int) -> V:
    """Put ``value`` in the provider's memo, counting ``size`` against what
    the snapshot's kept store bounds (KeptStore.count_memo) unless it
    replaces a value of the same key."""
    if key not in provider.memo:
        snapshot.kept.count_memo(size)
    return provider.memo.put(key, value)


def kept_bytes(usages: int) -> int:
    """About what an entry of the kept store holds, in bytes, besides its
    value: itself and the ``usages`` usages it was made with."""
    return _ENTRY_BYTES + _USAGE_BYTES * usages


def _answer_bytes(reads: list[_UsageRead], candidates: Candidates) -> int:
    """About what a kept answer holds: its reads, its requests and the
    JSON of the whole answer (``rendered``; its summaries are their
    providers')."""
    return (kept_bytes(sum(len(used) for _, _, used in reads))
            + _REQUEST_BYTES * len(candidates.allocation_requests)
            + _LISTED_BYTES * len(candidates.provider_summaries))


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
        # without a limit everything is consumed anyway; with one, the
        # anchors take turns, and each gives the limit a result at most in
        # the first turn
        self._first_batch = (None if options.limit is None
                             else max(_SMALLEST_BATCH, options.limit))
        # the search records of providers without usage depend on the
        # classes only: they are kept with the cached provider
        self._record_key = _SearchRecord(tuple(sorted(self._class_names.items())))
        tree_roots_by_uuid = {
            uuid: snapshot.providers[snapshot.ids_by_uuid[uuid]].root_id
            for uuid in {group.in_tree for group in groups if group.in_tree is not None}
            if uuid in snapshot.ids_by_uuid}
        # Provider records and members are made when the search first asks
        # for them.
        super().__init__(_Lazy(self._new_record), snapshot.sharing, snapshot.has_nesting,
                         tree_roots_by_uuid, _Lazy(self._new_members))
        # What a whole answer depends on besides the providers, their usages
        # and the limits: the request, and facts of the whole database.
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
        self._member_ids: dict[int, TreeMembers] = {}
        # the records of the serving members of trees (TreeMembers.serving)
        self._serving_records: dict[tuple[int, ...], list[Provider]] = {}
        # provider id -> the usages of every class it has, in the order of
        # its inventories (() when none is used), for those the search read
        # whole: the summaries are kept by them
        self.all_usages: dict[int, tuple[int, ...]] = {}
        # the batch taken whole from a kept one, and that one
        self._reused: tuple[list[int], _KeptBatch] | None = None
        # what the trees must reach, for the snapshot's indexes
        self._class_sets = dict.fromkeys(
            (class_ids[class_name], frozenset(group.traits.forbidden))
            for group in groups for class_name in group.resources)
        self._aggregate_sets = dict.fromkeys(frozenset().union(*group.aggregates.required)
                                             for group in groups if group.aggregates.required)
        self._tree_roots = {tree_roots_by_uuid[group.in_tree] for group in groups
                            if group.resources and group.in_tree in tree_roots_by_uuid}
        if any(group.in_tree is not None and group.in_tree not in tree_roots_by_uuid
               for group in groups if group.resources):
            self._searched: tuple[int, ...] = ()  # a group with no possible provider
        else:
            self._searched = snapshot.anchors(
                self._class_sets, self._aggregate_sets, self._tree_roots,
                dict.fromkeys(frozenset(any_of) for group in groups
                              for any_of in group.traits.required),
                (dict.fromkeys(frozenset(any_of) for any_of in options.root_traits.required),
                 options.root_traits.forbidden))

    def anchor_ids(self) -> tuple[int, ...]:
        """The trees with a requested class (or a sharing provider with one
        serving them), within member_of and in_tree: a superset of those
        the search visits, which the indexes narrow further (every class,
        traits); an explanation takes each through its steps."""
        if not self._searched:
            return ()
        return self._snapshot.anchors(
            {(class_id, frozenset()) for class_id, _ in self._class_sets},
            self._aggregate_sets, self._tree_roots, any_class=True)

    def anchor_batches(self, randomize: bool = False) -> Iterator[list[int]]:
        # The first turn of the anchors gives the limit one result at most
        # per anchor (none, when the anchor's trees are full or filtered
        # out): batches start at the limit and double, so that what
        # is loaded for nothing stays small next to what the search
        # needed, in a few queries.
        anchor_ids = self._searched
        size, remaining = self._first_batch or len(anchor_ids), len(anchor_ids)
        order = random_order(anchor_ids) if randomize else iter(anchor_ids)
        while remaining:
            if 3 * size >= 2 * remaining:
                size = remaining  # two batches would read more usages than one
            batch = list(itertools.islice(order, size))
            self._add_trees(batch)
            yield batch
            remaining -= len(batch)
            size *= 2

    def _add_trees(self, batch: list[int]) -> None:
        """The members of the trees of ``batch``, their usages and their
        search records (made here at once: the search asks for nearly all
        of them, and one by one through the lazy dicts costs more).

        A request's first batch is often the first batch of the requests
        before it (the same classes without filters: every flavor of a
        cloud): once seen twice, what it was loaded into is kept and taken
        again at once while no provider changed and its usages read the
        same (a claim elsewhere in the cloud changes neither)."""
        if self._loaded:
            self._load_trees(batch)
            return
        store = self._snapshot.kept
        key = _Batch(self._record_key, self._members_key, tuple(batch))
        kept = store.get(key)
        if isinstance(kept, _KeptBatch) and kept.serial == self._snapshot.serial:
            used = self._add_usages(kept.records.keys())
            self._loaded.update(kept.records)
            self._member_ids.update(kept.member_ids)
            self.all_usages.update(kept.all_usages)
            if used == kept.used:
                self.providers.update(kept.records)
                self.members.update(kept.members)
                self._reused = (batch, kept)
                return
            # only the providers whose usages moved get new records, and
            # the trees they are members of new member lists
            changed = {key[0] for key, _ in used.items() ^ kept.used.items()}
            records = self.providers
            records.update(kept.records)
            for provider_id in changed.intersection(kept.records):
                records[provider_id] = self._new_record(provider_id)
            members = self.members
            for root_id, tree in kept.member_ids.items():
                members[root_id] = (kept.members[root_id] if changed.isdisjoint(tree.ids())
                                    else self._member_records(tree))
        else:
            used = self._load_trees(batch)
        store.keep_once_asked_before(key, kept, lambda: self._kept_batch(batch, used),
                                     kept_bytes(0))

    def _load_trees(self, batch: list[int]) -> dict[tuple[int, int], int]:
        """_add_trees, one provider at a time; the usages read. The kept
        members and records are looked up here rather than through
        ``_members_of`` and ``_new_record`` when they hold (the usual
        case): a request loads a thousand trees or more, and a call per
        tree and per provider costs a fifth of it."""
        snapshot_providers, places = self._snapshot.providers, self._snapshot.places
        members_key = self._members_key
        member_ids = self._member_ids
        new = set()
        servings = set()
        for root_id in batch:
            kept = snapshot_providers[root_id].memo.get(members_key)
            tree = member_ids[root_id] = (
                kept[1] if kept is not None and kept[0] == places else self._members_of(root_id))
            new.update(tree.own)
            if tree.serving:
                servings.add(tree.serving)
        new = sorted(new.union(*servings).difference(self._loaded))
        used = self._add_usages(new)
        self._loaded.update(new)
        records = self.providers
        using, record_key, all_usages = self._using, self._record_key, self.all_usages
        for provider_id in new:
            if provider_id in records:
                continue
            # _new_record's first look, for a provider none of whose
            # requested classes is used
            kept = (None if provider_id in using
                    else snapshot_providers[provider_id].memo.get(record_key))
            if kept is not None and kept[0] == ():
                if kept[2]:
                    all_usages[provider_id] = ()
                records[provider_id] = kept[1]
            else:
                records[provider_id] = self._new_record(provider_id)
        members = self.members
        member_records = self._member_records
        for root_id in batch:
            members[root_id] = member_records(member_ids[root_id])
        return used

    def _member_records(self, tree: TreeMembers) -> list[Provider]:
        """The search records of a tree's members, in id order (each
        loaded before)."""
        records = self.providers
        if tree.interleaved is not None:
            return [records[provider_id] for provider_id in tree.interleaved]
        own = [records[provider_id] for provider_id in tree.own]
        if not tree.serving:
            return own
        serving = self._serving_records.get(tree.serving)
        if serving is None:
            serving = self._serving_records[tree.serving] = [
                records[provider_id] for provider_id in tree.serving]
        return own + serving

    def _add_usages(self, provider_ids: Collection[int]) -> dict[tuple[int, int], int]:
        """Read the usages of these providers (all at once when they are
        most of them), unless every usage was read; what was read."""
        if self._every_usage_read:
            return {}
        # all at once is cheaper than naming most providers
        every = 2 * len(provider_ids) > len(self._snapshot.providers)
        return self._read_usages(None if every else sorted(provider_ids))

    def _kept_batch(self, batch: list[int], used: dict[tuple[int, int], int]
                    ) -> tuple[_KeptBatch, int]:
        """What to keep of ``batch`` once loaded, and its size."""
        member_ids = {root_id: self._member_ids[root_id] for root_id in batch}
        records = {provider_id: self.providers[provider_id]
                   for tree in member_ids.values() for provider_id in tree.ids()}
        return (_KeptBatch(
            self._snapshot.serial, batch, used, member_ids, records,
            {root_id: self.members[root_id] for root_id in batch},
            {provider_id: self.all_usages[provider_id] for provider_id in records
             if provider_id in self.all_usages}),
            kept_bytes(len(used)) + _BATCH_BYTES * len(records))

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

    def _read_usages(self, provider_ids: list[int] | None) -> dict[tuple[int, int], int]:
        """Read the usages of ``provider_ids`` (None: of every provider);
        what was read."""
        used = self._read(provider_ids, sorted(self._class_names))
        self._used.update(used)
        self._using.update(provider_id for provider_id, _ in used)
        self._every_usage_read = self._every_usage_read or provider_ids is None
        return used

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

    def _members_of(self, root_id: int) -> TreeMembers:
        """The providers of the tree of ``root_id`` the search may use, and
        the sharing providers serving it (kept with the root while the
        snapshot's indexes stay the same)."""
        snapshot = self._snapshot
        root = snapshot.providers[root_id]
        kept = root.memo.get(self._members_key)
        if kept is not None and kept[0] == snapshot.places:
            return kept[1]
        tree = snapshot.trees[root_id]
        own = tree if self._whole_trees or len(tree) == 1 else tuple(
            provider_id for provider_id in tree
            if provider_id == root_id or self._useful(provider_id))
        serving = self._serving_of(tuple(sorted(
            provider_id for provider_id in snapshot.sharing_serving(root_id)
            if provider_id in self._useful_sharing
            and snapshot.providers[provider_id].root_id != root_id)))
        members = TreeMembers(own, serving, None if not serving or own[-1] < serving[0]
                              else tuple(sorted(own + serving)))
        _remember(snapshot, root, self._members_key, (snapshot.places, members),
                  _MEMBERS_BYTES + _MEMBER_BYTES * (len(own) + len(serving)))
        return members

    def _serving_of(self, serving: tuple[int, ...]) -> tuple[int, ...]:
        """``serving``, as the one tuple of these ids the snapshot's trees
        share (their kept members hold it once)."""
        if not serving:
            return ()
        interned = self._snapshot.memo.get_or_make(_ServingSets(), dict)
        return interned.setdefault(serving, serving)

    def member_parts(self, anchor: int) -> tuple[int, tuple[int, ...], list[Provider]] | None:
        tree = self._member_ids.get(anchor)
        if (tree is None or len(tree.serving) < _SERVING_SET or tree.interleaved is not None):
            return None
        serving = self._serving_records.get(tree.serving)
        if serving is None:  # members taken from a kept batch
            self._member_records(tree)
            serving = self._serving_records[tree.serving]
        return len(tree.own), tree.serving, serving

    def _new_members(self, root_id: int) -> list[Provider]:
        tree = self._member_ids.get(root_id)
        if tree is None:
            # a tree the search did not visit (an explanation asks): its
            # members' usages are read with every other's
            self.every_usage()
            tree = self._member_ids[root_id] = self._members_of(root_id)
        return self._member_records(tree)

    def roots_fitting(self, batch: list[int], amounts: tuple[tuple[str, int], ...]
                      ) -> Container[int]:
        # A batch taken whole from a kept one answers from the room left in
        # its roots, kept with it by class.
        reused = self._reused
        if reused is None or reused[0] is not batch:
            return super().roots_fitting(batch, amounts)
        kept = reused[1]
        fitting: set[int] | None = None
        for class_name, amount in amounts:
            if class_name not in kept.capacities:
                kept.capacities[class_name] = _RootCapacities.of(kept.batch, kept.records,
                                                                 class_name)
            capacities = kept.capacities[class_name]
            with_room = None if capacities is None else capacities.with_room(amount)
            if with_room is None:
                return super().roots_fitting(batch, amounts)
            fitting = with_room if fitting is None else fitting & with_room
        return set() if fitting is None else fitting

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
        """The search record of a provider, with its usages. It depends on
        the requested classes and their usages only: it is kept with the
        cached provider, and made again once one of them moved (a claim
        changes a few providers, every request reads thousands)."""
        cached = self._snapshot.providers[provider_id]
        class_names = self._class_names
        if provider_id in self._using:
            used = self._used
            usages = tuple([used.get((provider_id, class_id), 0)
                            for class_id in cached.inventories if class_id in class_names])
        else:
            usages = ()
        kept = cached.memo.get(self._record_key)
        if kept is not None and kept[0] == usages:
            if kept[2]:
                self.all_usages[provider_id] = usages
            return kept[1]
        inventories = {}
        for class_id, inventory_usage in cached.inventories.items():
            class_name = class_names.get(class_id)
            if class_name is not None:
                inventories[class_name] = _with_usage(
                    inventory_usage, self._used.get((provider_id, class_id), 0))
        record = Provider(provider_id, cached.uuid, cached.parent_id, cached.root_id,
                          inventories, cached.traits, cached.aggregates)
        # were the usages of every class of the provider read?
        whole = len(inventories) == len(cached.inventories)
        if whole:
            self.all_usages[provider_id] = usages
        _remember(self._snapshot, cached, self._record_key, (usages, record, whole),
                  _RECORD_BYTES)
        return record


# Provider summaries --------------------------------------------------------

def _summaries(connection: sa.engine.Connection, snapshot: Snapshot, world: SnapshotWorld,
               results: list[Result | OneProviderResult], nested_aware: bool,
               only_classes: set[str] | None) -> list[ProviderSummary]:
    """Every provider of every tree giving resources to a result (only the
    giving providers themselves below 1.29 in a nested world), with the
    usages ``world`` searched with."""
    giving = {provider_id for result in results for provider_id in result.giving()}
    if nested_aware or not snapshot.has_nesting:
        roots = {snapshot.providers[provider_id].root_id for provider_id in giving}
        wanted = sorted(provider_id for root_id in roots for provider_id in snapshot.trees[root_id])
    else:
        wanted = sorted(giving)
    all_usages = world.all_usages
    used = world.usages_of([provider_id for provider_id in wanted
                            if provider_id not in all_usages])
    summaries = []
    missing = []  # (index, record, usages) of the summaries to make
    key = _Summary(None if only_classes is None else frozenset(only_classes))
    providers = snapshot.providers
    for provider_id in wanted:
        provider = providers[provider_id]
        usages = all_usages.get(provider_id)
        if usages is None:
            usages = tuple([used.get((provider_id, class_id), 0)
                            for class_id in provider.inventories])
            if not any(usages):
                usages = ()
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
            zip(provider.inventories, usages or [0] * len(provider.inventories), strict=True)),
            class_names, only_classes)
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
