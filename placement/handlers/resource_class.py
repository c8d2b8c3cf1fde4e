"""/resource_classes and /resource_classes/{name} (1.2+)."""

from __future__ import annotations

import webob

from placement import errors, exceptions, microversion, wsgi_util
from placement.db import api as db_api
from placement.objects import resource_class as rc_obj
from placement.objects.resource_class import ResourceClass
from placement.schemas import resource_class as schema

POLICY = "placement:resource_classes:"


def _location(request: webob.Request, name: str) -> str:
    return wsgi_util.url(request, f"/resource_classes/{name}")


def _representation(request: webob.Request, resource_class: ResourceClass) -> dict:
    return {"name": resource_class.name,
            "links": [{"rel": "self", "href": _location(request, resource_class.name)}]}


@db_api.retrying
def _create(db: db_api.Database, name: str) -> ResourceClass:
    with db.writer() as connection:
        return rc_obj.create(connection, name)


@microversion.requires("1.2")
def list_resource_classes(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    context.can(POLICY + "list")
    with context.db.reader() as connection:
        classes = rc_obj.get_all(connection)
    body = {"resource_classes": [_representation(request, rc) for rc in classes]}
    return wsgi_util.json_response(
        request, body, cache_headers=True,
        last_modified=wsgi_util.newest(rc.updated_at or rc.created_at for rc in classes))


@microversion.requires("1.2")
def get_resource_class(request: webob.Request) -> webob.Response:
    wsgi_util.check_accept(request)
    context = wsgi_util.context_of(request)
    context.can(POLICY + "show")
    with context.db.reader() as connection:
        resource_class = rc_obj.get_by_name(connection, request.urlvars["name"])
    return wsgi_util.json_response(
        request, _representation(request, resource_class), cache_headers=True,
        last_modified=resource_class.updated_at or resource_class.created_at)


@microversion.requires("1.2")
def create_resource_class(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    context.can(POLICY + "create")
    data = wsgi_util.extract_json(request, schema.RESOURCE_CLASS)
    try:
        _create(context.db, data["name"])
    except rc_obj.ResourceClassExists as error:
        raise errors.conflict(str(error)) from None
    return wsgi_util.empty_response(request, status=201,
                                    location=_location(request, data["name"]))


@microversion.requires("1.2")
def update_resource_class(request: webob.Request) -> webob.Response:
    if microversion.version_of(request) >= microversion.CREATE_OR_VERIFY_FROM:
        return _create_or_verify(request)
    return _rename(request)


def _rename(request: webob.Request) -> webob.Response:
    wsgi_util.require_json_content(request)
    context = wsgi_util.context_of(request)
    context.can(POLICY + "update")
    data = wsgi_util.extract_json(request, schema.RESOURCE_CLASS)
    with context.db.writer() as connection:
        resource_class = rc_obj.get_by_name(connection, request.urlvars["name"])
        try:
            renamed = rc_obj.rename(connection, resource_class, data["name"])
        except exceptions.InvalidInput as error:
            raise errors.bad_request(str(error)) from None
        except rc_obj.ResourceClassExists as error:
            raise errors.conflict(str(error)) from None
    return wsgi_util.json_response(request, _representation(request, renamed))


def _create_or_verify(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    context.can(POLICY + "update")
    name = request.urlvars["name"]
    # The path name gets exactly the validation a POST body would.
    wsgi_util.validate({"name": name}, schema.RESOURCE_CLASS, "JSON does not validate")
    try:
        _create(context.db, name)
        status = 201
    except rc_obj.ResourceClassExists:
        status = 204
    return wsgi_util.empty_response(request, status=status, location=_location(request, name))


@microversion.requires("1.2")
def delete_resource_class(request: webob.Request) -> webob.Response:
    context = wsgi_util.context_of(request)
    context.can(POLICY + "delete")
    with context.db.writer() as connection:
        resource_class = rc_obj.get_by_name(connection, request.urlvars["name"])
        try:
            rc_obj.delete(connection, resource_class)
        except exceptions.InvalidInput as error:
            raise errors.bad_request(f"Error in delete resource class: {error}") from None
        except exceptions.Conflict as error:
            raise errors.conflict(f"Error in delete resource class: {error}") from None
    return wsgi_util.empty_response(request)
