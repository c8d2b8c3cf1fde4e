"""An acknowledged write is seen by the very next request of another server
process on the same database, on every backend.

Each process keeps its own copy of the providers for the candidate search
(placement.candidates.provider_copy) and brings it up to date from the
database's record of changes (placement.db.provider_changes). Two real
``placement-api`` processes serve one database: every kind of write is made
through one, and the next ``GET /allocation_candidates`` through the other
(whose copy was loaded before the write) must show it. Writes go both ways.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import provider_changes, tables
from tests.fixtures.provider_api import ProviderApi
from tests.fixtures.servers import servers_on

pytestmark = pytest.mark.slow


@pytest.fixture
def sides(backend, tmp_path):
    with servers_on(backend, str(tmp_path), 2) as (running, _):
        yield ProviderApi(running.client(0).request), ProviderApi(running.client(1).request)


def test_every_write_of_one_process_shows_in_the_next_search_of_the_other(sides):
    writer, reader = sides
    compute = writer.provider("cn1", VCPU=4, MEMORY_MB=1024)
    # both copies loaded, each from its own process
    for api in sides:
        assert api.candidate_sets("resources=VCPU:1") == [{compute}]

    # a new provider, and a new inventory class
    other = writer.provider("cn2", VCPU=4)
    assert reader.candidate_sets("resources=VCPU:1") == [{compute}, {other}]
    writer.inventories(other, VCPU=4, DISK_GB=100)
    assert reader.candidate_sets("resources=DISK_GB:10") == [{other}]

    # a claim fills a provider: its summary and the next search show it
    writer.claim(str(uuid.uuid4()), compute, VCPU=3)
    body = reader.candidates("resources=VCPU:1")
    assert body["provider_summaries"][compute]["resources"]["VCPU"]["used"] == 3
    assert reader.candidate_sets("resources=VCPU:2") == [{other}]

    # an inventory shrinks
    writer.inventories(other, VCPU=1, DISK_GB=100)
    assert reader.candidate_sets("resources=VCPU:2") == []

    # traits, set and removed
    writer.traits(other, "HW_CPU_X86_AVX2")
    assert reader.candidate_sets("resources=VCPU:1&required=HW_CPU_X86_AVX2") == [{other}]
    writer.call("DELETE", f"/resource_providers/{other}/traits")
    assert reader.candidate_sets("resources=VCPU:1&required=HW_CPU_X86_AVX2") == []

    # aggregates below 1.19 (no generation moves) and a sharing provider
    aggregate = str(uuid.uuid4())
    disk = writer.provider("disk", DISK_GB=1000)
    writer.traits(disk, "MISC_SHARES_VIA_AGGREGATE")
    for provider_uuid in (compute, disk):
        writer.call("PUT", f"/resource_providers/{provider_uuid}/aggregates", [aggregate],
                    version="placement 1.18")
    assert reader.candidate_sets(f"resources=VCPU:1,DISK_GB:10&member_of={aggregate}") == [
        {compute, disk}]

    # a tree joins another (1.37 re-parenting)
    numa = writer.provider("numa", VCPU=8)
    writer.call("PUT", f"/resource_providers/{numa}",
                {"name": "numa", "parent_provider_uuid": other})
    body = reader.candidates("resources=VCPU:4")
    assert body["provider_summaries"][numa]["root_provider_uuid"] == other

    # the other way round: the reader writes, the writer reads
    reader.call("DELETE", f"/resource_providers/{numa}")
    assert writer.candidate_sets("resources=VCPU:4") == []
    reader.inventories(compute, VCPU=16, MEMORY_MB=1024)
    assert writer.candidate_sets("resources=VCPU:8") == [{compute}]


def test_allocations_deleted_through_one_process_free_capacity_for_the_other(sides):
    """Deleting allocations moves no generation: usages are read per request."""
    writer, reader = sides
    compute = writer.provider("cn1", VCPU=4)
    consumer = str(uuid.uuid4())
    writer.claim(consumer, compute, VCPU=4)
    assert reader.candidate_sets("resources=VCPU:1") == []
    writer.call("DELETE", f"/allocations/{consumer}")
    assert reader.candidate_sets("resources=VCPU:1") == [{compute}]


def test_a_process_behind_by_more_changes_than_are_kept_reloads_everything(backend, tmp_path):
    """A change followed by more changes of the same shard than the record
    keeps, while the reader made no request: the reader cannot tell that
    the first provider changed, and must reload all of them."""
    with servers_on(backend, str(tmp_path), 2) as (running, database_url):
        writer = ProviderApi(running.client(0).request)
        reader = ProviderApi(running.client(1).request)
        first = writer.provider("first", VCPU=1)
        shard = provider_changes.shard_of(_provider_id(database_url, first))
        # a provider of the same shard (ids are given in order)
        index = 0
        while True:
            index += 1
            neighbour = writer.provider(f"p{index}")
            if provider_changes.shard_of(_provider_id(database_url, neighbour)) == shard:
                break
        assert reader.candidate_sets("resources=VCPU:1") == [{first}]
        writer.inventories(first, VCPU=8)
        for total in range(1, provider_changes.KEPT + 1):
            writer.inventories(neighbour, DISK_GB=total)
        assert reader.candidate_sets("resources=VCPU:8") == [{first}]


def _provider_id(database_url: str, provider_uuid: str) -> int:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            return connection.scalar(sa.select(tables.resource_providers.c.id).where(
                tables.resource_providers.c.uuid == provider_uuid))
    finally:
        engine.dispose()


def test_a_renamed_resource_class_shows_in_both_processes(sides):
    """A class renamed (1.2-1.6) through one process: the provider
    summaries of both processes, the renaming one's included, name the new
    class at once (every copy reloads, kept summaries with it)."""
    writer, reader = sides
    writer.call("POST", "/resource_classes", {"name": "CUSTOM_OLD_NAME"},
                version="placement 1.2")
    compute = writer.provider("cn1", VCPU=4, CUSTOM_OLD_NAME=2)
    for api in sides:
        body = api.candidates("resources=CUSTOM_OLD_NAME:1")
        assert set(body["provider_summaries"][compute]["resources"]) == {
            "VCPU", "CUSTOM_OLD_NAME"}
    writer.call("PUT", "/resource_classes/CUSTOM_OLD_NAME", {"name": "CUSTOM_NEW_NAME"},
                version="placement 1.2")
    for api in sides:
        body = api.candidates("resources=CUSTOM_NEW_NAME:1")
        assert set(body["provider_summaries"][compute]["resources"]) == {
            "VCPU", "CUSTOM_NEW_NAME"}
        body = api.candidates("resources=VCPU:1")
        assert set(body["provider_summaries"][compute]["resources"]) == {
            "VCPU", "CUSTOM_NEW_NAME"}


def test_sql_of_another_writer_shows_in_the_next_search(backend, tmp_path):
    """Rows written by SQL, as the original service or an operator writes
    them, are seen by both processes at their next request."""
    with servers_on(backend, str(tmp_path), 2) as (running, url):
        apis = [ProviderApi(running.client(index).request) for index in (0, 1)]
        compute = apis[0].provider("cn1", VCPU=4)
        for api in apis:
            assert api.candidate_sets("resources=VCPU:4") == [{compute}]
        engine = db_api.create_engine(url)
        rp, inv = tables.resource_providers, tables.inventories
        try:
            with engine.begin() as connection:
                provider_id = connection.scalar(sa.select(rp.c.id).where(rp.c.uuid == compute))
                connection.execute(inv.update().where(inv.c.resource_provider_id == provider_id)
                                   .values(total=16, max_unit=16))
                trait_id = connection.scalar(sa.select(tables.traits.c.id).where(
                    tables.traits.c.name == "HW_CPU_X86_AVX2"))
                connection.execute(tables.resource_provider_traits.insert().values(
                    resource_provider_id=provider_id, trait_id=trait_id))
        finally:
            engine.dispose()
        for api in apis:
            assert api.candidate_sets("resources=VCPU:16&required=HW_CPU_X86_AVX2") == [
                {compute}]
