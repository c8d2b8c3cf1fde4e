"""The generation compare-and-swap shared by providers and consumers."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

import sqlalchemy as sa


class Generational(Protocol):
    """A row as read: its id and the generation it had then."""

    id: int
    generation: int


@functools.lru_cache(maxsize=64)
def _statement(table: sa.Table, count: int, value_names: tuple[str, ...]) -> sa.Update:
    """The UPDATE for ``count`` records setting ``value_names`` too, built
    once per shape (building it cost as much as running it). Bind
    parameters: ``record_id_<i>`` and ``record_generation_<i>`` per
    record, ``value_<name>`` per value (names SQLAlchemy's own anonymous
    parameters, like ``generation_1``, cannot take)."""
    matches = (sa.and_(table.c.id == sa.bindparam(f"record_id_{index}"),
                       table.c.generation == sa.bindparam(f"record_generation_{index}"))
               for index in range(count))
    return (
        sa.update(table)
        .where(sa.or_(*matches))
        .values(generation=table.c.generation + 1,
                **{name: sa.bindparam(f"value_{name}", type_=table.c[name].type)
                   for name in value_names}))


def compare_and_swap(connection: sa.engine.Connection, table: sa.Table,
                     records: Sequence[Generational], **values: object) -> bool:
    """Move every record's generation to the next one in one UPDATE (with
    ``values`` set too), provided none moved since it was read. False when
    any did: nothing is bumped in memory and the caller, which raises, must
    roll back its transaction. The records are updated in place."""
    if not records:
        return True
    parameters = {f"value_{name}": value for name, value in values.items()}
    for index, record in enumerate(records):
        parameters[f"record_id_{index}"] = record.id
        parameters[f"record_generation_{index}"] = record.generation
    result = connection.execute(_statement(table, len(records), tuple(sorted(values))),
                                parameters)
    if result.rowcount != len(records):
        return False
    for record in records:
        record.generation += 1
    return True
