"""``POST /reshaper`` (1.30+): move inventories and the allocations using
them between providers, all or nothing."""

from __future__ import annotations

import re

import webob

from placement import errors, microversion, wsgi_util
from placement.handlers import util as handler_util
from placement.objects import allocation as allocation_obj
from placement.objects import inventory as inventory_obj
from placement.objects import reshaper as reshaper_obj
from placement.objects.resource_class import ResourceClassNotFound
from placement.schemas import inventory as inventory_schema
from placement.schemas import reshaper as schema


def reshape(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    data = wsgi_util.extract_json(request, schema.reshape_schema(
        microversion.version_of(request)))
    inventories = [
        reshaper_obj.ProviderInventories(
            provider_uuid, wanted["resource_provider_generation"],
            _records(wanted["inventories"]))
        for provider_uuid, wanted in data["inventories"].items()
    ]
    allocations = [handler_util.consumer_request(request, consumer_uuid, consumer_data)
                   for consumer_uuid, consumer_data in data["allocations"].items()]
    try:
        reshaper_obj.reshape(context.db, inventories, allocations)
    except allocation_obj.UnknownResourceClass as error:
        raise errors.bad_request(f"malformed reshaper data: {error}") from None
    except inventory_obj.InventoryInUse as error:
        raise errors.conflict(f"update conflict: {error}", error.code) from None
    except allocation_obj.AllocationRefused as error:
        raise errors.conflict(f"Unable to allocate inventory: {error}") from None
    except allocation_obj.ConcurrentWrite as error:
        raise errors.conflict(f"update conflict: {error}", error.code) from None
    return wsgi_util.empty_response(request)


def _records(inventories: dict[str, dict]) -> list[inventory_obj.Inventory]:
    """Records under keys that are no class name escaped the schema (it only
    checks keys matching the class name pattern): refused as the unknown
    classes they are, before anything reads them as inventory fields."""
    for class_name in inventories:
        if not re.match(inventory_schema.RC_PATTERN, class_name):
            raise errors.bad_request(
                f"malformed reshaper data: {ResourceClassNotFound(class_name)}")
    return [inventory_obj.Inventory.from_fields(class_name, fields)
            for class_name, fields in inventories.items()]
