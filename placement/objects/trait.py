"""Traits: name <-> id resolution, the trait catalogue (standard traits
from os-traits, custom ``CUSTOM_*`` ones made by users) and the traits of
each provider."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable

import sqlalchemy as sa
from oslo_db import exception as db_exc
from oslo_utils import timeutils

from placement import exceptions
from placement.db import api as db_api
from placement.db import tables
from placement.objects import resource_provider as rp_obj
from placement.objects.resource_provider import ResourceProvider

_trait = tables.traits
_rp_trait = tables.resource_provider_traits
CUSTOM_PREFIX = "CUSTOM_"


@dataclasses.dataclass
class Trait:
    id: int
    name: str
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None

    @property
    def last_modified(self) -> datetime.datetime | None:
        return self.updated_at or self.created_at


def _select_traits() -> sa.Select:
    return sa.select(_trait.c.id, _trait.c.name, _trait.c.created_at, _trait.c.updated_at)


def _traits(connection: sa.engine.Connection, query: sa.Select) -> list[Trait]:
    return [Trait(**row._mapping) for row in connection.execute(query.order_by(_trait.c.id))]


# Built once per size of the list, run as the driver's own SQL: every
# candidates request with traits names them, and so do the resource
# trackers' sharing-provider lists several times a second; building the
# statement cost more than running it.
_IDS_BY_NAME = db_api.SizedStatement(lambda names: sa.select(_trait.c.name, _trait.c.id).where(
    db_api.bound_in(_trait.c.name, "names", names)))


def ids_from_names(connection: sa.engine.Connection, names: Iterable[str]) -> dict[str, int]:
    """{name: id} for every name; NotFound listing the unknown ones."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    found = dict(_IDS_BY_NAME.driver_rows(connection, names=names))
    missing = [name for name in names if name not in found]
    if missing:
        raise exceptions.NotFound(f"No such trait(s): {', '.join(missing)}.")
    return found


def list_traits(connection: sa.engine.Connection, names: Iterable[str] | None = None,
                prefix: str | None = None, associated: bool | None = None) -> list[Trait]:
    """Traits filtered by exact names, name prefix and whether any provider
    has them (each filter applies when not None)."""
    query = _select_traits()
    if names is not None:
        query = query.where(_trait.c.name.in_(list(names)))
    if prefix is not None:
        # Not LIKE: SQLite's ignores letter case.
        query = query.where(sa.func.substr(_trait.c.name, 1, len(prefix)) == prefix)
    if associated is not None:
        in_use = _trait.c.id.in_(sa.select(_rp_trait.c.trait_id))
        query = query.where(in_use if associated else sa.not_(in_use))
    return _traits(connection, query)


def get(connection: sa.engine.Connection, name: str) -> Trait:
    row = connection.execute(_select_traits().where(_trait.c.name == name)).one_or_none()
    if row is None:
        raise exceptions.NotFound(f"No such trait(s): {name}.")
    return Trait(**row._mapping)


def ensure(connection: sa.engine.Connection, name: str) -> tuple[Trait, bool]:
    """The trait ``name``, created if needed; True when it was created."""
    try:
        return get(connection, name), False
    except exceptions.NotFound:
        pass
    try:
        connection.execute(sa.insert(_trait).values(
            name=name, created_at=timeutils.utcnow().replace(tzinfo=None)))
    except db_exc.DBDuplicateEntry as error:
        # Created by a concurrent request since our read. Under REPEATABLE
        # READ (MySQL) this transaction can never see that row: do the
        # whole write again in a new transaction (db_api.write retries),
        # which then finds the trait.
        raise db_exc.RetryRequest(error) from None
    return get(connection, name), True


def delete(connection: sa.engine.Connection, name: str) -> None:
    """Delete a custom trait no provider uses."""
    trait = get(connection, name)
    if not name.startswith(CUSTOM_PREFIX):
        raise exceptions.InvalidInput(f"Cannot delete standard trait {name}.")
    if connection.scalar(sa.select(_rp_trait.c.trait_id)
                         .where(_rp_trait.c.trait_id == trait.id).limit(1)) is not None:
        raise exceptions.Conflict(f"The trait {name} is in use by a resource provider.")
    connection.execute(sa.delete(_trait).where(_trait.c.id == trait.id))


def of_provider(connection: sa.engine.Connection, provider: ResourceProvider) -> list[Trait]:
    query = _select_traits().join(_rp_trait, _rp_trait.c.trait_id == _trait.c.id).where(
        _rp_trait.c.resource_provider_id == provider.id)
    return _traits(connection, query)


def replace_for_provider(connection: sa.engine.Connection, provider: ResourceProvider,
                         names: Iterable[str]) -> list[Trait]:
    """Make ``names`` exactly the provider's traits; the generation goes up
    only when the set changes. InvalidInput (``No such trait A, B``) for
    unknown names, before anything is written."""
    names = list(dict.fromkeys(names))
    wanted = _traits(connection, _select_traits().where(_trait.c.name.in_(names)))
    missing = set(names) - {trait.name for trait in wanted}
    if missing:
        raise exceptions.InvalidInput(f"No such trait {', '.join(sorted(missing))}")
    wanted_ids = {trait.id for trait in wanted}
    current_ids = {trait.id for trait in of_provider(connection, provider)}
    if wanted_ids != current_ids:
        rp_obj.increment_generation(connection, provider)
        rp_obj.replace_links(connection, _rp_trait.c.trait_id, provider, current_ids, wanted_ids)
    return wanted


def delete_for_provider(connection: sa.engine.Connection, provider: ResourceProvider) -> None:
    """Remove all the provider's traits; the generation goes up if it had any."""
    if of_provider(connection, provider):
        rp_obj.increment_generation(connection, provider)
        connection.execute(sa.delete(_rp_trait).where(
            _rp_trait.c.resource_provider_id == provider.id))


def set_for_provider(connection: sa.engine.Connection, provider_uuid: str,
                     names: Iterable[str], generation: int
                     ) -> tuple[ResourceProvider, list[Trait]]:
    """Replace the traits of provider ``provider_uuid``, whose generation
    the client says is ``generation``; the provider and its new traits."""
    provider = rp_obj.get_by_uuid(connection, provider_uuid)
    rp_obj.check_generation(provider, generation)
    traits = replace_for_provider(connection, provider, names)
    if provider.generation == generation:
        # Nothing changed, so no compare-and-swap guarded this write. In READ
        # COMMITTED a writer that committed after the provider was read may
        # have set these very traits: the generation must not have moved.
        rp_obj.check_generation(rp_obj.get_by_uuid(connection, provider_uuid), generation)
    return provider, traits


def delete_all_for_provider(connection: sa.engine.Connection, provider_uuid: str) -> None:
    delete_for_provider(connection, rp_obj.get_by_uuid(connection, provider_uuid))
