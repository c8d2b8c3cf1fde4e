"""/traits: not built yet (answers 501)."""

from __future__ import annotations

import webob
import webob.exc

from placement import errors


def list_traits(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def get_trait(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def put_trait(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def delete_trait(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def list_traits_for_resource_provider(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def update_traits_for_resource_provider(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def delete_traits_for_resource_provider(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)
