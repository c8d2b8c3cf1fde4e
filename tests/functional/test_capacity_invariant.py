"""Capacity is an invariant of the database (placement.db.triggers): an
allocation row that takes an inventory's usage past ``(total - reserved) *
allocation_ratio`` is refused by the database itself, whoever writes it
(here: raw SQL, as an operator, a restored backup or another service would
write), on every backend. Rows that remove usage are never refused, and
the API still lets an inventory already over capacity shrink, move and
empty, never grow."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from placement.db import tables, triggers
from placement.objects import allocation as allocation_obj
from tests.db import FreshDatabase
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import PROJECT, ProviderApi, in_process

VCPU = 0  # the standard class ids of the tests' classes
MEMORY_MB = 1


def _provider(database: FreshDatabase, name: str, vcpu: int, ratio: float = 1.0
              ) -> tuple[ProviderApi, str, int]:
    """A provider with ``vcpu`` VCPU at ``ratio`` and 4096 MEMORY_MB, made
    through the API; its uuid and id."""
    api = ProviderApi(in_process(build_app(database)))
    provider_uuid = api.provider(name)
    api.call("PUT", f"/resource_providers/{provider_uuid}/inventories", {
        "resource_provider_generation": api.generation(provider_uuid),
        "inventories": {"VCPU": {"total": vcpu, "allocation_ratio": ratio},
                        "MEMORY_MB": {"total": 4096}}})
    with database.db.reader() as connection:
        provider_id = connection.scalar(sa.select(tables.resource_providers.c.id).where(
            tables.resource_providers.c.uuid == provider_uuid))
    return api, provider_uuid, provider_id


def _state(database: FreshDatabase) -> tuple[dict, dict]:
    """Every allocation row (consumer, provider, class) -> used, and every
    inventory's kept usage."""
    with database.db.reader() as connection:
        rows = {(row.consumer_id, row.resource_provider_id, row.resource_class_id): row.used
                for row in connection.execute(sa.select(tables.allocations))}
        used = {(row.resource_provider_id, row.resource_class_id): row.used
                for row in connection.execute(sa.select(tables.inventories))}
    return rows, used


def _sql(database: FreshDatabase, statement: sa.Executable) -> None:
    with database.db.engine.begin() as connection:
        connection.execute(statement)


def _refused(database: FreshDatabase, statement: sa.Executable) -> None:
    """``statement`` fails for capacity, and changes nothing."""
    before = _state(database)
    with pytest.raises(Exception) as error:
        _sql(database, statement)
    assert triggers.refused_over_capacity(error.value), error.value
    assert _state(database) == before


def _insert(consumer: str, provider_id: int, used: int, class_id: int = VCPU) -> sa.Executable:
    return sa.insert(tables.allocations).values(
        consumer_id=consumer, resource_provider_id=provider_id, resource_class_id=class_id,
        used=used)


def _update(consumer: str, **values: int) -> sa.Executable:
    return (sa.update(tables.allocations).where(tables.allocations.c.consumer_id == consumer)
            .values(**values))


def test_raw_sql_cannot_allocate_past_capacity(database):
    # 8 VCPU at 1.5: a capacity of 12
    _, _, provider_id = _provider(database, "cn1", 8, ratio=1.5)
    _, _, full_id = _provider(database, "cn2", 2)
    _sql(database, _insert("a", provider_id, 10))
    _refused(database, _insert("b", provider_id, 3))
    _sql(database, _insert("b", provider_id, 2))  # exactly the capacity
    _refused(database, _update("a", used=11))
    _sql(database, _update("a", used=9))  # less is always accepted
    _sql(database, _insert("c", full_id, 2))
    # a row moved onto a full inventory adds to it
    _refused(database, _update("b", resource_provider_id=full_id))
    _refused(database, _insert("d", provider_id, 4097, MEMORY_MB))
    _sql(database, sa.delete(tables.allocations).where(tables.allocations.c.consumer_id == "c"))
    _sql(database, _update("b", resource_provider_id=full_id))
    rows, used = _state(database)
    assert rows == {("a", provider_id, VCPU): 9, ("b", full_id, VCPU): 2}
    assert used[provider_id, VCPU] == 9 and used[full_id, VCPU] == 2


