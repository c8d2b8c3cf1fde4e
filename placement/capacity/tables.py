"""What capacity counts keep per provider copy (``ProviderCopy.memo``,
dropped with the copy's indexes), so that a count is a few loops at C
speed over flat tuples rather than a look at each provider record:

* per resource class, and per filter of a request group (traits,
  aggregates, in_tree), the holders of an inventory of it that pass the
  filter, asked once of the engine's own checks (``eligible``);
* their capacities as parallel tuples, the roots' own rows first
  (``ClassTable``), for the copy's serial (inventory totals change it).

Usages are read once (per scrape), by class (``placement.capacity.usages``)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from itertools import repeat
from operator import floordiv, sub
from typing import NamedTuple

from placement.candidates.memo import Key
from placement.candidates.provider_copy import ProviderCopy

# (provider id, class id) -> used
Used = dict[tuple[int, int], int]


class ClassTable(NamedTuple):
    """The holders of one class passing one filter: the roots' own rows
    (a provider that is its tree's root) first, then the others."""

    provider_ids: tuple[int, ...]
    root_ids: tuple[int, ...]
    capacities: tuple[int, ...]
    own_rows: int  # how many rows are roots' own
    max_units: tuple[int, ...]
    # the smallest max_unit: amounts up to it pass every max_unit
    max_unit_floor: int
    # (row, min_unit, max_unit, step_size) of the rows with other unit rules
    # than an amount up to max_unit_floor passes (min_unit or step_size > 1)
    unusual: tuple[tuple[int, int, int, int], ...]
    # provider id -> its row
    rows: dict[int, int]


class _Table(Key[ClassTable]):
    # class_id: int
    # serial: int (the copy's: inventories may change without moving it)
    # filter: tuple | None (the key of the group's filter; None: none)
    __slots__ = ()


class _Eligible(Key[frozenset[int]]):
    # class_id: int
    # filter: tuple (the key of the group's filter)
    # places: int, traits_serial: int (what the filter reads of the copy)
    __slots__ = ()


def class_table(copy: ProviderCopy, class_id: int, filter_key: tuple | None = None,
                passes: Callable[[object, object], bool] | None = None) -> ClassTable:
    """The holders of ``class_id`` passing ``passes`` (the engine's check
    of a provider serving its own tree; None: every holder), made once
    per copy and filter."""
    def make() -> ClassTable:
        holders = copy.class_members.get(class_id, frozenset())
        if passes is not None:
            holders = _eligible(copy, class_id, filter_key, passes)
        providers = copy.providers
        ordered = sorted(holders, key=lambda provider_id: (
            providers[provider_id].root_id != provider_id, provider_id))
        inventories = [providers[provider_id].inventories[class_id] for provider_id in ordered]
        return ClassTable(
            tuple(ordered), tuple(providers[provider_id].root_id for provider_id in ordered),
            tuple(inventory.capacity for inventory in inventories),
            sum(providers[provider_id].root_id == provider_id for provider_id in ordered),
            tuple(inventory.max_unit for inventory in inventories),
            min((inventory.max_unit for inventory in inventories), default=0),
            tuple((row, inventory.min_unit, inventory.max_unit, inventory.step_size)
                  for row, inventory in enumerate(inventories)
                  if inventory.min_unit != 1 or inventory.step_size != 1),
            dict(zip(ordered, range(len(ordered)), strict=True)))
    return copy.memo.get_or_make(_Table(class_id, copy.serial, filter_key), make)


def _eligible(copy: ProviderCopy, class_id: int, filter_key: tuple,
              passes: Callable[[object, object], bool]) -> frozenset[int]:
    providers = copy.providers
    return copy.memo.get_or_make(
        _Eligible(class_id, filter_key, copy.places, copy.traits_serial),
        lambda: frozenset(
            provider_id for provider_id in copy.class_members.get(class_id, ())
            if passes(providers[provider_id], providers[providers[provider_id].root_id])))


def free_room(table: ClassTable, used: dict[int, int]) -> list[int]:
    """Per row of ``table``, the room left (never below 0: overcommitted
    inventories have none)."""
    if 2 * len(used) > len(table.provider_ids):
        # most holders used: every row looked up, at C speed
        return list(map(max, map(sub, table.capacities, map(
            used.get, table.provider_ids, repeat(0))), repeat(0)))
    room = list(table.capacities)
    rows = table.rows
    for provider_id, amount in used.items():
        row = rows.get(provider_id)
        if row is not None:
            room[row] = max(0, room[row] - amount)
    return room


def free_slots(table: ClassTable, used: dict[int, int], amount: int,
               drained: Collection[int] = (), room: list[int] | None = None) -> list[int]:
    """Per row of ``table``, how many times ``amount`` still fits there
    (0 where a unit rule refuses the amount, or the provider is drained);
    ``room``: ``free_room`` of the table, when known."""
    if room is None:
        room = free_room(table, used)
    slots = list(map(floordiv, room, repeat(amount)))
    if amount > table.max_unit_floor:
        for row, inventory_max in enumerate(table.max_units):
            if amount > inventory_max:
                slots[row] = 0
    for row, min_unit, max_unit, step_size in table.unusual:
        if not (min_unit <= amount <= max_unit and amount % step_size == 0):
            slots[row] = 0
    if drained:
        for row, provider_id in enumerate(table.provider_ids):
            if provider_id in drained:
                slots[row] = 0
    return slots
