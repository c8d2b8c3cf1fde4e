"""An aggregate or trait created by a concurrent request between our read
and our insert. Under MySQL's REPEATABLE READ a plain read in the same
transaction could never see the other's row: aggregates are re-read with a
locking read, a trait write starts again in a new transaction."""

from __future__ import annotations

import uuid as uuid_lib

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

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


def test_aggregate_created_meanwhile_is_reread_with_a_locking_read(db, monkeypatch):
    """Under REPEATABLE READ only a locking read sees a row committed after
    the transaction's first read; SQLite drops FOR UPDATE, so the statements
    are checked as MySQL would get them."""
    provider_uuid, aggregate_uuid = str(uuid_lib.uuid4()), str(uuid_lib.uuid4())
    db_api.write(db, rp_obj.create, "rp", provider_uuid)
    with db.writer() as conn:
        conn.execute(sa.insert(tables.placement_aggregates).values(uuid=aggregate_uuid))
    _blind_first_time(monkeypatch, aggregate_obj, "_existing_ids", dict)
    selects = []

    @sa.event.listens_for(db.engine, "before_execute")
    def record(conn, clause, multiparams, params, execution_options):
        if isinstance(clause, sa.Select):
            selects.append(str(clause.compile(dialect=mysql.dialect())))

    db_api.write(db, aggregate_obj.set_for_provider, provider_uuid, [aggregate_uuid])
    sa.event.remove(db.engine, "before_execute", record)

    assert any("FROM placement_aggregates" in sql and sql.endswith("FOR UPDATE")
               for sql in selects)
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


def test_aggregate_linked_meanwhile_is_an_update_conflict(db, monkeypatch):
    """Two writers below 1.19 linking the same aggregate to one provider:
    the later one gets ConcurrentUpdate ("Update conflict", a 409), not a
    database error, and its transaction changes nothing."""
    provider_uuid, aggregate_uuid = str(uuid_lib.uuid4()), str(uuid_lib.uuid4())
    db_api.write(db, rp_obj.create, "rp", provider_uuid)
    db_api.write(db, aggregate_obj.set_for_provider, provider_uuid, [aggregate_uuid])
    _blind_first_time(monkeypatch, aggregate_obj, "_linked_ids", set)

    with pytest.raises(exceptions.ConcurrentUpdate, match="^Update conflict: "):
        db_api.write(db, aggregate_obj.set_for_provider, provider_uuid, [aggregate_uuid])

    with db.reader() as conn:
        provider = rp_obj.get_by_uuid(conn, provider_uuid)
        assert aggregate_obj.uuids_of(conn, provider) == [aggregate_uuid]
        assert provider.generation == 0


@pytest.mark.parametrize("new_parent", ["other", None])
def test_tree_moves_first_lock_the_trees_involved(db, new_parent):
    """Two concurrent moves can make a loop together (A under a child of B,
    B under a child of A) while each alone is fine: a move starts by locking
    the moved provider, the new parent and their roots, before any plain read
    (which would fix a MySQL REPEATABLE READ snapshot). SQLite drops FOR
    UPDATE, so the statements are checked as MySQL would get them."""
    moved, other = str(uuid_lib.uuid4()), str(uuid_lib.uuid4())
    db_api.write(db, rp_obj.create, "moved", moved)
    db_api.write(db, rp_obj.create, "other", other)
    parent_uuid = other if new_parent else None
    statements = []

    @sa.event.listens_for(db.engine, "before_execute")
    def record(conn, clause, multiparams, params, execution_options):
        if isinstance(clause, sa.Select):
            statements.append(clause)

    db_api.write(db, rp_obj.update, moved, "moved", parent_uuid, allow_reparenting=True)
    sa.event.remove(db.engine, "before_execute", record)

    first = statements[0]
    assert str(first.compile(dialect=mysql.dialect())).endswith("FOR UPDATE")
    locked_uuids = first.whereclause.right.value
    assert set(locked_uuids) == ({moved, other} if new_parent else {moved})


def test_provider_deleted_meanwhile_is_not_found_for_delete(db, monkeypatch):
    """A second concurrent DELETE read the provider before the first one
    committed: it must answer 404, not claim a deletion it did not do."""
    uuid = str(uuid_lib.uuid4())
    stale = db_api.write(db, rp_obj.create, "doomed", uuid)
    db_api.write(db, rp_obj.delete, uuid)
    monkeypatch.setattr(rp_obj, "find_by_uuid", lambda connection, wanted: stale)

    with pytest.raises(exceptions.NotFound, match=f"^No resource provider with uuid {uuid} "
                                                  "found for delete$"):
        db_api.write(db, rp_obj.delete, uuid)
