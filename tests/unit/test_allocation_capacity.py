"""The capacity and unit rules of allocation writes, without a database."""

from __future__ import annotations

import pytest

from placement.objects import allocation as allocation_obj
from placement.objects.allocation import AllocationRefused, _Record
from placement.objects.inventory import InventoryUsage

PROVIDER = (1, "rp-uuid")
VCPU = (0, "VCPU")
KEY = (PROVIDER[0], VCPU[0])


def record(amount: int, consumer: str = "c1") -> _Record:
    return _Record(consumer, PROVIDER[0], PROVIDER[1], VCPU[0], VCPU[1], amount)


def inventory(total: int = 8, reserved: int = 0, min_unit: int = 1, max_unit: int = 8,
              step_size: int = 1, ratio: float = 1.0, used: int = 0) -> InventoryUsage:
    return InventoryUsage(total, reserved, min_unit, max_unit, step_size, ratio, used)


def check(records, inv: InventoryUsage | None, previously_used=None) -> None:
    allocation_obj._check_capacity(records, {KEY: inv} if inv else {}, previously_used or {})


def test_fits():
    check([record(8)], inventory())


@pytest.mark.parametrize("amount, constraints", [
    (1, {"min_unit": 2}),
    (9, {"max_unit": 8, "total": 16}),
    (3, {"step_size": 2}),
])
def test_unit_constraints(amount, constraints):
    with pytest.raises(AllocationRefused, match="would violate inventory constraints"):
        check([record(amount)], inventory(**constraints))


def test_missing_inventory():
    with pytest.raises(AllocationRefused,
                       match="Inventory for 'VCPU' on resource provider 'rp-uuid' invalid."):
        check([record(1)], None)


def test_capacity_uses_reserved_and_an_untruncated_ratio():
    # (3 - 1) * 1.25 = 2.5: 2 fits on top of nothing, 3 does not.
    check([record(2)], inventory(total=3, reserved=1, ratio=1.25))
    with pytest.raises(AllocationRefused, match="would exceed the capacity"):
        check([record(3)], inventory(total=3, reserved=1, ratio=1.25))


def test_capacity_counts_other_consumers():
    with pytest.raises(AllocationRefused, match="would exceed the capacity"):
        check([record(2)], inventory(used=7))


def test_capacity_counts_the_sum_of_the_request():
    records = [record(4, "c1"), record(4, "c2"), record(1, "c3")]
    with pytest.raises(AllocationRefused, match="would exceed the capacity"):
        check(records, inventory(max_unit=8))


def test_removals_are_not_checked():
    check([record(0), record(8)], inventory(min_unit=2))


def test_an_over_commit_may_shrink_or_stay():
    # Capacity 4, the consumer held 6 before the write.
    check([record(5)], inventory(total=4), previously_used={KEY: 6})
    check([record(6)], inventory(total=4), previously_used={KEY: 6})


def test_an_over_commit_may_not_grow():
    with pytest.raises(AllocationRefused, match="would exceed the capacity"):
        check([record(7)], inventory(total=4), previously_used={KEY: 6})


def test_an_over_commit_needs_a_previous_usage():
    with pytest.raises(AllocationRefused, match="would exceed the capacity"):
        check([record(5)], inventory(total=4, max_unit=8))
