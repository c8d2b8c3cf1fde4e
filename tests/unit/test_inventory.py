"""The capacity rule and the validation of inventory records."""

from __future__ import annotations

import hypothesis
import jsonschema
import pytest
from hypothesis import strategies as st

from placement.objects import inventory
from placement.objects.inventory import Inventory
from placement.schemas import inventory as schema

UUID = "8a81a4a5-6a5f-4b8a-9b0c-4c7a2f1b2e3d"


@pytest.mark.parametrize(("total", "reserved", "ratio", "expected"), [
    (10, 0, 1.0, 10),
    (10, 2, 16.0, 128),
    (10, 3, 1.5, 10),       # 10.5 truncated
    (3, 0, 0.5, 1),         # 1.5 truncated
    (10, 10, 1.0, 0),
    (10, 11, 1.0, -1),
    (10, 0, 0.0, 0),
    (10, 0, -1.0, -10),     # the schema sets no minimum ratio
])
def test_capacity(total, reserved, ratio, expected):
    assert inventory.capacity(total, reserved, ratio) == expected
    assert Inventory("VCPU", total, reserved=reserved, allocation_ratio=ratio).capacity == expected


def test_defaults():
    record = Inventory.from_fields("DISK_GB", {"total": 5})
    assert record.fields() == {"total": 5, "reserved": 0, "min_unit": 1,
                               "max_unit": 2147483647, "step_size": 1,
                               "allocation_ratio": 1.0}


def test_from_fields_ignores_what_is_no_inventory_field():
    record = Inventory.from_fields("DISK_GB", {
        "total": 5, "resource_provider_generation": 7, "resource_class": "DISK_GB"})
    assert record == Inventory("DISK_GB", 5)


def test_ratio_is_shown_as_float():
    ratio = Inventory.from_fields("VCPU", {"total": 5, "allocation_ratio": 16}).fields()[
        "allocation_ratio"]
    assert ratio == 16.0
    assert isinstance(ratio, float)


def test_no_cross_field_validation():
    # min_unit > max_unit > total is accepted: only capacity is checked.
    record = Inventory("VCPU", 4, min_unit=10, max_unit=8)
    inventory.check_capacity(UUID, [record], reserved_may_equal_total=False)


@pytest.mark.parametrize("reserved_may_equal_total", [False, True])
def test_capacity_left_is_accepted(reserved_may_equal_total):
    inventory.check_capacity(UUID, [Inventory("VCPU", 4, reserved=3)],
                             reserved_may_equal_total=reserved_may_equal_total)


def test_reserved_equal_total_refused_before_1_26():
    with pytest.raises(inventory.InvalidCapacity) as error:
        inventory.check_capacity(UUID, [Inventory("DISK_GB", 10), Inventory("VCPU", 4, reserved=4)],
                                 reserved_may_equal_total=False)
    assert str(error.value) == (
        f"Invalid inventory for 'VCPU' on resource provider '{UUID}'. "
        "The reserved value is greater than or equal to total.")


def test_zero_ratio_refused_before_1_26():
    with pytest.raises(inventory.InvalidCapacity):
        inventory.check_capacity(UUID, [Inventory("VCPU", 4, allocation_ratio=0.0)],
                                 reserved_may_equal_total=False)


def test_reserved_equal_total_accepted_from_1_26():
    inventory.check_capacity(UUID, [Inventory("VCPU", 4, reserved=4)],
                             reserved_may_equal_total=True)


def test_reserved_above_total_refused_from_1_26():
    with pytest.raises(inventory.InvalidCapacity) as error:
        inventory.check_capacity(UUID, [Inventory("VCPU", 4, reserved=5)],
                                 reserved_may_equal_total=True)
    assert str(error.value) == (
        f"Invalid inventory for 'VCPU' on resource provider '{UUID}'. "
        "The reserved value is greater than total.")


def _error(instance, body_schema) -> str:
    with pytest.raises(jsonschema.ValidationError) as error:
        jsonschema.validate(instance, body_schema)
    return str(error.value)


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("total", 0, "0 is less than the minimum of 1"),
    ("total", 2147483648, "Failed validating 'maximum' in schema['properties']['total']"),
    ("reserved", -1, "-1 is less than the minimum of 0"),
    ("min_unit", 0, "Failed validating 'minimum' in schema['properties']['min_unit']"),
    ("max_unit", 0, "Failed validating 'minimum' in schema['properties']['max_unit']"),
    ("step_size", 0, "Failed validating 'minimum' in schema['properties']['step_size']"),
    ("allocation_ratio", 3.40282e+39, "Failed validating 'maximum'"),
    ("total", "5", "'5' is not of type 'integer'"),
])
def test_record_limits(field, value, fragment):
    body = {"total": 5, "resource_provider_generation": 1, field: value}
    assert fragment in _error(body, schema.PUT_INVENTORY)


def test_put_one_requires_generation():
    assert "'resource_provider_generation' is a required property" in _error(
        {"total": 5}, schema.PUT_INVENTORY)


def test_post_requires_class_and_ignores_generation():
    assert "'resource_class' is a required property" in _error({"total": 5}, schema.POST_INVENTORY)
    jsonschema.validate({"total": 5, "resource_class": "VCPU", "resource_provider_generation": 3},
                        schema.POST_INVENTORY)


def test_put_all_validates_only_class_name_keys():
    body = {"resource_provider_generation": 1,
            "inventories": {"VCPU": {"total": 1}, "lower": {"anything": True}}}
    jsonschema.validate(body, schema.PUT_INVENTORIES)
    body["inventories"]["VCPU"] = {"reserved": 1}
    assert "'total' is a required property" in _error(body, schema.PUT_INVENTORIES)


@hypothesis.given(
    total=st.integers(0, 40), reserved=st.integers(0, 10), used=st.integers(0, 40),
    min_unit=st.integers(1, 8), max_unit=st.integers(1, 40), step_size=st.integers(1, 6),
    ratio=st.sampled_from([0.5, 1.0, 1.5, 4.0]), amount=st.integers(1, 50))
def test_misfit_names_a_reason_exactly_when_the_amount_does_not_fit(
        total, reserved, used, min_unit, max_unit, step_size, ratio, amount):
    usage = inventory.InventoryUsage(total, reserved, min_unit, max_unit, step_size, ratio, used)
    reason = usage.misfit(amount)
    fits = (used + amount <= usage.capacity and min_unit <= amount <= max_unit
            and amount % step_size == 0)
    assert (reason is None) == fits
    assert (usage.unit_misfit(amount) is None) == (min_unit <= amount <= max_unit
                                                   and amount % step_size == 0)
    if reason == "capacity":
        assert used + amount > usage.capacity
    elif reason is not None:
        # the capacity is enough: the named unit rule is the one broken
        assert used + amount <= usage.capacity
        assert {"max_unit": amount > max_unit, "min_unit": amount < min_unit,
                "step_size": amount % step_size != 0}[reason]


@hypothesis.given(st.integers(0, 20), st.integers(0, 5), st.integers(1, 4), st.integers(1, 20),
       st.integers(1, 3), st.sampled_from([0.5, 1.0, 1.5, 16.0]), st.integers(0, 30),
       st.integers(0, 25))
def test_fits_is_no_misfit(total, reserved, min_unit, max_unit, step_size, ratio, used, amount):
    """``fits``, the search's fast check, says what ``misfit`` says."""
    record = inventory.InventoryUsage(total, reserved, min_unit, max_unit, step_size, ratio, used)
    assert record.fits(amount) == (record.misfit(amount) is None)
