"""The reshaper racing with other writers.

The client states each provider's generation and the reshaper checks it
once at the start. Every later compare-and-swap of that provider must
expect the generation that was checked (plus the reshaper's own bumps),
never one read again later: under READ COMMITTED (PostgreSQL) a re-read
shows what a concurrent writer committed in the meantime, and a
compare-and-swap from that value would silently overwrite its change.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from oslo_db import exception as db_exc

from placement.db import tables
from placement.objects import allocation as allocation_obj
from placement.objects import consumer as consumer_obj
from placement.objects import inventory as inventory_obj
from placement.objects import reshaper as reshaper_obj
from tests.fixtures.seed import add_allocation, add_inventory, provider_with

ROOT_UUID = str(uuid.uuid4())
OTHER_UUID = str(uuid.uuid4())
CONSUMER_UUID = str(uuid.uuid4())


@pytest.fixture
def database(database):
    with database.db.writer() as connection:
        provider_with(connection, ROOT_UUID, "root", VCPU=8)
        provider_with(connection, OTHER_UUID, "other")
    return database.db


def _generations(db) -> dict[str, int]:
    providers = tables.resource_providers
    with db.reader() as connection:
        return dict(connection.execute(sa.select(providers.c.uuid, providers.c.generation)).all())


def _inventory(total: int) -> list[inventory_obj.Inventory]:
    return [inventory_obj.Inventory.from_fields("VCPU", {"total": total})]


def _allocation_on_root() -> allocation_obj.ConsumerAllocations:
    return allocation_obj.ConsumerAllocations(
        consumer_uuid=CONSUMER_UUID, allocations={ROOT_UUID: {"VCPU": 2}},
        owner=consumer_obj.Owner("project", "user"), check_generation=True)


def _commit_concurrently_after_check(monkeypatch, provider_uuid: str) -> None:
    """Right after the reshaper checked the client's generations (it then
    prepares the consumers), another writer bumps the provider, and what
    the reshaper reads from then on shows it, as READ COMMITTED would."""
    real_prepare = allocation_obj.prepare

    def prepare_after_concurrent_commit(connection, requests):
        connection.execute(
            sa.update(tables.resource_providers)
            .where(tables.resource_providers.c.uuid == provider_uuid)
            .values(generation=tables.resource_providers.c.generation + 1))
        return real_prepare(connection, requests)

    monkeypatch.setattr(allocation_obj, "prepare", prepare_after_concurrent_commit)


@pytest.mark.parametrize("new_inventory", [_inventory(16), []],
                         ids=["interim-and-final", "final-only"])
def test_provider_changed_after_the_check_is_a_conflict(database, monkeypatch,
                                                        new_inventory):
    _commit_concurrently_after_check(monkeypatch, ROOT_UUID)

    with pytest.raises(allocation_obj.ProviderGenerationRace):
        reshaper_obj.reshape(
            database, [reshaper_obj.ProviderInventories(ROOT_UUID, 0, new_inventory)], [])

    assert _generations(database) == {ROOT_UUID: 0, OTHER_UUID: 0}


def test_provider_in_inventories_and_allocations_changed_after_the_check(
        database, monkeypatch):
    """Also through the allocation write in the middle, which must not read
    the provider's generation again either: the consumer gives up what it
    holds on OTHER, whose inventory goes (empty list, so no interim step)."""
    providers = tables.resource_providers
    with database.writer() as connection:
        other_id = connection.execute(sa.select(providers.c.id)
                                      .where(providers.c.uuid == OTHER_UUID)).scalar()
        add_inventory(connection, other_id, "VCPU", 4)
        add_allocation(connection, other_id, "VCPU", CONSUMER_UUID, 1)
    _commit_concurrently_after_check(monkeypatch, OTHER_UUID)
    emptied = allocation_obj.ConsumerAllocations(
        consumer_uuid=CONSUMER_UUID, allocations={},
        owner=consumer_obj.Owner("project", "user"), check_generation=True, generation=0)

    with pytest.raises(allocation_obj.ProviderGenerationRace):
        reshaper_obj.reshape(
            database, [reshaper_obj.ProviderInventories(OTHER_UUID, 0, [])], [emptied])

    assert _generations(database) == {ROOT_UUID: 0, OTHER_UUID: 0}


def test_generations_without_a_race(database):
    """The reference counts: interim +1, allocations +1, final +1."""
    reshaper_obj.reshape(
        database,
        [reshaper_obj.ProviderInventories(ROOT_UUID, 0, _inventory(8)),
         reshaper_obj.ProviderInventories(OTHER_UUID, 0, [])],
        [_allocation_on_root()])

    assert _generations(database) == {ROOT_UUID: 3, OTHER_UUID: 1}


def test_lost_race_creating_a_project_is_run_again(database, monkeypatch):
    """Another request inserted the same project (or user, type, consumer)
    first: the attempt fails on the unique key and runs again in a new
    transaction, where that row is visible."""
    real_id_for_name = consumer_obj._id_for_name
    calls = []

    def id_for_name_losing_once(connection, table, column, value):
        calls.append(connection.get_transaction())
        if len(calls) == 1:
            raise db_exc.DBDuplicateEntry(columns=[column.name], value=value)
        return real_id_for_name(connection, table, column, value)

    monkeypatch.setattr(consumer_obj, "_id_for_name", id_for_name_losing_once)

    reshaper_obj.reshape(
        database, [reshaper_obj.ProviderInventories(ROOT_UUID, 0, _inventory(8))],
        [_allocation_on_root()])

    assert calls[0] is not calls[1]
    assert _generations(database)[ROOT_UUID] == 3