def test_a_ratio_of_single_precision_allows_what_the_api_allows(database):
    """MySQL keeps ratios as single precision floats (0.7 is 0.699999988):
    the database allows exactly the capacity clients compute, 7 of 10 at
    0.7, not 6."""
    api, provider_uuid, provider_id = _provider(database, "cn1", 10, ratio=0.7)
    consumer = str(uuid.uuid4())
    api.call("PUT", f"/allocations/{consumer}", {
        "allocations": {provider_uuid: {"resources": {"VCPU": 7}}},
        "consumer_generation": None, "consumer_type": "INSTANCE", **PROJECT})
    _refused(database, _insert("raw", provider_id, 1))


def _claim(api: ProviderApi, consumer: str, allocations: dict, generation: int | None
           ) -> int:
    status, _ = api.send("PUT", f"/allocations/{consumer}", {
        "allocations": {provider: {"resources": resources}
                        for provider, resources in allocations.items()},
        "consumer_generation": generation, "consumer_type": "INSTANCE", **PROJECT},
        "placement 1.39")
    return status


def _generation(api: ProviderApi, consumer: str) -> int:
    return api.call("GET", f"/allocations/{consumer}")["consumer_generation"]


def test_an_over_commit_may_shrink_move_and_empty_but_never_grow(database):
    api, provider_uuid, provider_id = _provider(database, "cn1", 8)
    first, second, moved = (str(uuid.uuid4()) for _ in range(3))
    assert _claim(api, first, {provider_uuid: {"VCPU": 5}}, None) == 204
    assert _claim(api, second, {provider_uuid: {"VCPU": 3}}, None) == 204
    # the operator reserves half of the host: 8 used of a capacity of 4
    _sql(database, sa.update(tables.inventories).where(
        tables.inventories.c.resource_provider_id == provider_id,
        tables.inventories.c.resource_class_id == VCPU).values(reserved=4))
    assert _claim(api, first, {provider_uuid: {"VCPU": 4}}, _generation(api, first)) == 204
    # a move to another consumer (Nova's migration records) leaves it as it was
    status, body = api.send("POST", "/allocations", {
        first: {"allocations": {}, "consumer_generation": _generation(api, first),
                "consumer_type": "INSTANCE", **PROJECT},
        moved: {"allocations": {provider_uuid: {"resources": {"VCPU": 4}}},
                "consumer_generation": None, "consumer_type": "MIGRATION", **PROJECT}},
        "placement 1.39")
    assert status == 204, body
    assert _claim(api, second, {provider_uuid: {"VCPU": 4}}, _generation(api, second)) == 409
    assert _claim(api, str(uuid.uuid4()), {provider_uuid: {"VCPU": 1}}, None) == 409
    assert _claim(api, second, {}, _generation(api, second)) == 204
    rows, used = _state(database)
    assert rows == {(moved, provider_id, VCPU): 4}
    assert used[provider_id, VCPU] == 4
    with database.db.reader() as connection:  # allowed for their own transaction only
        assert connection.scalar(sa.select(sa.func.count()).select_from(
            tables.allocation_allowances)) == 0


def test_a_claim_the_database_refuses_starts_over_and_is_refused_as_full(
        database, monkeypatch):
    """A claim whose own check was wrong (here: told the provider is empty
    when it is not) is refused by the database; the claim starts over in
    a new transaction, whose check then sees the provider full: 409,
    where it would have over-committed."""
    api, provider_uuid, provider_id = _provider(database, "cn1", 4)
    held = str(uuid.uuid4())
    assert _claim(api, held, {provider_uuid: {"VCPU": 3}}, None) == 204
    read = allocation_obj.inventory_usages
    attempts = []

    def stale_on_first_attempt(connection, provider_ids, class_ids, held):
        inventories, used = read(connection, provider_ids, class_ids, held)
        attempts.append(inventories)
        if len(attempts) == 1:
            for inventory in inventories.values():
                inventory.used = 0
        return inventories, used

    monkeypatch.setattr(allocation_obj, "inventory_usages", stale_on_first_attempt)
    status, body = api.send("PUT", f"/allocations/{uuid.uuid4()}", {
        "allocations": {provider_uuid: {"resources": {"VCPU": 2}}},
        "consumer_generation": None, "consumer_type": "INSTANCE", **PROJECT},
        "placement 1.39")
    assert status == 409, body
    assert "exceed the capacity" in str(body)
    assert len(attempts) == 2
    rows, used = _state(database)
    assert rows == {(held, provider_id, VCPU): 3} and used[provider_id, VCPU] == 3
