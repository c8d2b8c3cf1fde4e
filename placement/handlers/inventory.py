"""/resource_providers/{uuid}/inventories and .../inventories/{resource_class}.

Write routes look the provider up first (404 before any body error), then
parse the body, then do the change in one writer transaction that reads the
provider again, so that generation checks compare against its current state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import sqlalchemy as sa
import webob
import webob.exc

from placement import errors, exceptions, microversion, versions, wsgi_util
from placement.db import api as db_api
from placement.handlers import util as handler_util
from placement.objects import inventory as inventory_obj
from placement.objects import resource_provider
from placement.objects.inventory import Inventory
from placement.objects.resource_class import ResourceClassNotFound
from placement.objects.resource_provider import ResourceProvider
from placement.schemas import inventory as schema

# From 1.26 an inventory may reserve all of its total (capacity 0).


def _reserved_may_equal_total(request: webob.Request) -> bool:
    return microversion.version_of(request) >= versions.RESERVED_MAY_EQUAL_TOTAL


def _write(request: webob.Request,
           change: Callable[[sa.engine.Connection, ResourceProvider], None]
           ) -> ResourceProvider:
    """Run ``change`` on the provider of the path, freshly read, in a writer
    transaction (retried as a whole on deadlocks); the updated provider."""

    def changed(connection: sa.engine.Connection) -> ResourceProvider:
        provider = resource_provider.get_by_uuid(connection, request.urlvars["uuid"])
        change(connection, provider)
        return provider

    return db_api.write(wsgi_util.context_of(request).db, changed)


def _check_generation(provider: ResourceProvider, data: dict) -> None:
    if data["resource_provider_generation"] != provider.generation:
        raise errors.conflict("resource provider generation conflict", errors.CONCURRENT_UPDATE)


def _single(provider: ResourceProvider, inventory: Inventory) -> dict:
    return {"resource_provider_generation": provider.generation, **inventory.fields()}


def _collection(provider: ResourceProvider, inventories: Iterable[Inventory]) -> dict:
    return {
        "resource_provider_generation": provider.generation,
        "inventories": {inventory.resource_class: inventory.fields()
                        for inventory in inventories},
    }


def _read(request: webob.Request) -> tuple[ResourceProvider, dict[str, Inventory]]:
    """Common part of the GET routes: the provider and its inventories."""
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as connection:
        # Upstream's odd spacing: "... found : No resource provider ...".
        provider = handler_util.path_provider(
            connection, request, "No resource provider with uuid {uuid} found : {error}")
        return provider, inventory_obj.get_all(connection, provider)


def get_inventories(request: webob.Request) -> webob.Response:
    provider, inventories = _read(request)
    return wsgi_util.json_response(
        request, _collection(provider, inventories.values()), cache_headers=True,
        last_modified=wsgi_util.newest(inv.last_modified() for inv in inventories.values()))


def get_inventory(request: webob.Request) -> webob.Response:
    provider, inventories = _read(request)
    resource_class = request.urlvars["resource_class"]
    inventory = inventories.get(resource_class)
    if inventory is None:
        raise errors.not_found(f"No inventory of class {resource_class} for {provider.uuid}")
    return wsgi_util.json_response(request, _single(provider, inventory), cache_headers=True,
                                   last_modified=inventory.last_modified())


def create_inventory(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    wsgi_util.authorize(request)
    uuid = handler_util.require_provider(request).uuid
    data = wsgi_util.extract_json(request, schema.POST_INVENTORY)
    inventory = Inventory.from_fields(data["resource_class"], data)

    def add(connection: sa.engine.Connection, provider: ResourceProvider) -> None:
        inventory_obj.check_capacity(provider.uuid, [inventory],
                                     _reserved_may_equal_total(request))
        inventory_obj.add(connection, provider, inventory)

    try:
        provider = _write(request, add)
    except (inventory_obj.InvalidCapacity, ResourceClassNotFound) as error:
        raise errors.bad_request(
            f"Unable to create inventory for resource provider {uuid}: {error}") from None
    except exceptions.Conflict as error:
        raise errors.conflict(f"Update conflict: {error}", errors.CONCURRENT_UPDATE) from None
    location = wsgi_util.url(
        request, f"/resource_providers/{uuid}/inventories/{inventory.resource_class}")
    return wsgi_util.json_response(request, _single(provider, inventory), status=201,
                                   cache_headers=True, location=location)


def update_inventory(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    wsgi_util.authorize(request)
    uuid = handler_util.require_provider(request).uuid
    data = wsgi_util.extract_json(request, schema.PUT_INVENTORY)
    inventory = Inventory.from_fields(request.urlvars["resource_class"], data)

    def update(connection: sa.engine.Connection, provider: ResourceProvider) -> None:
        _check_generation(provider, data)
        inventory_obj.check_capacity(provider.uuid, [inventory],
                                     _reserved_may_equal_total(request))
        inventory_obj.update(connection, provider, inventory)

    try:
        provider = _write(request, update)
    except inventory_obj.InvalidCapacity as error:
        raise errors.bad_request(
            f"Unable to update inventory for resource provider {uuid}: {error}") from None
    except inventory_obj.InventoryNotFound as error:
        raise errors.bad_request(
            "No inventory record with resource class for resource provider "
            f"{uuid}: {error}") from None
    except exceptions.ConcurrentUpdate as error:
        raise errors.conflict(f"update conflict: {error}", error.code) from None
    # An unknown class (ResourceClassNotFound) is left to become a 404: an
    # upstream quirk clients see.
    return wsgi_util.json_response(request, _single(provider, inventory), cache_headers=True)


def _records(inventories: dict[str, dict]) -> list[Inventory]:
    """The inventories of a PUT-all body. Records under keys that are no
    class name escaped the schema (it only checks keys matching the class
    name pattern); they are refused as the unknown classes they are."""
    for name in inventories:
        if not re.match(schema.RC_PATTERN, name):
            raise ResourceClassNotFound(name)
    return [Inventory.from_fields(name, fields) for name, fields in inventories.items()]


def set_inventories(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    wsgi_util.authorize(request)
    uuid = handler_util.require_provider(request).uuid
    data = wsgi_util.extract_json(request, schema.PUT_INVENTORIES)
    inventories: list[Inventory] = []

    def replace(connection: sa.engine.Connection, provider: ResourceProvider) -> None:
        _check_generation(provider, data)
        inventories[:] = _records(data["inventories"])
        inventory_obj.check_capacity(provider.uuid, inventories,
                                     _reserved_may_equal_total(request))
        inventory_obj.replace_inventories(connection, provider, inventories)

    try:
        provider = _write(request, replace)
    except inventory_obj.InvalidCapacity as error:
        raise errors.bad_request(
            f"Unable to update inventory for resource provider {uuid}: {error}") from None
    except ResourceClassNotFound as error:
        raise errors.bad_request(
            f"Unknown resource class in inventory for resource provider {uuid}: {error}"
        ) from None
    except (inventory_obj.InventoryInUse, exceptions.ConcurrentUpdate) as error:
        raise errors.conflict(f"update conflict: {error}", error.code) from None
    return wsgi_util.json_response(
        request, _collection(provider, inventories),
        cache_headers=True)


def delete_inventories(request: webob.Request) -> webob.Response:
    wsgi_util.authorize(request)
    uuid = handler_util.require_provider(request).uuid
    try:
        _write(request, lambda connection, provider:
               inventory_obj.replace_inventories(connection, provider, []))
    except exceptions.ConcurrentUpdate as error:
        raise errors.conflict(
            f"Unable to delete inventory for resource provider {uuid} because the "
            "inventory was updated by another process. Please retry your request.",
            error.code) from None
    return wsgi_util.empty_response(request)


def delete_inventory(request: webob.Request) -> webob.Response:
    wsgi_util.authorize(request)
    handler_util.require_provider(request)
    resource_class = request.urlvars["resource_class"]
    not_found = f"No inventory of class {resource_class} found for delete"
    try:
        _write(request, lambda connection, provider:
               inventory_obj.delete(connection, provider, resource_class))
    except inventory_obj.InventoryNotFound:
        raise errors.not_found(f"{not_found}: {not_found}") from None
    except ResourceClassNotFound as error:
        raise errors.not_found(f"{not_found}: {error}") from None
    except exceptions.Conflict as error:
        # Quirk: in-use is reported with the concurrent update code here.
        raise errors.conflict(f"Unable to delete inventory of class {resource_class}: {error}",
                              errors.CONCURRENT_UPDATE) from None
    return wsgi_util.empty_response(request)
