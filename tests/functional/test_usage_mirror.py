"""The usage change record (placement.db.provider_changes.USAGES), written
by the database's triggers whoever changes a usage, and the usage mirror
that follows it (placement.candidates.usage_mirror), on every backend: the
mirror's usages are always those of the database, read directly."""

from __future__ import annotations

import random
import uuid

import pytest
import sqlalchemy as sa

from placement.candidates import follower
from placement.db import provider_changes, tables
from tests.db import FreshDatabase
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process

_inv = tables.inventories
_alloc = tables.allocations


def _usage_total(database: FreshDatabase) -> int:
    with database.db.reader() as connection:
        return provider_changes.total(connection, provider_changes.USAGES)


def _read_directly(database: FreshDatabase) -> dict[tuple[int, int], int]:
    with database.db.reader() as connection:
        return {(provider_id, class_id): used for provider_id, class_id, used in
                connection.execute(sa.select(_inv.c.resource_provider_id,
                                             _inv.c.resource_class_id, _inv.c.used)
                                   .where(_inv.c.used != 0))}


def _mirrored(database: FreshDatabase) -> dict[tuple[int, int], int]:
    with database.db.reader() as connection:
        return follower.usages(connection, None, None)


def _provider_id(database: FreshDatabase, provider_uuid: str) -> int:
    with database.db.reader() as connection:
        return connection.scalar(sa.select(tables.resource_providers.c.id)
                                 .where(tables.resource_providers.c.uuid == provider_uuid))


def test_usage_moves_are_recorded_and_provider_facts_are_not(database):
    api = ProviderApi(in_process(build_app(database)))
    before = _usage_total(database)
    compute = api.provider("cn1", VCPU=8, MEMORY_MB=1024)
    api.traits(compute, "HW_CPU_X86_AVX2")
    assert _usage_total(database) == before

    consumer = str(uuid.uuid4())
    api.claim(consumer, compute, VCPU=2, MEMORY_MB=256)  # two inventories' usage
    assert _usage_total(database) == before + 2
    # a claim refused for capacity changes nothing
    status, _ = api.send("PUT", f"/allocations/{uuid.uuid4()}", {
        "allocations": {compute: {"resources": {"VCPU": 100}}}, "consumer_generation": None,
        "project_id": str(uuid.uuid4()), "user_id": str(uuid.uuid4()),
        "consumer_type": "INSTANCE"}, "placement 1.39")
    assert status == 409
    assert _usage_total(database) == before + 2
    api.inventories(compute, VCPU=16, MEMORY_MB=1024)  # used unchanged
    assert _usage_total(database) == before + 2
    api.call("DELETE", f"/allocations/{consumer}")
    assert _usage_total(database) == before + 4
    assert _mirrored(database) == _read_directly(database) == {}


def test_the_mirror_follows_every_writer(database):
    """Claims, moves and releases through the API, allocation rows an
    operator's SQL writes, and more changes than a shard keeps between two
    reads: after each step the mirror reads what the database holds."""
    api = ProviderApi(in_process(build_app(database)))
    computes = [api.provider(f"cn{index}", VCPU=64, MEMORY_MB=65536, DISK_GB=1000)
                for index in range(6)]
    compute_ids = [_provider_id(database, compute) for compute in computes]
    rng = random.Random(5)
    held: dict[str, str] = {}
    assert _mirrored(database) == _read_directly(database) == {}
    for step in range(40):
        if held and rng.random() < 0.3:
            consumer = rng.choice(sorted(held))
            api.call("DELETE", f"/allocations/{consumer}")
            del held[consumer]
        else:
            consumer = rng.choice(sorted(held)) if held and rng.random() < 0.3 else str(
                uuid.uuid4())
            compute = rng.choice(computes)
            api.call("PUT", f"/allocations/{consumer}", {
                "allocations": {compute: {"resources": {
                    "VCPU": rng.randint(1, 4), "MEMORY_MB": rng.randint(64, 512)}}},
                "consumer_generation": api.call("GET", f"/allocations/{consumer}").get(
                    "consumer_generation"),
                "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"})
            held[consumer] = compute
        if step % 10 == 9:  # an operator's SQL, beside the API
            with database.db.writer() as connection:
                connection.execute(sa.insert(_alloc).values(
                    resource_provider_id=rng.choice(compute_ids),
                    consumer_id=str(uuid.uuid4()), resource_class_id=2, used=7))
        assert _mirrored(database) == _read_directly(database)
    # more changes of one shard than it keeps: the next read reads all again
    with database.db.writer() as connection:
        connection.execute(sa.insert(_alloc), [
            {"resource_provider_id": compute_ids[0], "consumer_id": str(uuid.uuid4()),
             "resource_class_id": 2, "used": 1}
            for _ in range(provider_changes.KEPT + 10)])
    assert _mirrored(database) == _read_directly(database)


def test_a_snapshot_stays_as_it_was_read(database):
    """A request reads one snapshot: claims after it was taken are in the
    next one only."""
    api = ProviderApi(in_process(build_app(database)))
    compute = api.provider("cn1", VCPU=8)
    compute_id = _provider_id(database, compute)
    with database.db.reader() as connection:
        before = follower.current_with_usages(connection)[1]
    api.claim(str(uuid.uuid4()), compute, VCPU=3)
    with database.db.reader() as connection:
        after = follower.current_with_usages(connection)[1]
    assert before.of([compute_id], None) == {}
    assert after.of([compute_id], None) == {(compute_id, 0): 3}
    assert after.of([compute_id], [1]) == {}


def test_a_write_rolled_back_records_no_usage_change(database):
    api = ProviderApi(in_process(build_app(database)))
    compute_id = _provider_id(database, api.provider("cn1", VCPU=8))
    before = _usage_total(database)
    with pytest.raises(RuntimeError), database.db.writer() as connection:
        connection.execute(sa.insert(_alloc).values(
            resource_provider_id=compute_id, consumer_id=str(uuid.uuid4()),
            resource_class_id=0, used=2))
        raise RuntimeError("the write fails")
    assert _usage_total(database) == before
    assert _mirrored(database) == _read_directly(database) == {}
