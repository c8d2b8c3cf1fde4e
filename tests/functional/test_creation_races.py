"""An aggregate or trait created by a concurrent request between our read
and our insert: the write starts again in a new transaction (under MySQL's
REPEATABLE READ the old transaction could never see the other's row)."""

from __future__ import annotations

import uuid as uuid_lib

import pytest
import sqlalchemy as sa

from placement import exceptions
from placement.db import api as db_api
from placement.db import tables
from placement.objects import aggregate as aggregate_obj
from placement.objects import resource_provider as rp_obj
from placement.objects import trait as trait_obj
from tests.db import FreshDatabase


@pytest.fixture
def db():
    database = FreshDatabase()
    yield database.db
    database.close()


@pytest.fixture
def transactions(db, monkeypatch):
    """Counts the writer transactions opened on ``db``."""
    opened = []
    writer = db.writer

    def counting_writer():
        opened.append(1)
        return writer()

    monkeypatch.setattr(db, "writer", counting_writer)
    return opened


def _blind_first_time(monkeypatch, module, name, blind_result):
    """Make ``module.name`` answer ``blind_result()`` on its first call, as a
    read from a snapshot older than a concurrent insert would."""
    real = getattr(module, name)
    calls = []

    def first_blind(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            return blind_result()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, first_blind)


def test_aggregate_created_meanwhile_retries_in_a_new_transaction(db, transactions,
                                                                  monkeypatch):
    provider_uuid, aggregate_uuid = str(uuid_lib.uuid4()), str(uuid_lib.uuid4())
    db_api.write(db, rp_obj.create, "rp", provider_uuid)
    with db.writer() as conn:
        conn.execute(sa.insert(tables.placement_aggregates).values(uuid=aggregate_uuid))
    transactions.clear()
    _blind_first_time(monkeypatch, aggregate_obj, "_existing_ids", dict)

    db_api.write(db, aggregate_obj.set_for_provider, provider_uuid, [aggregate_uuid])

    assert len(transactions) == 2
    with db.reader() as conn:
        provider = rp_obj.get_by_uuid(conn, provider_uuid)
        assert aggregate_obj.uuids_of(conn, provider) == [aggregate_uuid]
        assert conn.scalar(sa.select(sa.func.count()).select_from(
            tables.placement_aggregates)) == 1


def test_trait_created_meanwhile_retries_in_a_new_transaction(db, transactions, monkeypatch):
    db_api.write(db, trait_obj.ensure, "CUSTOM_RACED")
    transactions.clear()

    def not_found():
        raise exceptions.NotFound("No such trait(s): CUSTOM_RACED.")

    _blind_first_time(monkeypatch, trait_obj, "get", not_found)

    trait, created = db_api.write(db, trait_obj.ensure, "CUSTOM_RACED")

    assert (trait.name, created) == ("CUSTOM_RACED", False)
    assert len(transactions) == 2
