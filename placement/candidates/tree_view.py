"""``TreeView``: the trees of the provider copy as requests of one set of
classes search them (each tree's members, every provider's search record
with its usages), at one usages snapshot, kept between requests.

A request's world (``copy_world.CopyWorld``) takes the trees it searches
from the view of its classes. Requests of other filters visit other
trees, in other batches: the view holds every tree some request of those
classes loaded, so that a request of new filters finds most of its trees
made. A view is made lazily, a tree or a provider when first asked for,
and follows the usages by snapshot: a request seeing other usages takes
the view rebased on them (``at``), which drops only what was made from
the providers whose usage changed (the snapshots' shards tell which), and
shares all the rest.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable

from placement.candidates.batches import TreeMembers
from placement.candidates.kept import MEMBER_BYTES, MEMBERS_BYTES, RECORD_BYTES
from placement.candidates.memo import Key
from placement.candidates.model import Provider
from placement.candidates.provider_copy import CachedProvider, ProviderCopy
from placement.candidates.usage_mirror import Usages
from placement.objects.inventory import InventoryUsage


class SearchRecordKey(Key["tuple[tuple[int, ...], Provider, bool]"]):
    """The search record of a provider (a provider's memo), with the usages
    of the requested classes it was made with (() when none is used), and
    whether those are all the classes it has."""
    # classes: tuple[tuple[int, str], ...] ((id, name) of the requested classes)
    __slots__ = ()


class MembersKey(Key["tuple[int, TreeMembers]"]):
    """The members of a root (a root's memo, ``TreeView._members_of``),
    with the ``places`` of the copy they were found in."""
    # class_ids: frozenset[int] | None (None: whole trees are searched)
    __slots__ = ()


class _ServingSets(Key["dict[tuple[int, ...], tuple[int, ...]]"]):
    """Each set of sharing providers serving some trees, as one tuple (a
    copy's memo: the trees' kept members share it)."""
    __slots__ = ()


class Lazy(dict):
    """A dict making each missing value with ``make(key)`` when first asked;
    ``make`` is a method of the dict's owner. The dict holds its owner
    weakly: an owner holding its own lazy dicts would be a reference cycle,
    freed only by the garbage collector's rare full collections (see
    deploy.GC_THRESHOLDS), and a world or a view holds megabytes at 20 000
    computes."""

    __slots__ = ("_owner", "_make")

    def __init__(self, make: Callable[[int], object]):
        super().__init__()
        self._owner = weakref.ref(make.__self__)  # type: ignore[attr-defined]
        self._make = make.__func__  # type: ignore[attr-defined]

    def __missing__(self, key: int) -> object:
        value = self[key] = self._make(self._owner(), key)
        return value


# Past this many providers whose usage changed (and an eighth of those a
# view holds), rebasing a view costs more than making its trees again.
_FEWEST_TO_START_AGAIN = 256


class TreeView:
    """The trees of ``copy`` as requests of ``class_names`` (id -> name)
    search them, at ``usages``: ``member_ids`` (root -> TreeMembers),
    ``records`` (provider -> search record), ``members`` (root -> the
    records of its members, in id order), each made when first asked for.
    Providers carry the inventories of the requested classes; providers
    without a requested class matter only to resourceless groups and
    same_subtree, so whole trees are taken only when ``whole_trees``."""

    def __init__(self, copy: ProviderCopy, usages: Usages, class_names: dict[int, str],
                 whole_trees: bool, serving_roots: dict[tuple[int, ...], set[int]] | None = None):
        # weakly: a view kept past its copy (its class set not asked since)
        # must not hold a copy of the whole cloud
        self._copy = weakref.ref(copy)
        self._places = copy.places
        self.usages = usages
        self._class_names = class_names
        self._whole_trees = whole_trees
        # the search records of providers without usage depend on the
        # classes only: they are kept with the cached provider
        self.record_key = SearchRecordKey(tuple(sorted(class_names.items())))
        self.members_key = MembersKey(None if whole_trees else frozenset(class_names))
        self.member_ids: dict[int, TreeMembers] = Lazy(self._members_of)
        self.records: dict[int, Provider] = Lazy(self._new_record)
        # provider id -> the copy's record each search record was made from
        self._made_from: dict[int, CachedProvider] = {}
        self.members: dict[int, list[Provider]] = Lazy(self._new_members)
        # the requested classes by name, and provider id -> the most of each
        # it can give (``_room``)
        self.class_order = tuple(sorted(class_names.values()))
        self.rooms: dict[int, tuple[int, ...] | None] = Lazy(self._room)
        # provider id -> the usages of every class it has, in the order of
        # its inventories (() when none is used), for the records that hold
        # every class: summaries are kept by them
        self.all_usages: dict[int, tuple[int, ...]] = {}
        # serving set -> the records of its providers
        self._serving_records: dict[tuple[int, ...], list[Provider]] = {}
        # serving set -> the roots whose members hold it, shared by the
        # views rebased from one another (only added to: a root too many
        # costs a member list made again)
        self._serving_roots = {} if serving_roots is None else serving_roots
        # how many records the kept store counts the view's size by
        self.counted_records = 0

    @property
    def copy(self) -> ProviderCopy:
        copy = self._copy()
        if copy is None:
            raise ReferenceError("a tree view asked for after its copy")
        return copy

    def at(self, copy: ProviderCopy, usages: Usages) -> TreeView:
        """This view for ``copy`` and ``usages``: itself when they are its
        own; else a new one sharing what neither the providers whose usage
        changed nor those ``copy`` holds other records of made (a copy
        whose trees stand where they stood: an inventory or a trait
        changed), or nothing at all (trees moved)."""
        if copy is self._copy() and usages is self.usages:
            return self
        same_places = copy.places == self._places
        view = TreeView(copy, usages, self._class_names, self._whole_trees,
                        self._serving_roots if same_places else None)
        if not same_places:
            return view
        changed = set() if usages is self.usages else usages.changed_since(self.usages)
        made_from = list(self._made_from.items())  # at once: other threads add to it
        if copy is not self._copy():
            providers = copy.providers
            changed.update(provider_id for provider_id, cached in made_from
                           if providers.get(provider_id) is not cached)
        if len(changed) > max(_FEWEST_TO_START_AGAIN, len(made_from) // 8):
            return view
        view.member_ids.update(self.member_ids)  # the trees stand where they stood
        records, all_usages, members = view.records, view.all_usages, view.members
        records.update(self.records)
        view._made_from.update(made_from)
        all_usages.update(self.all_usages)
        members.update(self.members)
        view.rooms.update(self.rooms)
        stale_roots = set()
        for provider_id in changed:
            view.rooms.pop(provider_id, None)
            cached = view._made_from.pop(provider_id, None)
            if cached is not None:
                records.pop(provider_id, None)
                all_usages.pop(provider_id, None)
                stale_roots.add(cached.root_id)
        for serving in list(self._serving_roots):
            if changed.isdisjoint(serving):
                if serving in self._serving_records:
                    view._serving_records[serving] = self._serving_records[serving]
            else:
                stale_roots.update(list(self._serving_roots[serving]))
        for root_id in stale_roots:
            members.pop(root_id, None)
        return view

    def _members_of(self, root_id: int) -> TreeMembers:
        """The providers of the tree of ``root_id`` the search may use, and
        the sharing providers serving it (kept with the root while the
        copy's indexes stay the same)."""
        copy = self.copy
        root = copy.providers[root_id]
        kept = root.memo.get(self.members_key)
        if kept is not None and kept[0] == copy.places:
            members = kept[1]
        else:
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
            copy.remember(root, self.members_key, (copy.places, members),
                          MEMBERS_BYTES + MEMBER_BYTES * (len(own) + len(serving)))
        if members.serving:
            self._serving_roots.setdefault(members.serving, set()).add(root_id)
        return members

    def _serving_of(self, serving: tuple[int, ...]) -> tuple[int, ...]:
        """``serving``, as the one tuple of these ids the copy's trees
        share (their kept members hold it once)."""
        if not serving:
            return ()
        interned = self.copy.memo.get_or_make(_ServingSets(), dict)
        return interned.setdefault(serving, serving)

    def _useful(self, provider_id: int) -> bool:
        """Can the provider be a member of a tree searched: does it have a
        requested class (any provider, when whole trees are searched)?"""
        return self._whole_trees or not self._class_names.keys().isdisjoint(
            self.copy.providers[provider_id].inventories)

    @functools.cached_property
    def _useful_sharing(self) -> frozenset[int]:
        copy = self.copy
        return (copy.sharing if self._whole_trees
                else copy.sharing_with(frozenset(self._class_names)))

    def serving_records(self, serving: tuple[int, ...]) -> list[Provider]:
        """The records of a serving set, one list for every tree it serves."""
        records = self._serving_records.get(serving)
        if records is None:
            records = self._serving_records[serving] = [
                self.records[provider_id] for provider_id in serving]
        return records

    def _new_members(self, root_id: int) -> list[Provider]:
        """The search records of a tree's members, in id order."""
        tree = self.member_ids[root_id]
        records = self.records
        if tree.interleaved is not None:
            return [records[provider_id] for provider_id in tree.interleaved]
        own = [records[provider_id] for provider_id in tree.own]
        return own + self.serving_records(tree.serving) if tree.serving else own

    def _room(self, provider_id: int) -> tuple[int, ...] | None:
        """The most of each requested class (``class_order``) one group can
        take from the provider: its room, within its max_unit (0 without
        the class); None when a class has other unit rules (a min_unit or
        step_size above 1: ``InventoryUsage.fits`` then decides)."""
        inventories = self.records[provider_id].inventories
        room = []
        for class_name in self.class_order:
            inventory = inventories.get(class_name)
            if inventory is None:
                room.append(0)
            elif inventory.min_unit != 1 or inventory.step_size != 1:
                return None
            else:
                room.append(min(inventory.capacity - inventory.used, inventory.max_unit))
        return tuple(room)

    def _new_record(self, provider_id: int) -> Provider:
        """The search record of a provider, with its usages. It depends on
        the requested classes and their usages only: it is kept with the
        cached provider, and made again once one of them moved (a claim
        changes a few providers, every request reads thousands)."""
        cached = self.copy.providers[provider_id]
        class_names = self._class_names
        used = dict(self.usages.of_provider(provider_id))
        usages = tuple([used.get(class_id, 0) for class_id in cached.inventories
                        if class_id in class_names]) if used else ()
        if not any(usages):
            usages = ()
        # were the usages of every class of the provider read?
        whole = class_names.keys() >= cached.inventories.keys()
        kept = cached.memo.get(self.record_key)
        if kept is not None and kept[0] == usages:
            record = kept[1]
        else:
            record = Provider(provider_id, cached.uuid, cached.parent_id, cached.root_id, {
                class_names[class_id]: _with_usage(inventory_usage, used.get(class_id, 0))
                for class_id, inventory_usage in cached.inventories.items()
                if class_id in class_names}, cached.traits, cached.aggregates)
            self.copy.remember(cached, self.record_key, (usages, record, whole), RECORD_BYTES)
        self._made_from[provider_id] = cached
        if whole:
            self.all_usages[provider_id] = usages
        return record


def _with_usage(inventory_usage: InventoryUsage, used: int) -> InventoryUsage:
    # the copy's records are shared between requests: never changed in place
    return inventory_usage.with_used(used) if used else inventory_usage
