"""Replacing allocations against the capacity of their providers: the
write reads, in one statement, the usage of everybody and the part of it
held by the consumers it replaces. Also the consumer records a write
creates, and what a claim for a new consumer costs in statements."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from placement.db import tables
from placement.objects import allocation as allocation_obj
from placement.objects import consumer as consumer_obj
from tests.fixtures.seed import (
    add_allocation,
    insert_allocation,
    provider_with,
)

PROVIDER = str(uuid.uuid4())
OTHER = str(uuid.uuid4())


@pytest.fixture
def database(database):
    with database.db.writer() as connection:
        provider_with(connection, PROVIDER, "four-vcpus", VCPU=4, MEMORY_MB=1024)
        provider_with(connection, OTHER, "other", VCPU=4)
    return database.db


def claim(db, consumer_uuid: str, allocations: dict[str, dict[str, int]]) -> None:
    allocation_obj.replace_all(db, [allocation_obj.ConsumerAllocations(
        consumer_uuid=consumer_uuid, allocations=allocations,
        owner=consumer_obj.Owner("project", "user"))], attempts=1)


def held(db) -> dict[tuple[str, str], int]:
    allocations, providers = tables.allocations, tables.resource_providers
    with db.reader() as connection:
        rows = connection.execute(
            sa.select(allocations.c.consumer_id, providers.c.uuid, allocations.c.used)
            .join(providers, providers.c.id == allocations.c.resource_provider_id)
            .where(allocations.c.resource_class_id == 0)).all()
    return {(row.consumer_id, row.uuid): row.used for row in rows}


def test_own_allocations_do_not_count_against_their_replacement(database):
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    claim(database, mine, {PROVIDER: {"VCPU": 3}})
    claim(database, mine, {PROVIDER: {"VCPU": 4}})
    with pytest.raises(allocation_obj.AllocationRefused, match="exceed the capacity"):
        claim(database, theirs, {PROVIDER: {"VCPU": 1}})
    # Moving to another provider frees the first one in the same write.
    claim(database, mine, {OTHER: {"VCPU": 4}})
    claim(database, theirs, {PROVIDER: {"VCPU": 4}})
    assert held(database) == {(mine, OTHER): 4, (theirs, PROVIDER): 4}


def test_over_commit_may_stay_but_not_grow(database):
    overcommitting = str(uuid.uuid4())
    with database.writer() as connection:
        provider_id = connection.execute(
            sa.select(tables.resource_providers.c.id)
            .where(tables.resource_providers.c.uuid == PROVIDER)).scalar()
        add_allocation(connection, provider_id, "VCPU", overcommitting, 6,
                       project="project", user="user")
    claim(database, overcommitting, {PROVIDER: {"VCPU": 6, "MEMORY_MB": 128}})
    claim(database, overcommitting, {PROVIDER: {"VCPU": 5}})
    with pytest.raises(allocation_obj.AllocationRefused, match="exceed the capacity"):
        claim(database, overcommitting, {PROVIDER: {"VCPU": 6}})
    assert held(database) == {(overcommitting, PROVIDER): 5}


def test_allocations_without_a_consumer_record_are_replaced(database):
    """Rows older than consumer records: the write creates the record and
    still replaces what the consumer held."""
    legacy = str(uuid.uuid4())
    with database.writer() as connection:
        provider_id = connection.execute(
            sa.select(tables.resource_providers.c.id)
            .where(tables.resource_providers.c.uuid == PROVIDER)).scalar()
        insert_allocation(connection, provider_id, 0, legacy, 4)
    claim(database, legacy, {PROVIDER: {"VCPU": 2}})
    assert held(database) == {(legacy, PROVIDER): 2}


def test_created_consumer_has_the_generation_after_its_first_write(database):
    consumer_uuid = str(uuid.uuid4())
    claim(database, consumer_uuid, {PROVIDER: {"VCPU": 1}})
    with database.reader() as connection:
        first = consumer_obj.get_by_uuids(connection, [consumer_uuid])[consumer_uuid]
    assert first.generation == consumer_obj.CREATED_GENERATION == 1
    claim(database, consumer_uuid, {PROVIDER: {"VCPU": 2}})
    with database.reader() as connection:
        second = consumer_obj.get_by_uuids(connection, [consumer_uuid])[consumer_uuid]
    assert (second.id, second.generation) == (first.id, 2)
    claim(database, consumer_uuid, {})
    with database.reader() as connection:
        assert consumer_obj.get_by_uuids(connection, [consumer_uuid]) == {}


def test_claim_for_a_new_consumer_of_a_known_owner_runs_nine_statements(database):
    """Lock the providers' inventories (and, but on SQLite, whose writers
    hold the database lock, their usage counters: a tenth statement), lock
    and read the providers, read
    the consumer, look the owner up, create the consumer, lock and read
    what the consumer holds (nothing), read inventories with their usage,
    compare-and-swap the provider generation, insert (the database's
    triggers count the inventories' usage). No delete: a consumer the
    write creates holds nothing."""
    claim(database, str(uuid.uuid4()), {PROVIDER: {"VCPU": 1}})
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        # Transaction control and SQLite connection set-up are not ours.
        if not statement.startswith(("PRAGMA", "BEGIN", "COMMIT", "SET")):
            statements.append(statement)

    sa.event.listen(database.engine, "before_cursor_execute", record)
    try:
        claim(database, str(uuid.uuid4()), {PROVIDER: {"VCPU": 1, "MEMORY_MB": 64}})
    finally:
        sa.event.remove(database.engine, "before_cursor_execute", record)
    usage_counters = [] if database.engine.dialect.name == "sqlite" else ["SELECT"]
    assert [statement.split()[0] for statement in statements] == [
        "SELECT", *usage_counters, "SELECT", "SELECT", "SELECT", "INSERT", "SELECT", "SELECT",
        "UPDATE", "INSERT"], statements
