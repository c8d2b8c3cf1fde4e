"""Allocation writes racing with other writers: provider-generation
conflicts are retried in a new transaction that reads everything again,
and no interleaving over-commits a provider."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
import sqlalchemy as sa
import webob
from oslo_db import exception as db_exc

from placement import conf as placement_conf
from placement import deploy, versions
from placement.db import tables
from placement.objects import allocation as allocation_obj
from placement.objects import consumer as consumer_obj
from tests.fixtures.seed import provider_with

PROVIDER_UUID = str(uuid.uuid4())


@pytest.fixture
def database(database):
    with database.db.writer() as connection:
        provider_with(connection, PROVIDER_UUID, "room-for-one", VCPU=1)
    return database.db


def _app(db, retry_count: int = 10):
    conf = placement_conf.build_conf(config_files=[])
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override("allocation_conflict_retry_count", retry_count, group="placement")
    return deploy.build_app(conf, db=db)


def _put_one_vcpu(app, consumer_uuid: str, version: str = "1.28") -> webob.Response:
    """PUT one VCPU for a new consumer (consumer_generation null at 1.28+)."""
    request = webob.Request.blank(
        f"/allocations/{consumer_uuid}", method="PUT",
        headers={"x-auth-token": "admin", "openstack-api-version": f"placement {version}"})
    request.content_type = "application/json"
    body = {"allocations": {PROVIDER_UUID: {"resources": {"VCPU": 1}}},
            "project_id": "project", "user_id": "user"}
    if versions.parse(version) >= (1, 28):
        body["consumer_generation"] = None
    request.body = json.dumps(body).encode()
    return request.get_response(app)


def _request(consumer_uuid: str) -> allocation_obj.ConsumerAllocations:
    return allocation_obj.ConsumerAllocations(
        consumer_uuid=consumer_uuid,
        allocations={PROVIDER_UUID: {"VCPU": 1}},
        owner=consumer_obj.Owner("project", "user"),
    )


def _state(db) -> tuple[int, list[tuple[str, int]]]:
    """(provider generation, [(consumer, used)]) as committed."""
    with db.reader() as connection:
        generation = connection.execute(
            sa.select(tables.resource_providers.c.generation)
            .where(tables.resource_providers.c.uuid == PROVIDER_UUID)).scalar()
        rows = connection.execute(
            sa.select(tables.allocations.c.consumer_id, tables.allocations.c.used)).all()
    return generation, [tuple(row) for row in rows]


class StaleSnapshot:
    """Stands in for ``allocation._providers`` and, for its first ``stale``
    calls, returns providers with the generation they had before a
    concurrent writer committed, which is what a REPEATABLE READ snapshot
    taken before that commit shows. Records the transaction of each call."""

    def __init__(self, real, stale: int):
        self.real = real
        self.stale = stale
        self.transactions: list[sa.engine.Transaction] = []

    def __call__(self, connection, *named_and_holding):
        self.transactions.append(connection.get_transaction())
        providers = self.real(connection, *named_and_holding)
        if len(self.transactions) <= self.stale:
            for provider in providers:
                provider.generation -= 1
        return providers


def test_generation_conflict_is_retried_in_a_new_transaction(database, monkeypatch):
    snapshot = StaleSnapshot(allocation_obj._providers, stale=1)
    monkeypatch.setattr(allocation_obj, "_providers", snapshot)
    consumer_uuid = str(uuid.uuid4())

    allocation_obj.replace_all(database, [_request(consumer_uuid)], attempts=10)

    first, second = snapshot.transactions
    assert first is not second
    assert not first.is_active
    # Written once, the generation moved once: nothing of the failed
    # attempt survived its rollback.
    assert _state(database) == (1, [(consumer_uuid, 1)])


def test_retry_reads_usage_again_and_does_not_over_commit(database, monkeypatch):
    """Another writer takes the last VCPU between our lost attempt and the
    retry: the retry must see it and refuse, not reuse what it read before."""
    snapshot = StaleSnapshot(allocation_obj._providers, stale=1)
    monkeypatch.setattr(allocation_obj, "_providers", snapshot)
    real_attempt = allocation_obj._attempt
    competitor = str(uuid.uuid4())
    calls = []

    def attempt(db, requests):
        calls.append(requests)
        if len(calls) == 2:
            # The competitor commits before our second attempt begins.
            monkeypatch.setattr(allocation_obj, "_providers", snapshot.real)
            real_attempt(db, [_request(competitor)])
            monkeypatch.setattr(allocation_obj, "_providers", snapshot)
        return real_attempt(db, requests)

    monkeypatch.setattr(allocation_obj, "_attempt", attempt)

    with pytest.raises(allocation_obj.AllocationRefused, match="exceed the capacity"):
        allocation_obj.replace_all(database, [_request(str(uuid.uuid4()))], attempts=10)

    assert len(calls) == 2
    assert _state(database) == (1, [(competitor, 1)])


def test_retries_exhausted_is_a_concurrent_update_conflict(database, monkeypatch):
    snapshot = StaleSnapshot(allocation_obj._providers, stale=1000)
    monkeypatch.setattr(allocation_obj, "_providers", snapshot)

    response = _put_one_vcpu(_app(database, retry_count=3), str(uuid.uuid4()))

    assert response.status_int == 409
    error = response.json["errors"][0]
    assert error["code"] == "placement.concurrent_update"
    assert ("Inventory and/or allocations changed while attempting to allocate: "
            "Another thread concurrently updated the resource provider data."
            in error["detail"])
    assert len(snapshot.transactions) == 3
    assert len({id(transaction) for transaction in snapshot.transactions}) == 3
    assert _state(database) == (0, [])
    with database.reader() as connection:
        assert connection.execute(sa.select(sa.func.count())
                                  .select_from(tables.consumers)).scalar() == 0


def test_two_writers_racing_for_the_last_unit(database):
    app = _app(database)
    consumers = [str(uuid.uuid4()) for _ in range(2)]
    start = threading.Barrier(len(consumers))
    statuses: dict[str, int] = {}

    def put(consumer_uuid: str) -> None:
        start.wait()
        statuses[consumer_uuid] = _put_one_vcpu(app, consumer_uuid).status_int

    threads = [threading.Thread(target=put, args=(consumer,)) for consumer in consumers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses.values()) == [204, 409]
    winner = next(consumer for consumer, status in statuses.items() if status == 204)
    assert _state(database) == (1, [(winner, 1)])


@pytest.mark.parametrize("version", ["1.27", "1.28"])
def test_writers_racing_to_create_one_consumer_leave_it_one_allocation(database, version):
    """Claims for the same new consumer: whoever loses the race to create
    its record starts over and finds it (1.28+: a generation conflict;
    before, it replaces the winner's allocation or conflicts on the
    consumer's generation). Never two allocations for the consumer, and
    the inventory's usage counts one."""
    app = _app(database)
    consumer_uuid = str(uuid.uuid4())
    writers = 4
    start = threading.Barrier(writers)
    statuses: list[int] = []

    def put() -> None:
        start.wait()
        statuses.append(_put_one_vcpu(app, consumer_uuid, version=version).status_int)

    threads = [threading.Thread(target=put) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert 204 in statuses and set(statuses) <= {204, 409}
    if version == "1.28":
        assert sorted(statuses) == [204] + [409] * (writers - 1)
    assert _state(database)[1] == [(consumer_uuid, 1)]
    with database.reader() as connection:
        assert connection.execute(sa.select(tables.inventories.c.used)).scalars().all() == [1]


def test_consumer_generation_race_is_reported_not_retried(database, monkeypatch):
    """Below 1.28 nobody states a consumer generation, yet the write still
    compare-and-swaps it: a consumer changed after our read is a conflict
    for the client to resolve, not something to retry."""
    consumer_uuid = str(uuid.uuid4())
    allocation_obj.replace_all(database, [_request(consumer_uuid)], attempts=10)
    real_get = consumer_obj.get_by_uuids
    reads = []

    def stale_get(connection, wanted_uuids):
        consumers = real_get(connection, wanted_uuids)
        reads.append(consumers)
        for consumer in consumers.values():
            consumer.generation -= 1
        return consumers

    monkeypatch.setattr(consumer_obj, "get_by_uuids", stale_get)

    response = _put_one_vcpu(_app(database), consumer_uuid, version="1.27")

    assert response.status_int == 409
    error = response.json["errors"][0]
    assert error["code"] == "placement.concurrent_update"
    assert ("Inventory and/or allocations changed while attempting to allocate: "
            "Another thread concurrently updated the data. Please retry your update"
            in error["detail"])
    assert len(reads) == 1
    assert _state(database) == (1, [(consumer_uuid, 1)])


def test_deadlocks_past_the_retries_are_a_concurrent_update_conflict(database, monkeypatch):
    """Every attempt loses its race as the server reports it (a deadlock, or
    a Galera certification failure): 409, not 500, and nothing written."""
    attempts = []

    def always_deadlocked(connection, prepared, known_providers=None):
        attempts.append(connection.get_transaction())
        raise db_exc.DBDeadlock()

    monkeypatch.setattr(allocation_obj, "write", always_deadlocked)
    monkeypatch.setattr(database, "max_retries", 2)

    response = _put_one_vcpu(_app(database), str(uuid.uuid4()))

    assert response.status_int == 409
    assert response.json["errors"][0]["code"] == "placement.concurrent_update"
    assert len(attempts) == 3 and len(set(map(id, attempts))) == 3
    assert _state(database) == (0, [])
