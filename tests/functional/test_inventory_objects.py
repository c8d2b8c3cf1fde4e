"""The inventory, resource class and usage objects against a real database:
the parts other areas (allocations, reshaper) build on."""

from __future__ import annotations

import uuid as uuid_lib

import pytest

from placement import exceptions
from placement.objects import inventory, resource_class, resource_provider, usage
from placement.objects.inventory import Inventory
from tests.fixtures.seed import add_allocation, add_consumer, add_inventory, create_provider

UUID = "8a81a4a5-6a5f-4b8a-9b0c-4c7a2f1b2e3d"
CONSUMER = "1f0e6f0c-1d3c-4b59-9a43-5a0e3e1f6c11"


@pytest.fixture
def db(database):
    with database.db.writer() as connection:
        provider_id = create_provider(connection, UUID, "provider")
        add_inventory(connection, provider_id, "VCPU", 8, max_unit=8)
        add_inventory(connection, provider_id, "DISK_GB", 100, max_unit=100)
        add_consumer(connection, CONSUMER, "project", "user", generation=1)
        add_allocation(connection, provider_id, "VCPU", CONSUMER, 2)
    return database.db


def _provider(connection):
    return resource_provider.get_by_uuid(connection, UUID)


def test_replace_adds_updates_deletes_and_bumps_generation(db):
    with db.writer() as connection:
        inventory.replace_inventories(connection, _provider(connection), [
            Inventory("VCPU", 4), Inventory("MEMORY_MB", 1024, reserved=512)])
    with db.reader() as connection:
        provider = _provider(connection)
        stored = inventory.get_all(connection, provider)
    assert provider.generation == 1
    assert list(stored) == ["VCPU", "MEMORY_MB"]
    assert stored["VCPU"] == Inventory("VCPU", 4)
    assert stored["VCPU"].updated_at is not None
    assert stored["MEMORY_MB"] == Inventory("MEMORY_MB", 1024, reserved=512)


def test_replace_refuses_to_drop_used_class_and_rolls_back(db):
    with pytest.raises(inventory.InventoryInUse) as error, db.writer() as connection:
        inventory.replace_inventories(connection, _provider(connection), [])
    assert str(error.value) == f"Inventory for 'VCPU' on resource provider '{UUID}' in use."
    with db.reader() as connection:
        provider = _provider(connection)
        assert provider.generation == 0
        assert list(inventory.get_all(connection, provider)) == ["VCPU", "DISK_GB"]


def test_replace_with_unknown_class(db):
    with pytest.raises(resource_class.ResourceClassNotFound), db.writer() as connection:
        inventory.replace_inventories(connection, _provider(connection),
                                      [Inventory("CUSTOM_NOPE", 1)])


def test_stale_provider_is_a_concurrent_update(db):
    with db.reader() as connection:
        stale = _provider(connection)
    with db.writer() as connection:
        inventory.add(connection, _provider(connection), Inventory("MEMORY_MB", 10))
    with pytest.raises(exceptions.ConcurrentUpdate), db.writer() as connection:
        inventory.replace_inventories(connection, stale, [Inventory("VCPU", 8)])
    with db.reader() as connection:
        provider = _provider(connection)
        assert provider.generation == 1
        assert "MEMORY_MB" in inventory.get_all(connection, provider)


def test_add_existing_class(db):
    with pytest.raises(inventory.InventoryExists), db.writer() as connection:
        inventory.add(connection, _provider(connection), Inventory("VCPU", 1))


def test_update_missing_inventory(db):
    with pytest.raises(inventory.InventoryNotFound), db.writer() as connection:
        inventory.update(connection, _provider(connection), Inventory("MEMORY_MB", 1))


def test_delete_used_and_unused(db):
    with pytest.raises(inventory.InventoryInUse), db.writer() as connection:
        inventory.delete(connection, _provider(connection), "VCPU")
    with db.writer() as connection:
        inventory.delete(connection, _provider(connection), "DISK_GB")
    with pytest.raises(inventory.InventoryNotFound), db.writer() as connection:
        inventory.delete(connection, _provider(connection), "DISK_GB")
    with db.reader() as connection:
        provider = _provider(connection)
        assert provider.generation == 1
        assert list(inventory.get_all(connection, provider)) == ["VCPU"]


def test_provider_usages(db):
    with db.reader() as connection:
        provider = _provider(connection)
        assert usage.get_provider_usages(connection, provider.uuid) == (
            provider.generation, {"VCPU": 2, "DISK_GB": 0})
        with pytest.raises(exceptions.NotFound):
            usage.get_provider_usages(connection, str(uuid_lib.uuid4()))


def test_custom_class_ids_start_at_10000_and_follow_the_highest(db):
    with db.writer() as connection:
        first = resource_class.create(connection, "CUSTOM_A")
        second = resource_class.create(connection, "CUSTOM_B")
    assert (first.id, second.id) == (10000, 10001)
    with db.writer() as connection:
        resource_class.delete(connection, first)
        third = resource_class.create(connection, "CUSTOM_C")
    assert third.id == 10002
    with pytest.raises(resource_class.ResourceClassExists), db.writer() as connection:
        resource_class.create(connection, "CUSTOM_B")
