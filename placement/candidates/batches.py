"""Trees as the search loads them: a tree's members (``TreeMembers``), and
the first batches of trees kept between requests of one set of classes
(``KeptBatch``), with the room left in their roots by class
(``RootCapacities``) to answer which roots fit at once."""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import NamedTuple

from placement.candidates.memo import Key
from placement.candidates.model import Provider
from placement.candidates.usage_mirror import Usages


class BatchKey(Key["KeptBatch | bool"]):
    """What is kept of a first batch of trees, for requests of one set of
    classes (True: only seen once, see
    KeptStore.keep_once_asked_before)."""
    # record_key: tree_view.SearchRecordKey (the requested classes)
    # members_key: tree_view.MembersKey (whole trees or not)
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


class KeptBatch:
    """A first batch of trees, the providers of its trees and the
    snapshot of usages it was loaded from (``usages``): it holds while no
    provider changed (the copy's serial) and the usages of its providers
    are those of ``usages``. ``capacities``: what ``RootCapacities`` found
    of its roots, by class name."""

    __slots__ = ("serial", "batch", "usages", "provider_ids", "capacities")

    def __init__(self, serial: int, batch: list[int], usages: Usages,
                 provider_ids: frozenset[int]):
        self.serial = serial
        self.batch = batch
        self.usages = usages
        self.provider_ids = provider_ids
        self.capacities: dict[str, RootCapacities | None] = {}


class RootCapacities:
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
    def of(cls, batch: list[int], records: Mapping[int, Provider], class_name: str
           ) -> RootCapacities | None:
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
