"""/resource_providers/{uuid}/usages and /usages: not built yet (answers 501)."""

from __future__ import annotations

import webob
import webob.exc

from placement import errors


def list_usages(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)


def get_total_usages(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)
