"""What capacity counts keep per provider copy: per resource class, the
holders of an inventory of it as flat rows (provider, root, capacity and
unit rules), made once per copy (``ProviderCopy.memo``, dropped with the
copy's indexes) so that a count is a loop over tuples, not over records."""

from __future__ import annotations

from typing import NamedTuple

from placement.candidates.memo import Key
from placement.candidates.provider_copy import ProviderCopy


class Row(NamedTuple):
    provider_id: int
    root_id: int
    capacity: int
    min_unit: int
    max_unit: int
    step_size: int


class _ClassRows(Key["tuple[Row, ...]"]):
    # class_id: int
    # serial: int (inventory totals change without moving the copy's
    # indexes, which the memo follows: the serial says which copy)
    __slots__ = ()


def class_rows(copy: ProviderCopy, class_id: int) -> tuple[Row, ...]:
    """The holders of ``class_id`` in id order, with their inventories."""
    def make() -> tuple[Row, ...]:
        providers = copy.providers
        rows = []
        for provider_id in sorted(copy.class_members.get(class_id, ())):
            provider = providers[provider_id]
            inventory = provider.inventories[class_id]
            rows.append(Row(provider_id, provider.root_id, inventory.capacity,
                            inventory.min_unit, inventory.max_unit, inventory.step_size))
        return tuple(rows)
    return copy.memo.get_or_make(_ClassRows(class_id, copy.serial), make)


def free_slots(rows: tuple[Row, ...], class_id: int, amount: int,
               used: dict[tuple[int, int], int]) -> dict[int, int]:
    """Provider id -> how many times ``amount`` of the class still fits
    there (0 where the unit rules refuse the amount: then it never fits)."""
    slots = {}
    get = used.get
    for provider_id, _, capacity, min_unit, max_unit, step_size in rows:
        if min_unit <= amount <= max_unit and amount % step_size == 0:
            free = capacity - get((provider_id, class_id), 0)
            slots[provider_id] = free // amount if free > 0 else 0
        else:
            slots[provider_id] = 0
    return slots
