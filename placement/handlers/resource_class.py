"""/resource_classes and /resource_classes/{name} (1.2+)."""

from __future__ import annotations

import sqlalchemy as sa
import webob

from placement import errors, exceptions, microversion, versions, wsgi_util
from placement.db import api as db_api
from placement.objects import resource_class as rc_obj
from placement.objects.resource_class import ResourceClass
from placement.schemas import resource_class as schema


def _location(request: webob.Request, name: str) -> str:
    return wsgi_util.url(request, f"/resource_classes/{name}")


def _representation(request: webob.Request, resource_class: ResourceClass) -> dict:
    return {"name": resource_class.name,
            "links": [{"rel": "self", "href": _location(request, resource_class.name)}]}


def list_resource_classes(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as connection:
        classes = rc_obj.get_all(connection)
    body = {"resource_classes": [_representation(request, rc) for rc in classes]}
    return wsgi_util.json_response(
        request, body, cache_headers=True,
        last_modified=wsgi_util.newest(rc.updated_at or rc.created_at for rc in classes))


def get_resource_class(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    with context.db.reader() as connection:
        resource_class = rc_obj.get_by_name(connection, request.urlvars["name"])
    return wsgi_util.json_response(
        request, _representation(request, resource_class), cache_headers=True,
        last_modified=resource_class.updated_at or resource_class.created_at)


def create_resource_class(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    data = wsgi_util.extract_json(request, schema.RESOURCE_CLASS)
    db_api.write(context.db, rc_obj.create, data["name"])
    return wsgi_util.empty_response(request, status=201,
                                    location=_location(request, data["name"]))


def update_resource_class(request: webob.Request) -> webob.Response:
    if microversion.version_of(request) >= versions.RESOURCE_CLASS_CREATE_OR_VERIFY:
        return _create_or_verify(request)
    return _rename(request)


def _rename(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    data = wsgi_util.extract_json(request, schema.RESOURCE_CLASS)

    def renamed(connection: sa.engine.Connection) -> ResourceClass:
        resource_class = rc_obj.get_by_name(connection, request.urlvars["name"])
        return rc_obj.rename(connection, resource_class, data["name"])

    renamed_class = db_api.write(context.db, renamed)
    return wsgi_util.json_response(request, _representation(request, renamed_class))


def _create_or_verify(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)
    name = request.urlvars["name"]
    # The path name gets exactly the validation a POST body would.
    wsgi_util.validate({"name": name}, schema.RESOURCE_CLASS, "JSON does not validate")
    try:
        db_api.write(context.db, rc_obj.create, name)
        status = 201
    except rc_obj.ResourceClassExists:
        status = 204
    return wsgi_util.empty_response(request, status=status, location=_location(request, name))


def delete_resource_class(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    wsgi_util.authorize(request)

    def deleted(connection: sa.engine.Connection) -> None:
        resource_class = rc_obj.get_by_name(connection, request.urlvars["name"])
        rc_obj.delete(connection, resource_class)

    try:
        db_api.write(context.db, deleted)
    except exceptions.InvalidInput as error:
        raise errors.bad_request(f"Error in delete resource class: {error}") from None
    except exceptions.Conflict as error:
        raise errors.conflict(f"Error in delete resource class: {error}") from None
    return wsgi_util.empty_response(request)
