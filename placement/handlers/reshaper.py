"""/reshaper: not built yet (answers 501)."""

from __future__ import annotations

import webob
import webob.exc

from placement import errors


def reshape(request: webob.Request) -> webob.Response:
    raise errors.http_error(webob.exc.HTTPNotImplemented)
