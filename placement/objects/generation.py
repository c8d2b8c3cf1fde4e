"""The generation compare-and-swap shared by providers and consumers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import sqlalchemy as sa


class Generational(Protocol):
    """A row as read: its id and the generation it had then."""

    id: int
    generation: int


def compare_and_swap(connection: sa.engine.Connection, table: sa.Table,
                     records: Sequence[Generational], **values: object) -> bool:
    """Move every record's generation to the next one in one UPDATE (with
    ``values`` set too), provided none moved since it was read. False when
    any did: nothing is bumped in memory and the caller, which raises, must
    roll back its transaction. The records are updated in place."""
    if not records:
        return True
    result = connection.execute(
        sa.update(table)
        .where(sa.or_(*(sa.and_(table.c.id == record.id,
                                table.c.generation == record.generation)
                        for record in records)))
        .values(generation=table.c.generation + 1, **values))
    if result.rowcount != len(records):
        return False
    for record in records:
        record.generation += 1
    return True
