"""/allocations/{consumer_uuid}, POST /allocations and
/resource_providers/{uuid}/allocations."""

from __future__ import annotations

from collections.abc import Callable

import webob
from oslo_utils import uuidutils

from placement import errors, microversion, versions, wsgi_util
from placement.db import api as db_api
from placement.handlers import util as handler_util
from placement.objects import allocation as allocation_obj
from placement.objects import resource_provider
from placement.schemas import allocation as schema


def list_for_resource_provider(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as connection:
        provider = handler_util.path_provider(
            connection, request, "Resource provider '{uuid}' not found: {error}")
        view = allocation_obj.get_for_provider(connection, provider)
    if microversion.version_of(request) < versions.CONSUMER_GENERATION:
        for entry in view.allocations.values():
            del entry["consumer_generation"]
    body = {"allocations": view.allocations,
            "resource_provider_generation": provider.generation}
    return wsgi_util.json_response(request, body, cache_headers=True,
                                   last_modified=view.last_modified)


def list_for_consumer(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as connection:
        view = allocation_obj.get_for_consumer(connection, request.urlvars["consumer_uuid"])
    body: dict = {"allocations": view.allocations}
    version = microversion.version_of(request)
    if view.consumer is not None and version >= versions.DICT_ALLOCATIONS:
        body["project_id"] = view.consumer.project_id
        body["user_id"] = view.consumer.user_id
        if version >= versions.CONSUMER_GENERATION:
            body["consumer_generation"] = view.consumer.generation
        if version >= versions.CONSUMER_TYPES:
            body["consumer_type"] = view.consumer.consumer_type
    return wsgi_util.json_response(request, body, cache_headers=True,
                                   last_modified=view.last_modified)


def _normalised_consumer_uuid(value: str) -> str:
    """Any uuid-like form (dashless, upper case, urn:...) as lower-case dashed.
    uuid.UUID alone is too lenient (int() takes a 0x prefix, a sign and
    underscores), so the oslo uuid-like check decides."""
    if not uuidutils.is_uuid_like(value):
        raise errors.bad_request(f"Malformed consumer_uuid: {value}")
    return resource_provider.normalize_uuid(value)


def _list_form_to_dict_form(allocations: list[dict]) -> dict[str, dict]:
    """The pre-1.12 list of {resource_provider: {uuid}, resources} as the
    dict form; a provider listed twice keeps its last entry."""
    return {entry["resource_provider"]["uuid"]: {"resources": entry["resources"]}
            for entry in allocations}


def _write(request: webob.Request, requests: list[allocation_obj.ConsumerAllocations],
           unknown_class_message: Callable[[str], str]) -> webob.Response:
    """Write the allocations with the server-side retries; 204."""
    context = wsgi_util.context_of(request)
    try:
        allocation_obj.replace_all(context.db, requests,
                                   context.conf.placement.allocation_conflict_retry_count)
    except allocation_obj.UnknownResourceClass as error:
        raise errors.bad_request(unknown_class_message(str(error))) from None
    except allocation_obj.AllocationRefused as error:
        raise errors.conflict(f"Unable to allocate inventory: {error}") from None
    except allocation_obj.ConcurrentWrite as error:
        raise errors.conflict(
            f"Inventory and/or allocations changed while attempting to allocate: {error}",
            error.code) from None
    return wsgi_util.empty_response(request)


def set_allocations_for_consumer(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    wsgi_util.authorize(request)
    consumer_uuid = _normalised_consumer_uuid(request.urlvars["consumer_uuid"])
    version = microversion.version_of(request)
    data = wsgi_util.extract_json(request, schema.put_schema(version))
    if version < versions.DICT_ALLOCATIONS:
        data["allocations"] = _list_form_to_dict_form(data["allocations"])
    return _write(request, [handler_util.consumer_request(request, consumer_uuid, data)],
                  lambda error: f"Unable to allocate inventory for consumer "
                                f"{consumer_uuid}: {error}")


def set_allocations(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    wsgi_util.authorize(request)
    data = wsgi_util.extract_json(request, schema.post_schema(microversion.version_of(request)))
    requests = [handler_util.consumer_request(request, consumer_uuid, consumer_data)
                for consumer_uuid, consumer_data in data.items()]
    return _write(request, requests,
                  lambda error: f"Unable to allocate inventory {error}")


def delete_allocations(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    db_api.write(context.db, allocation_obj.delete_for_consumer, request.urlvars["consumer_uuid"])
    return wsgi_util.empty_response(request)
