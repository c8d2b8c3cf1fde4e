"""The usages counts read: per class, one statement the first time a
count asks for it (a scrape of many shapes reads each of their classes
once), its (provider id, used) rows made a dict at C speed."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from placement.capacity.tables import ClassTable, Used, free_room
from placement.db import tables

_inv = tables.inventories

_USED = sa.select(_inv.c.resource_provider_id, _inv.c.used).where(
    _inv.c.resource_class_id == sa.bindparam("class_id"), _inv.c.used != 0)


class Usages:
    """The usages of one transaction, as counts look them up."""

    def __init__(self, connection: sa.engine.Connection):
        self._connection = connection
        self._by_class: dict[int, dict[int, int]] = {}
        # id of a table -> the table (kept: the id stays its own) and its
        # free_room: the shapes of a scrape share their tables (one per
        # class and filter); a table's tuples are too long to hash
        self._rooms: dict[int, tuple[ClassTable, list[int]]] = {}

    def of(self, class_id: int) -> dict[int, int]:
        """Provider id -> used, of the class, where any is."""
        used = self._by_class.get(class_id)
        if used is None:
            used = self._by_class[class_id] = dict(
                self._connection.execute(_USED, {"class_id": class_id}).all())
        return used

    def pairs(self, class_ids: Iterable[int]) -> Used:
        """(provider id, class id) -> used, of these classes."""
        return {(provider_id, class_id): amount for class_id in class_ids
                for provider_id, amount in self.of(class_id).items()}

    def room(self, class_id: int, table: ClassTable) -> list[int]:
        """``free_room`` of ``table``, a table of the class."""
        kept = self._rooms.get(id(table))
        if kept is None:
            kept = self._rooms[id(table)] = (table, free_room(table, self.of(class_id)))
        return kept[1]
