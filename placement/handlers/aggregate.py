"""/resource_providers/{uuid}/aggregates: not built yet (answers 501)."""

from __future__ import annotations

import webob
import webob.exc

from placement import errors


def get_aggregates(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def set_aggregates(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)
