"""Traits: name <-> id resolution."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from placement import exceptions
from placement.db import tables

_trait = tables.traits


def ids_from_names(connection: sa.engine.Connection, names: Iterable[str]) -> dict[str, int]:
    """{name: id} for every name; NotFound listing the unknown ones."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    rows = connection.execute(sa.select(_trait.c.name, _trait.c.id).where(_trait.c.name.in_(names)))
    found = {row.name: row.id for row in rows}
    missing = [name for name in names if name not in found]
    if missing:
        raise exceptions.NotFound(f"No such trait(s): {', '.join(missing)}.")
    return found
