"""``CopyWorld``: the part of the provider copy one search needs, as
``Provider`` records with this request's usages, made as the search goes
(the trees of the anchors in batches, each just before it is searched),
with what requests keep of it for later ones: search records and members
in the providers' memos, first batches of trees in the kept store."""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable, Collection, Container, Iterator

from placement.candidates.batches import BatchKey, KeptBatch, RootCapacities, TreeMembers
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.kept import (
    BATCH_BYTES,
    MEMBER_BYTES,
    MEMBERS_BYTES,
    RECORD_BYTES,
    kept_bytes,
)
from placement.candidates.memo import Key
from placement.candidates.model import Provider, RequestGroup, SearchOptions
from placement.candidates.provider_copy import ProviderCopy, random_order
from placement.candidates.usage_mirror import Usages
from placement.candidates.world import World
from placement.objects.inventory import InventoryUsage


def _with_usage(inventory_usage: InventoryUsage, used: int) -> InventoryUsage:
    # the copy's records are shared between requests: never changed in place
    return inventory_usage.with_used(used) if used else inventory_usage


# The fewest anchors a batch loads (see CopyWorld.anchors).
_SMALLEST_BATCH = 8

def filter_key(names: TraitFilter | AggregateFilter) -> tuple:
    return (tuple(sorted(tuple(sorted(any_of)) for any_of in names.required)),
            tuple(sorted(names.forbidden)))


def _request_key(groups: list[RequestGroup], options: SearchOptions) -> tuple:
    """What the search's results depend on, besides the providers and
    their usages: the groups in order and the options."""
    return (tuple((group.suffix, tuple(group.resources.items()), filter_key(group.traits),
                   filter_key(group.aggregates), group.in_tree) for group in groups),
            options.group_policy, filter_key(options.root_traits),
            tuple(tuple(suffixes) for suffixes in options.same_subtree),
            options.nested_aware, options.max_candidates > 0)


# What find keeps: in a provider record's memo (made from the record and
# the request's classes), and in the kept store (whole answers, made from
# the copy, the usages read and the shape of the request).

class _SearchRecord(Key["tuple[tuple[int, ...], Provider, bool]"]):
    """The search record of a provider, with the usages of the requested
    classes it was made with (() when none is used), and whether those are
    all the classes it has."""
    # classes: tuple[tuple[int, str], ...] ((id, name) of the requested classes)
    __slots__ = ()


class _Members(Key["tuple[int, TreeMembers]"]):
    """The members of a root (``_members_of``), with the ``places`` of the
    copy they were found in."""
    # class_ids: frozenset[int] | None (None: whole trees are searched)
    __slots__ = ()


class _ServingSets(Key["dict[tuple[int, ...], tuple[int, ...]]"]):
    """Each set of sharing providers serving some trees, as one tuple (a
    copy's memo: the trees' kept members share it)."""
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


# A read of usages: the providers and classes named (None: any), and the
# amounts it gave, by (provider id, class id).
UsageRead = tuple[list[int] | None, list[int] | None, dict[tuple[int, int], int]]


def _read_key(provider_ids: list[int] | None, class_ids: list[int] | None) -> tuple:
    return tuple(None if ids is None else tuple(ids) for ids in (provider_ids, class_ids))


