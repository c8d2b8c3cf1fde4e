"""Resource classes: name <-> id resolution.

Standard classes have the id of their position in os-resource-classes and
never change, so they are resolved without the database; custom classes
(id >= 10000) are looked up, as another process may create or delete them.
"""

from __future__ import annotations

from collections.abc import Iterable

import os_resource_classes
import sqlalchemy as sa

from placement import exceptions
from placement.db import tables

STANDARD_IDS: dict[str, int] = {name: i for i, name in enumerate(os_resource_classes.STANDARDS)}
STANDARD_NAMES: dict[int, str] = {i: name for name, i in STANDARD_IDS.items()}
CUSTOM_ID_START = 10000
_rc = tables.resource_classes


def ids_from_names(connection: sa.engine.Connection, names: Iterable[str]
                   ) -> dict[str, int]:
    """{name: id} for every name; NotFound naming the first unknown one."""
    names = list(dict.fromkeys(names))
    found = {name: STANDARD_IDS[name] for name in names if name in STANDARD_IDS}
    custom = [name for name in names if name not in found]
    if custom:
        rows = connection.execute(sa.select(_rc.c.name, _rc.c.id).where(_rc.c.name.in_(custom)))
        found.update({row.name: row.id for row in rows})
    for name in names:
        if name not in found:
            raise exceptions.NotFound(f"No such resource class {name}.")
    return found


def id_from_name(connection: sa.engine.Connection, name: str) -> int:
    return ids_from_names(connection, [name])[name]


def names_from_ids(connection: sa.engine.Connection, ids: Iterable[int]) -> dict[int, str]:
    ids = set(ids)
    found = {i: STANDARD_NAMES[i] for i in ids if i in STANDARD_NAMES}
    custom = ids - found.keys()
    if custom:
        rows = connection.execute(sa.select(_rc.c.id, _rc.c.name).where(_rc.c.id.in_(custom)))
        found.update({row.id: row.name for row in rows})
    return found
