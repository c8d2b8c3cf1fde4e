"""An allocation write issues a number of SQL statements that does not grow
with the number of providers or consumers it names (no query per provider
or per consumer)."""

from __future__ import annotations

import contextlib
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from placement.db import tables
from placement.objects import allocation as allocation_obj
from placement.objects import consumer as consumer_obj
from tests.fixtures.seed import (
    add_allocation,
    add_inventory,
    create_provider,
    insert_allocation,
)

PROVIDERS = [str(uuid.uuid4()) for _ in range(6)]


@pytest.fixture
def database(database):
    with database.db.writer() as connection:
        for index, provider_uuid in enumerate(PROVIDERS):
            provider_id = create_provider(connection, provider_uuid, f"rp-{index}")
            add_inventory(connection, provider_id, "VCPU", 100)
    return database.db


@contextlib.contextmanager
def counted_statements(db):
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        # Connection set-up (SQLite PRAGMAs) depends on the pool, not on us.
        if not statement.startswith("PRAGMA"):
            statements.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", count)


def _consumer(consumer_uuid: str, providers: list[str]) -> allocation_obj.ConsumerAllocations:
    return allocation_obj.ConsumerAllocations(
        consumer_uuid=consumer_uuid,
        allocations={provider_uuid: {"VCPU": 1} for provider_uuid in providers},
        owner=consumer_obj.Owner("project", "user"))


def _statements_for(db, requests) -> int:
    with counted_statements(db) as statements:
        allocation_obj.replace_all(db, requests, attempts=1)
    return len(statements)


def _create_owner(db) -> None:
    """The project and user exist from now on (creating them costs queries)."""
    allocation_obj.replace_all(db, [_consumer(str(uuid.uuid4()), PROVIDERS[:1])], 1)


def test_statements_do_not_grow_with_providers(database):
    _create_owner(database)
    one = _statements_for(database, [_consumer(str(uuid.uuid4()), PROVIDERS[:1])])
    six = _statements_for(database, [_consumer(str(uuid.uuid4()), PROVIDERS)])
    assert six == one


def test_statements_do_not_grow_with_new_consumers(database):
    _create_owner(database)
    one = _statements_for(database, [_consumer(str(uuid.uuid4()), PROVIDERS[:1])])
    six = _statements_for(database, [_consumer(str(uuid.uuid4()), [provider])
                                     for provider in PROVIDERS])
    assert six == one


def test_statements_do_not_grow_with_consumers_cleared(database):
    consumers = [str(uuid.uuid4()) for _ in PROVIDERS]
    with database.writer() as connection:
        for provider_id, consumer_uuid in enumerate(consumers, start=1):
            add_allocation(connection, provider_id, "VCPU", consumer_uuid, 1,
                           project="project", user="user")
    one = _statements_for(database, [_consumer(consumers[0], [])])
    five = _statements_for(database, [_consumer(consumer_uuid, [])
                                      for consumer_uuid in consumers[1:]])
    assert five == one


def test_named_providers_are_locked_before_anything_is_read(database):
    """The write first locks the inventories of the providers it names,
    then (but on SQLite, whose writers hold the database lock) the
    counters of their usage changes in shard order, then the providers
    (FOR UPDATE, each in id order): the order in which the original
    service's writes take them too (no deadlock between the two during a
    rolling switch), and on PostgreSQL and MySQL what it reads afterwards
    includes every concurrent writer of those providers that committed
    while it waited. The providers are not locked by the first statement,
    whose subquery reads them. SQLite does not render FOR UPDATE, so the
    statements are compiled for PostgreSQL here."""
    _create_owner(database)
    statements: list = []

    def record(conn, clauseelement, multiparams, params, execution_options):
        if isinstance(clauseelement, sa.sql.ClauseElement):
            statements.append(clauseelement)

    sa.event.listen(database.engine, "before_execute", record)
    try:
        allocation_obj.replace_all(database, [_consumer(str(uuid.uuid4()), PROVIDERS[:2])], 1)
    finally:
        sa.event.remove(database.engine, "before_execute", record)

    locks = [str(statement.compile(dialect=postgresql.dialect()))
             for statement in statements[:3]]
    inventories = locks.pop(0)
    assert inventories.startswith("SELECT inventories.resource_provider_id")
    assert inventories.endswith("ORDER BY inventories.id FOR UPDATE")
    if database.engine.dialect.name != "sqlite":
        usage_shards = locks.pop(0)
        assert usage_shards.startswith("SELECT usage_change_shards.shard")
        assert usage_shards.endswith("ORDER BY usage_change_shards.shard FOR UPDATE")
    providers = locks.pop(0)
    assert providers.startswith("SELECT resource_providers.id")
    assert providers.endswith("ORDER BY resource_providers.id FOR UPDATE")


@pytest.mark.parametrize("with_record", [True, False], ids=["consumer", "legacy rows"])
def test_a_claim_replaces_what_the_consumer_holds(database, with_record):
    """Held allocations are deleted, also those of a consumer without a
    record (written before consumers had one), which the claim creates."""
    consumer_uuid = str(uuid.uuid4())
    if with_record:
        allocation_obj.replace_all(database, [_consumer(consumer_uuid, PROVIDERS[:1])], 1)
    else:
        with database.writer() as connection:
            insert_allocation(connection, 1, 0, consumer_uuid, 1)
    allocation_obj.replace_all(database, [_consumer(consumer_uuid, PROVIDERS[1:2])], 1)
    with database.reader() as connection:
        view = allocation_obj.get_for_consumer(connection, consumer_uuid)
        used = connection.execute(sa.select(tables.inventories.c.used)
                                  .order_by(tables.inventories.c.resource_provider_id)
                                  ).scalars().all()
    assert {provider: entry["resources"] for provider, entry in view.allocations.items()} == {
        PROVIDERS[1]: {"VCPU": 1}}
    assert used[:2] == [0, 1]
