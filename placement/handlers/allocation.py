"""/allocations: not built yet (answers 501)."""

from __future__ import annotations

import webob
import webob.exc

from placement import errors


def list_for_resource_provider(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def set_allocations(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def list_for_consumer(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def set_allocations_for_consumer(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def delete_allocations(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)
