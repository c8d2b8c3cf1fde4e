"""The schema migrations build exactly the models of placement/db/tables.py,
on every backend; fresh test databases hold nothing but the standard data."""

from __future__ import annotations

import os_resource_classes
import os_traits
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import migration, provider_changes, tables
from tests import db as test_db


def test_migrations_from_empty_to_head_match_the_models(backend):
    url = test_db.empty_database_url(backend)
    engine = db_api.create_engine(url)
    try:
        migration.upgrade(engine)
        assert migration.current_revision(engine) == migration.head_revision()
    finally:
        engine.dispose()
    assert test_db.schema_differences(url) == []


def _count(connection: sa.engine.Connection, table: sa.Table) -> int:
    return connection.scalar(sa.select(sa.func.count()).select_from(table))


def test_a_fresh_database_holds_only_the_standard_data(backend):
    dirty = test_db.FreshDatabase(backend)
    with dirty.db.writer() as connection:
        connection.execute(tables.resource_providers.insert(), [
            {"id": 1, "uuid": "a" * 36, "name": "root", "generation": 0},
        ])
        connection.execute(tables.resource_providers.insert(), [
            {"id": 2, "uuid": "b" * 36, "name": "child", "generation": 0,
             "root_provider_id": 1, "parent_provider_id": 1},
        ])
        connection.execute(tables.resource_classes.insert(), [{"id": 10000, "name": "CUSTOM_X"}])
        connection.execute(tables.traits.insert(), [{"name": "CUSTOM_Y"}])
        connection.execute(tables.allocations.insert(), [
            {"resource_provider_id": 2, "consumer_id": "c" * 36, "resource_class_id": 0,
             "used": 1},
        ])
    dirty.close()

    fresh = test_db.FreshDatabase(backend)
    try:
        with fresh.db.reader() as connection:
            for table in tables.metadata.sorted_tables:
                if table is tables.resource_classes:
                    assert _count(connection, table) == len(os_resource_classes.STANDARDS)
                elif table is tables.traits:
                    assert _count(connection, table) == len(os_traits.get_traits())
                elif table is tables.provider_change_shards or table is tables.usage_change_shards:
                    assert _count(connection, table) == provider_changes.RELOAD_SHARD + 1
                else:
                    assert _count(connection, table) == 0, table.name
    finally:
        fresh.close()


def test_inventory_usages_are_computed_for_the_allocations_already_there(backend):
    """A database written before inventories carried their usage (0003)
    gets each inventory's sum of allocations as it is upgraded."""
    engine = db_api.create_engine(test_db.empty_database_url(backend))
    try:
        migration.upgrade(engine, "0003")
        with engine.begin() as connection:
            connection.execute(sa.text(
                "INSERT INTO resource_providers (id, uuid, name, generation, root_provider_id)"
                " VALUES (1, :uuid, 'cn', 0, 1)"), {"uuid": "a" * 36})
            connection.execute(sa.text(
                "INSERT INTO inventories (resource_provider_id, resource_class_id, total,"
                " reserved, min_unit, max_unit, step_size, allocation_ratio)"
                " VALUES (1, 0, 8, 0, 1, 8, 1, 1.0), (1, 1, 1024, 0, 1, 1024, 1, 1.0)"))
            connection.execute(sa.text(
                "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id,"
                " used) VALUES (1, :first, 0, 2), (1, :second, 0, 3)"),
                {"first": "b" * 36, "second": "c" * 36})
        migration.upgrade(engine)
        with engine.connect() as connection:
            usages = dict(connection.execute(sa.select(
                tables.inventories.c.resource_class_id, tables.inventories.c.used)).all())
        assert usages == {0: 5, 1: 0}
    finally:
        engine.dispose()
