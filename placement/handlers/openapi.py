"""``GET /openapi.json``: the OpenAPI 3.1 document of the API (no
authentication, no policy: it describes the API, not any data)."""

from __future__ import annotations

import webob

from placement import openapi, wsgi_util


def get_document(request: webob.Request) -> webob.Response:
    return wsgi_util.json_response(request, openapi.document())
