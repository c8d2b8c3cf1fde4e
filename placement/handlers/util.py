"""Helpers the handlers of several resources share: the provider named by
the path, a consumer's entry of an allocations body."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
import webob

from placement import errors, exceptions, microversion, versions, wsgi_util
from placement.objects import allocation as allocation_obj
from placement.objects import consumer as consumer_obj
from placement.objects import resource_provider as rp_obj

T = TypeVar("T")


def path_provider(connection: sa.engine.Connection, request: webob.Request,
                  not_found: str) -> rp_obj.ResourceProvider:
    """The provider named by the path's ``uuid``; ``not_found`` as in
    ``path_lookup``."""
    return path_lookup(request, not_found, functools.partial(rp_obj.get_by_uuid, connection))


def path_lookup(request: webob.Request, not_found: str, lookup: Callable[[str], T]) -> T:
    """``lookup`` of the path's ``uuid``. Routes word its 404 in their own
    ways (as upstream does): ``not_found`` is the message, a template with
    ``{uuid}`` and ``{error}`` (the lookup's NotFound message)."""
    uuid = request.urlvars["uuid"]
    try:
        return lookup(uuid)
    except exceptions.NotFound as error:
        raise errors.not_found(not_found.format(uuid=uuid, error=error)) from None


def require_provider(request: webob.Request) -> rp_obj.ResourceProvider:
    """The provider of the path, read in a transaction of its own. Write
    routes call this before parsing the body, so that a missing provider is
    a 404 before any body error."""
    with wsgi_util.context_of(request).db.reader() as connection:
        return rp_obj.get_by_uuid(connection, request.urlvars["uuid"])


def consumer_request(request: webob.Request, consumer_uuid: str, data: dict
                      ) -> allocation_obj.ConsumerAllocations:
    """One consumer's entry of a PUT or POST body (dict form), as a write
    request: the owner (the configured "incomplete" one below 1.8), the type
    (1.38+) and the expected generation (1.28+)."""
    version = microversion.version_of(request)
    if version >= versions.ALLOCATION_OWNER:
        owner = consumer_obj.Owner(data["project_id"], data["user_id"],
                                   data.get("consumer_type"))
    else:
        conf = wsgi_util.context_of(request).conf.placement
        owner = consumer_obj.Owner(conf.incomplete_consumer_project_id,
                                   conf.incomplete_consumer_user_id)
    return allocation_obj.ConsumerAllocations(
        consumer_uuid=consumer_uuid,
        allocations={provider_uuid: entry["resources"]
                     for provider_uuid, entry in data["allocations"].items()},
        owner=owner,
        check_generation=version >= versions.CONSUMER_GENERATION,
        generation=data.get("consumer_generation"),
    )
