"""``CopyWorld``: the part of the provider copy one search needs, as
``Provider`` records with this request's usages, read as the search goes
(the trees of the anchors in batches) from the view of the request's
classes (``tree_view``), with what requests keep of it for later ones: the
views and first batches of trees in the kept store, search records and
members in the providers' memos."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from operator import attrgetter, ge

from placement.candidates.batches import BatchKey, KeptBatch, RootCapacities
from placement.candidates.checks import fits_every_class
from placement.candidates.filters import AggregateFilter, TraitFilter
from placement.candidates.kept import BATCH_BYTES, VIEW_BYTES, kept_bytes
from placement.candidates.memo import Key
from placement.candidates.model import Provider, RequestGroup, SearchOptions
from placement.candidates.provider_copy import ProviderCopy, random_order
from placement.candidates.tree_view import TreeView
from placement.candidates.usage_mirror import Usages
from placement.candidates.world import World

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


# A read of usages: the providers and classes named (None: any), and the
# snapshot they were read from.
UsageRead = tuple[frozenset[int] | None, frozenset[int] | None, Usages]


def _restricted(usage: tuple[tuple[int, int], ...], class_ids: frozenset[int] | None
                ) -> tuple[tuple[int, int], ...]:
    return usage if class_ids is None else tuple(
        (class_id, amount) for class_id, amount in usage if class_id in class_ids)


class CopyWorld(World):
    """The part of the provider copy the search needs, as ``Provider``
    records with this request's usages: the trees of the anchors (roots)
    in batches of growing size, with the sharing providers serving them.
    With a limit, the search usually stops long before the last batch.
    Its records and members are those of the view of the request's
    classes, which is at the request's usages: the world reads them there
    (made when first asked), and records which trees it read.

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
        whole_trees = bool(options.same_subtree) or not all(group.resources for group in groups)
        self._view = _view_of(copy, usages, self._class_names, whole_trees)
        # without a limit everything is consumed anyway; with one, the
        # anchors take turns, and each gives the limit a result at most in
        # the first turn
        self._first_batch = (None if options.limit is None
                             else max(_SMALLEST_BATCH, options.limit))
        tree_roots_by_uuid = {
            uuid: copy.providers[copy.ids_by_uuid[uuid]].root_id
            for uuid in {group.in_tree for group in groups if group.in_tree is not None}
            if uuid in copy.ids_by_uuid}
        super().__init__(self._view.records, copy.sharing, copy.has_nesting,
                         tree_roots_by_uuid, self._view.members)
        # What a whole answer depends on besides the providers, their usages
        # and the limits: the request, and facts of the whole database.
        self.shape = (_request_key(groups, options), self.has_nesting,
                      self.spread_unsuffixed, tuple(sorted(tree_roots_by_uuid.items())))
        # every usage read so far, but those of the batches in ``_unread``
        self._reads: list[UsageRead] = []
        # the batches searched whose providers' reads are not yet in
        # ``_reads`` (made when asked: only a kept answer needs them)
        self._unread: list[list[int]] = []
        # the usages of the requested classes of every provider, once asked
        self._every_usage: dict[tuple[int, int], int] | None = None
        # the usages of every class of the providers whose records hold
        # every class (TreeView.all_usages): summaries are made from them
        self.all_usages = self._view.all_usages
        # the first batch when it is a kept one, and that one
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
        # out): the first batch is the limit's size. Most of its anchors
        # give one, so the next batch is an eighth of it, and the batches
        # double from there: what is loaded for nothing stays small next
        # to what the search needed.
        anchor_ids = self._searched
        first = self._first_batch or len(anchor_ids)
        sizes = itertools.chain([first], (max(_SMALLEST_BATCH, first // 8) << doubling
                                          for doubling in itertools.count()))
        remaining = len(anchor_ids)
        order = random_order(anchor_ids) if randomize else iter(anchor_ids)
        for number, size in enumerate(sizes):
            if not remaining:
                return
            if 3 * size >= 2 * remaining:
                size = remaining  # two batches would read more usages than one
            batch = list(itertools.islice(order, size))
            if number or not self._take_kept(batch):
                self._unread.append(batch)
            yield batch
            remaining -= len(batch)

    def _take_kept(self, batch: list[int]) -> bool:
        """Take what is kept of ``batch``, a request's first batch, if it
        holds (its read recorded at once): was it? Most requests of a set
        of classes have the same first batch (every flavor of a cloud
        without filters). Once seen twice, it is kept with the providers
        of its trees and the room left in its roots (``roots_fitting``),
        and taken again while no provider changed (the copy's serial) and
        none of its providers' usages moved since (a claim elsewhere in
        the cloud changes neither)."""
        store = self._copy.kept
        view = self._view
        key = BatchKey(view.record_key, view.members_key, tuple(batch))
        kept = store.get(key)
        if (isinstance(kept, KeptBatch) and kept.serial == self._copy.serial
                and (kept.usages is self._usages
                     or kept.provider_ids.isdisjoint(self._usages.changed_since(kept.usages)))):
            self._read(kept.provider_ids)
            self._reused = (batch, kept)
            return True
        store.keep_once_asked_before(key, kept, lambda: self._kept_batch(batch), kept_bytes(0))
        return False

    def _kept_batch(self, batch: list[int]) -> tuple[KeptBatch, int]:
        """What to keep of ``batch``, the first batch of this request, and
        its size."""
        provider_ids = self._providers_of(batch)
        return (KeptBatch(self._copy.serial, batch, self._usages, provider_ids),
                kept_bytes(len(provider_ids)) + BATCH_BYTES * len(batch))

    def _providers_of(self, batch: list[int]) -> frozenset[int]:
        """The providers of the trees of ``batch`` (their members), at C
        speed (``map``: a batch holds a thousand trees or more); the
        serving sets, shared by many trees, taken once each."""
        trees = list(map(self._view.member_ids.__getitem__, batch))
        return frozenset(itertools.chain(itertools.chain.from_iterable(map(_OWN, trees)),
                                         *set(map(_SERVING, trees))))

    @property
    def reads(self) -> list[UsageRead]:
        """Every usage read so far: which providers and classes (None:
        any), from which snapshot (what a kept answer is checked by)."""
        for batch in self._unread:
            self._read(self._providers_of(batch))
        self._unread = []
        return self._reads

    def _read(self, provider_ids: frozenset[int] | None,
              class_ids: frozenset[int] | None = None) -> None:
        """Record that the usages of these providers and classes (None: of
        every one) were read from this request's snapshot (``reads``)."""
        self._reads.append((provider_ids, class_ids, self._usages))

    def reads_again(self, reads: list[UsageRead]) -> bool:
        """Do ``reads`` (another request's) give the same usages from this
        request's snapshot? Only the providers whose usage changed between
        the two snapshots are looked at (``Usages.changed_since``)."""
        now = self._usages
        changed_since: dict[int, set[int]] = {}  # id of a snapshot -> what changed
        for provider_ids, class_ids, then in reads:
            if then is now:
                continue
            changed = changed_since.get(id(then))
            if changed is None:
                changed = changed_since[id(then)] = now.changed_since(then)
            for provider_id in (changed if provider_ids is None
                                else changed.intersection(provider_ids)):
                if (_restricted(now.of_provider(provider_id), class_ids)
                        != _restricted(then.of_provider(provider_id), class_ids)):
                    return False
        return True

    def usages_of(self, provider_ids: list[int]) -> dict[tuple[int, int], int]:
        """(provider id, class id) -> amount used, of every class of these
        providers (where any is used), read from this request's snapshot."""
        if not provider_ids:
            return {}
        self._read(frozenset(provider_ids))
        return self._usages.of(provider_ids, None)

    def every_usage(self) -> dict[tuple[int, int], int]:
        """(provider id, class id) -> amount used, of the requested classes
        of every provider, in a searched tree or not (where any is used)."""
        if self._every_usage is None:
            class_ids = frozenset(self._class_names)
            self._read(None, class_ids)
            self._every_usage = self._usages.of(None, class_ids)
        return self._every_usage

    def record(self, provider_id: int) -> Provider:
        """The search record of any provider of the copy, in a searched
        tree or not, with its usages (for explaining why it is no candidate)."""
        self.every_usage()
        return self.providers[provider_id]

    def _roots_with_room(self, batch: list[int], amounts: tuple[tuple[str, int], ...]
                         ) -> set[int]:
        """roots_fitting from the rooms the view keeps of its providers,
        when ``amounts`` (by class name, as ``TreeView.class_order``) are
        of every requested class (a request of one group): one comparison
        per root instead of the checks of each class."""
        view = self._view
        if view.class_order != tuple(class_name for class_name, _ in amounts):
            return super().roots_fitting(batch, amounts)
        wanted = tuple(amount for _, amount in amounts)
        if min(wanted) < 1:
            return super().roots_fitting(batch, amounts)
        providers = self.providers
        return {anchor for anchor, room in zip(batch, map(view.rooms.__getitem__, batch),
                                               strict=True)
                if (all(map(ge, room, wanted)) if room is not None
                    else fits_every_class(providers[anchor].inventories, amounts))}

    @property
    def searched_anchors(self) -> tuple[int, ...]:
        """The roots the search visits, in id order (``_searched_anchors``)."""
        return self._searched

    def member_ids(self, root_id: int) -> tuple[int, ...]:
        """The members of ``root_id``'s tree as the search takes them (its
        providers and the sharing providers serving it), in id order: what
        a world of another request's making (placement.capacity) puts in
        its members."""
        tree = self._view.member_ids[root_id]
        return tree.interleaved if tree.interleaved is not None else tree.own + tree.serving

    def member_parts(self, anchor: int) -> tuple[int, tuple[int, ...], list[Provider]] | None:
        tree = self._view.member_ids.get(anchor)
        if tree is None or not tree.serving or tree.interleaved is not None:
            return None
        return len(tree.own), tree.serving, self._view.serving_records(tree.serving)

    def roots_passing(self, roots: set[int], group: RequestGroup,
                      passes: Callable[[Provider, Provider], bool]) -> set[int]:
        # From the copy's indexes of traits and aggregates, whose records
        # these are (``passes`` asks the same of one root).
        copy = self._copy
        roots = group.traits.members_among(roots, copy.trait_members)
        roots = group.aggregates.members_among(roots, copy.aggregate_members)
        if group.in_tree is not None:
            roots = roots.intersection([self.tree_roots_by_uuid.get(group.in_tree)])
        return roots

    def roots_fitting(self, batch: list[int], amounts: tuple[tuple[str, int], ...]
                      ) -> set[int]:
        # A batch taken whole from a kept one answers from the room left in
        # its roots, kept with it by class.
        reused = self._reused
        if reused is None or reused[0] is not batch:
            return self._roots_with_room(batch, amounts)
        kept = reused[1]
        fitting: set[int] | None = None
        for class_name, amount in amounts:
            if class_name not in kept.capacities:
                kept.capacities[class_name] = RootCapacities.of(kept.batch, self.providers,
                                                                 class_name)
            capacities = kept.capacities[class_name]
            with_room = None if capacities is None else capacities.with_room(amount)
            if with_room is None:
                return super().roots_fitting(batch, amounts)
            fitting = with_room if fitting is None else fitting & with_room
        return set() if fitting is None else fitting


_OWN = attrgetter("own")
_SERVING = attrgetter("serving")
# A view per set of requested classes and whole_trees, of one copy.
class _View(Key[TreeView]):
    # classes: tuple[tuple[int, str], ...] ((id, name) of the requested classes)
    # whole_trees: bool
    __slots__ = ()


def _view_of(copy: ProviderCopy, usages: Usages, class_names: dict[int, str],
             whole_trees: bool) -> TreeView:
    """The view of the trees of ``copy`` for these classes, at ``usages``:
    the kept one (rebased), or a new one, kept for the next requests. Its
    size is counted again as it fills (by an eighth or more)."""
    key = _View(tuple(sorted(class_names.items())), whole_trees)
    kept = copy.kept.get(key)
    view = (kept.at(copy, usages) if kept is not None
            else TreeView(copy, usages, class_names, whole_trees))
    records = len(view.records)
    if view is not kept or records > view.counted_records + view.counted_records // 8:
        view.counted_records = records
        copy.kept.put(key, view, kept_bytes(0) + VIEW_BYTES * records)
    return view
