"""The generation compare-and-swap of several rows in one statement."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
import sqlalchemy as sa
from oslo_utils import timeutils

from placement.db import tables
from placement.objects.generation import compare_and_swap
from tests.fixtures.seed import create_provider

_rp = tables.resource_providers


@dataclasses.dataclass
class Row:
    id: int
    generation: int


@pytest.fixture
def database(database):
    return database.db


def generations(db) -> dict[int, int]:
    with db.reader() as connection:
        return dict(connection.execute(sa.select(_rp.c.id, _rp.c.generation)).all())


@pytest.mark.parametrize("count", [1, 2, 3])
def test_every_row_moves_on_or_none(database, count):
    with database.writer() as connection:
        ids = [create_provider(connection, str(uuid.uuid4()), f"rp-{index}")
               for index in range(count)]
    rows = [Row(row_id, 0) for row_id in ids]
    stamp = timeutils.utcnow().replace(microsecond=0)
    with database.writer() as connection:
        assert compare_and_swap(connection, _rp, rows, updated_at=stamp)
    assert [row.generation for row in rows] == [1] * count
    assert generations(database) == dict.fromkeys(ids, 1)
    with database.reader() as connection:
        assert set(connection.execute(sa.select(_rp.c.updated_at)).scalars()) == {stamp}

    stale = [Row(row.id, row.generation) for row in rows]
    stale[-1].generation = 0
    with database.writer() as connection:
        assert not compare_and_swap(connection, _rp, stale)
        connection.rollback()
    assert [row.generation for row in stale] == [1] * (count - 1) + [0]
    assert generations(database) == dict.fromkeys(ids, 1)
