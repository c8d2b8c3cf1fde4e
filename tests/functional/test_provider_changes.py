"""The record of provider changes (placement.db.provider_changes) that the
per-process provider caches follow, written by the database's triggers
(placement.db.triggers), on every backend: what is recorded and what is
not, whoever writes, and versions that a reader can trust (in order,
without gaps, even with writers racing on one shard)."""

from __future__ import annotations

import threading
import uuid

import pytest
import sqlalchemy as sa

from placement.db import provider_changes, tables
from tests.db import FreshDatabase
from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process


def _total(database: FreshDatabase) -> int:
    with database.db.reader() as connection:
        return provider_changes.total(connection)


def _recorded(database: FreshDatabase) -> list[tuple[int, int, int]]:
    changes = tables.provider_changes
    with database.db.reader() as connection:
        return [tuple(row) for row in connection.execute(
            sa.select(changes.c.shard, changes.c.version, changes.c.resource_provider_id)
            .order_by(changes.c.shard, changes.c.version))]


def test_writes_of_provider_facts_are_recorded_and_allocations_are_not(database):
    api = ProviderApi(in_process(build_app(database)))
    before = _total(database)
    # created (its row, then its root set), then its inventory
    compute = api.provider("cn1", VCPU=4)
    assert _total(database) == before + 3
    api.traits(compute, "HW_CPU_X86_AVX2")
    api.call("PUT", f"/resource_providers/{compute}/aggregates", [str(uuid.uuid4())],
             version="placement 1.18")
    assert _total(database) == before + 5

    consumer = str(uuid.uuid4())
    api.claim(consumer, compute, VCPU=2)
    api.call("DELETE", f"/allocations/{consumer}")
    assert _total(database) == before + 5

    # a write refused (stale generation) records nothing
    status, _ = api.send("PUT", f"/resource_providers/{compute}/inventories", {
        "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        "placement 1.39")
    assert status == 409
    assert _total(database) == before + 5

    # the same inventory again changes nothing
    generation = api.call("GET", f"/resource_providers/{compute}")["generation"]
    api.call("PUT", f"/resource_providers/{compute}/inventories", {
        "resource_provider_generation": generation, "inventories": {"VCPU": {"total": 4}}})
    assert _total(database) == before + 5

    # its traits, inventory and aggregate go with it, then the provider
    api.call("DELETE", f"/resource_providers/{compute}")
    assert _total(database) == before + 10
    compute_ids = {provider_id for _, _, provider_id in _recorded(database)}
    assert len(compute_ids) == 1


_rp = tables.resource_providers


def _provider(connection: sa.engine.Connection, provider_id: int) -> None:
    """A provider row of that id, written as any SQL writer would."""
    connection.execute(sa.insert(_rp).values(id=provider_id, uuid=str(uuid.uuid4()),
                                             name=f"rp{provider_id}", generation=0))


def test_a_transaction_rolled_back_records_nothing(database):
    before = _total(database)
    with pytest.raises(RuntimeError), database.db.writer() as connection:
        _provider(connection, 7)
        raise RuntimeError("the write fails")
    assert _total(database) == before
    assert _recorded(database) == []


def test_sql_of_another_writer_is_recorded_and_claims_are_not(database):
    """What a writer that is not us (the original service, an operator)
    does to the rows is recorded just the same; a generation or usage that
    moves is not a change of the provider."""
    with database.db.writer() as connection:
        _provider(connection, 3)
    with database.db.writer() as connection:
        connection.execute(_rp.update().where(_rp.c.id == 3).values(generation=5))
    assert [provider_id for _, _, provider_id in _recorded(database)] == [3]
    with database.db.writer() as connection:
        connection.execute(_rp.update().where(_rp.c.id == 3).values(name="renamed"))
        connection.execute(tables.inventories.insert().values(
            resource_provider_id=3, resource_class_id=0, total=8, reserved=0, min_unit=1,
            max_unit=8, step_size=1, allocation_ratio=1.0))
    assert [version for _, version, _ in _recorded(database)] == [
        version for version in range(_recorded(database)[0][1],
                                      _recorded(database)[0][1] + 3)]


def test_a_renamed_resource_class_makes_every_reader_reload(database):
    with database.db.writer() as connection:
        connection.execute(tables.resource_classes.insert().values(id=10000, name="CUSTOM_A"))
    with database.db.reader() as connection:
        seen = provider_changes.versions(connection)
    with database.db.writer() as connection:
        connection.execute(tables.resource_classes.update()
                           .where(tables.resource_classes.c.id == 10000)
                           .values(name="CUSTOM_B"))
    with database.db.reader() as connection:
        now = provider_changes.versions(connection)
        assert now[provider_changes.RELOAD_SHARD] == seen[provider_changes.RELOAD_SHARD] + 1
        assert provider_changes.changed_since(connection, seen, now) is None


def test_a_reload_request_or_an_older_backup_makes_every_reader_reload(database):
    with database.db.reader() as connection:
        seen = provider_changes.versions(connection)
    with database.db.writer() as connection:
        provider_changes.request_reload(connection)
    with database.db.reader() as connection:
        now = provider_changes.versions(connection)
        assert provider_changes.changed_since(connection, seen, now) is None
        # a restored backup: versions lower than a reader saw
        older = {**now, 0: now[0] - 1}
        assert provider_changes.changed_since(connection, now, older) is None
        assert provider_changes.changed_since(connection, now, now) == set()


def test_racing_writers_of_one_shard_count_every_change_in_order(database):
    """Threads record providers of one shard in transactions of their own:
    the shard's versions go up one by one, each naming one change, none
    lost."""
    writers, changes_each = 4, 5
    failures = []
    with database.db.reader() as connection:
        before = provider_changes.versions(connection)[0]

    def write(thread_index: int) -> None:
        try:
            for change in range(changes_each):
                provider_id = provider_changes.SHARDS * (thread_index * changes_each + change + 1)
                with database.db.writer() as connection:
                    _provider(connection, provider_id)
        except Exception as error:  # reported by the assertion below
            failures.append(error)

    threads = [threading.Thread(target=write, args=(index,)) for index in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    recorded = _recorded(database)
    count = writers * changes_each
    assert [(shard, version) for shard, version, _ in recorded] == [
        (0, before + version) for version in range(1, count + 1)]
    assert sorted(provider_id for _, _, provider_id in recorded) == [
        provider_changes.SHARDS * index for index in range(1, count + 1)]


def test_a_reader_too_far_behind_is_told_so(database):
    """Only the last KEPT changes of a shard are kept: a reader that saw
    fewer than the ones before them gets None (reload everything)."""
    with database.db.writer() as connection:
        _provider(connection, 1)
        _provider(connection, 1 + provider_changes.SHARDS)
    with database.db.reader() as connection:
        seen = provider_changes.versions(connection)
    for change in range(provider_changes.KEPT):
        with database.db.writer() as connection:
            connection.execute(_rp.update().where(_rp.c.id == 1).values(name=f"n{change}"))
    with database.db.reader() as connection:
        now = provider_changes.versions(connection)
        assert provider_changes.changed_since(connection, seen, now) == {1}
        assert provider_changes.changed_since(connection, {}, now) is None
    assert len(_recorded(database)) == provider_changes.KEPT