class CopyWorld(World):
    """The part of the provider copy the search needs, as ``Provider``
    records with this request's usages, made as the search goes: the trees
    of the anchors (roots) in batches of growing size, each batch just
    before its anchors are searched, with the sharing providers serving
    them. With a limit, the search usually stops long before the last batch.

    The anchors are the trees that have an inventory of a requested class
    or a sharing provider with one serving them, narrowed to the trees a
    group's ``member_of`` or ``in_tree`` can reach (copy.anchors).
    Providers carry the inventories of the requested classes; providers
    without a requested class matter only to resourceless groups and
    same_subtree, so whole trees are taken only when the request has those.
    """

    def __init__(self, copy: ProviderCopy, usages: Usages, groups: list[RequestGroup],
                 options: SearchOptions, class_ids: dict[str, int]):
        self._copy = copy
        self._usages = usages  # of the mirror, as new as the copy or newer
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
            uuid: copy.providers[copy.ids_by_uuid[uuid]].root_id
            for uuid in {group.in_tree for group in groups if group.in_tree is not None}
            if uuid in copy.ids_by_uuid}
        # Provider records and members are made when the search first asks
        # for them.
        super().__init__(_Lazy(self._new_record), copy.sharing, copy.has_nesting,
                         tree_roots_by_uuid, _Lazy(self._new_members))
        # What a whole answer depends on besides the providers, their usages
        # and the limits: the request, and facts of the whole database.
        self.shape = (_request_key(groups, options), self.has_nesting,
                      self.spread_unsuffixed, tuple(sorted(tree_roots_by_uuid.items())))
        self._members_key = _Members(None if self._whole_trees
                                     else frozenset(self._class_names))
        # every usage read so far, in order; those made by reads_again
        self.reads: list[UsageRead] = []
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
        self._reused: tuple[list[int], KeptBatch] | None = None
        self._searched = self._searched_anchors(groups, options, class_ids, tree_roots_by_uuid)

    def _searched_anchors(self, groups: list[RequestGroup], options: SearchOptions,
                          class_ids: dict[str, int], tree_roots_by_uuid: dict[str, int]
                          ) -> tuple[int, ...]:
        """The roots the search visits: those reaching what the groups ask
        (the copy's indexes, ProviderCopy.anchors), keeping for
        ``anchor_ids`` what they must reach."""
        self._class_sets = dict.fromkeys(
            (class_ids[class_name], frozenset(group.traits.forbidden))
            for group in groups for class_name in group.resources)
        self._aggregate_sets = dict.fromkeys(frozenset().union(*group.aggregates.required)
                                             for group in groups if group.aggregates.required)
        self._tree_roots = {tree_roots_by_uuid[group.in_tree] for group in groups
                            if group.resources and group.in_tree in tree_roots_by_uuid}
        if any(group.in_tree is not None and group.in_tree not in tree_roots_by_uuid
               for group in groups if group.resources):
            return ()  # a group with no possible provider
        return self._copy.anchors(
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
        return self._copy.anchors(
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
        store = self._copy.kept
        key = BatchKey(self._record_key, self._members_key, tuple(batch))
        kept = store.get(key)
        if isinstance(kept, KeptBatch) and kept.serial == self._copy.serial:
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
        copy_providers, places = self._copy.providers, self._copy.places
        members_key = self._members_key
        member_ids = self._member_ids
        new = set()
        servings = set()
        for root_id in batch:
            kept = copy_providers[root_id].memo.get(members_key)
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
                    else copy_providers[provider_id].memo.get(record_key))
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
        every = 2 * len(provider_ids) > len(self._copy.providers)
        return self._read_usages(None if every else sorted(provider_ids))

    def _kept_batch(self, batch: list[int], used: dict[tuple[int, int], int]
                    ) -> tuple[KeptBatch, int]:
        """What to keep of ``batch`` once loaded, and its size."""
        member_ids = {root_id: self._member_ids[root_id] for root_id in batch}
        records = {provider_id: self.providers[provider_id]
                   for tree in member_ids.values() for provider_id in tree.ids()}
        return (KeptBatch(
            self._copy.serial, batch, used, member_ids, records,
            {root_id: self.members[root_id] for root_id in batch},
            {provider_id: self.all_usages[provider_id] for provider_id in records
             if provider_id in self.all_usages}),
            kept_bytes(len(used)) + BATCH_BYTES * len(records))

    def _read(self, provider_ids: list[int] | None, class_ids: list[int] | None
              ) -> dict[tuple[int, int], int]:
        """``usages`` of this request's transaction, each read recorded
        (``reads``); a read ``reads_again`` already made is not made twice."""
        used = (self._read_before.pop(_read_key(provider_ids, class_ids), None)
                if self._read_before else None)
        if used is None:
            used = self._usages.of(provider_ids, class_ids)
        self.reads.append((provider_ids, class_ids, used))
        return used

    def reads_again(self, reads: list[UsageRead]) -> bool:
        """Make ``reads`` (another request's, in their order) again: do
        they give what they gave then? The search asks for its first reads
        in that order whatever the usages, so that what was read here
        before a read differed serves the search (``_read``)."""
        for provider_ids, class_ids, used in reads:
            now = self._read_before[_read_key(provider_ids, class_ids)] = self._usages.of(
                provider_ids, class_ids)
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
        providers, requested = self._copy.providers, self._class_names.keys()
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
        """The search record of any provider of the copy, in a searched
        tree or not, with its usages (for explaining why it is no candidate)."""
        self.every_usage()
        return self.providers[provider_id]

    def _members_of(self, root_id: int) -> TreeMembers:
        """The providers of the tree of ``root_id`` the search may use, and
        the sharing providers serving it (kept with the root while the
        copy's indexes stay the same)."""
        copy = self._copy
        root = copy.providers[root_id]
        kept = root.memo.get(self._members_key)
        if kept is not None and kept[0] == copy.places:
            return kept[1]
        tree = copy.trees[root_id]
        own = tree if self._whole_trees or len(tree) == 1 else tuple(
            provider_id for provider_id in tree
            if provider_id == root_id or self._useful(provider_id))
        serving = self._serving_of(tuple(sorted(
            provider_id for provider_id in copy.sharing_serving(root_id)
            if provider_id in self._useful_sharing
            and copy.providers[provider_id].root_id != root_id)))
        members = TreeMembers(own, serving, None if not serving or own[-1] < serving[0]
                              else tuple(sorted(own + serving)))
        copy.remember(root, self._members_key, (copy.places, members),
                  MEMBERS_BYTES + MEMBER_BYTES * (len(own) + len(serving)))
        return members

    def _serving_of(self, serving: tuple[int, ...]) -> tuple[int, ...]:
        """``serving``, as the one tuple of these ids the copy's trees
        share (their kept members hold it once)."""
        if not serving:
            return ()
        interned = self._copy.memo.get_or_make(_ServingSets(), dict)
        return interned.setdefault(serving, serving)

    @property
    def searched_anchors(self) -> tuple[int, ...]:
        """The roots the search visits, in id order (``_searched_anchors``)."""
        return self._searched

    def member_ids(self, root_id: int) -> tuple[int, ...]:
        """The members of ``root_id``'s tree as the search takes them (its
        providers and the sharing providers serving it), in id order: what
        a world of another request's making (placement.capacity) puts in
        its members."""
        tree = self._members_of(root_id)
        return tree.interleaved if tree.interleaved is not None else tree.own + tree.serving

    def member_parts(self, anchor: int) -> tuple[int, tuple[int, ...], list[Provider]] | None:
        tree = self._member_ids.get(anchor)
        if tree is None or not tree.serving or tree.interleaved is not None:
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
                kept.capacities[class_name] = RootCapacities.of(kept.batch, kept.records,
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
            self._copy.providers[provider_id].inventories)

    @functools.cached_property
    def _useful_sharing(self) -> frozenset[int]:
        copy = self._copy
        return (copy.sharing if self._whole_trees
                else copy.sharing_with(frozenset(self._class_names)))

    def _new_record(self, provider_id: int) -> Provider:
        """The search record of a provider, with its usages. It depends on
        the requested classes and their usages only: it is kept with the
        cached provider, and made again once one of them moved (a claim
        changes a few providers, every request reads thousands)."""
        cached = self._copy.providers[provider_id]
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
        self._copy.remember(cached, self._record_key, (usages, record, whole),
                  RECORD_BYTES)
        return record


