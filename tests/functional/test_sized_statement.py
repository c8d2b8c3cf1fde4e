"""Statements whose IN lists have one bind parameter per value, built once
per size class of the lists: they select what an IN of the values does."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import tables
from tests.db import FreshDatabase
from tests.fixtures.seed import create_provider

_rp = tables.resource_providers

BY_UUIDS_AND_IDS = db_api.SizedStatement(lambda uuids, ids: (
    sa.select(_rp.c.name)
    .where(db_api.bound_in(_rp.c.uuid, "uuids", uuids), db_api.bound_in(_rp.c.id, "ids", ids))))


@pytest.fixture
def database():
    database = FreshDatabase()
    yield database.db
    database.close()


@pytest.fixture
def providers(database) -> tuple[list[str], list[int]]:
    """The uuids and ids of providers rp-0 to rp-8."""
    uuids = [str(uuid.uuid4()) for _ in range(9)]
    with database.writer() as connection:
        ids = [create_provider(connection, provider_uuid, f"rp-{index}")
               for index, provider_uuid in enumerate(uuids)]
    return uuids, ids


def test_selects_what_the_values_select(database, providers):
    uuids, ids = providers
    with database.reader() as connection:
        for count in range(len(uuids) + 1):
            statement, parameters = BY_UUIDS_AND_IDS(uuids=uuids[:count], ids=ids)
            names = connection.execute(statement, parameters).scalars().all()
            assert sorted(names) == sorted(f"rp-{index}" for index in range(count)), count
        # Values repeated or unknown change nothing either.
        statement, parameters = BY_UUIDS_AND_IDS(uuids=[uuids[1], uuids[1], "nope"],
                                                 ids=ids[1:3])
        assert connection.execute(statement, parameters).scalars().all() == ["rp-1"]


def test_one_statement_per_size_class():
    built = {id(BY_UUIDS_AND_IDS(uuids=["u"] * count, ids=[1])[0]) for count in (5, 6, 7, 8)}
    assert len(built) == 1
    statement, parameters = BY_UUIDS_AND_IDS(uuids=["a", "b", "c"], ids=[1])
    assert parameters == {"uuids_0": "a", "uuids_1": "b", "uuids_2": "c", "uuids_3": "c",
                          "ids_0": 1}


# A literal (generation >= 0) is a parameter SQLAlchemy binds itself.
IDS_AND_NAMES = db_api.SizedStatement(lambda uuids: (
    sa.select(_rp.c.id, _rp.c.name)
    .where(db_api.bound_in(_rp.c.uuid, "uuids", uuids), _rp.c.generation >= 0)))


def test_driver_rows_are_the_statements_rows(database, providers):
    uuids, ids = providers
    with database.reader() as connection:
        for count in range(1, len(uuids) + 1):
            rows = IDS_AND_NAMES.driver_rows(connection, uuids=uuids[:count])
            assert sorted(rows) == sorted(zip(ids[:count], (f"rp-{index}" for index in range(
                count)), strict=True)), count
            statement, parameters = IDS_AND_NAMES(uuids=uuids[:count])
            assert sorted(rows) == sorted(tuple(row) for row in connection.execute(
                statement, parameters))
        assert BY_UUIDS_AND_IDS.driver_rows(connection, uuids=[uuids[2], "nope"],
                                            ids=ids) == [("rp-2",)]
