"""/resource_providers/{uuid}/inventories: not built yet (answers 501)."""

from __future__ import annotations

import webob
import webob.exc

from placement import errors


def get_inventories(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def create_inventory(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def set_inventories(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def delete_inventories(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def get_inventory(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def update_inventory(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def delete_inventory(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)
