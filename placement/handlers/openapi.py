"""``GET /openapi.json``: the OpenAPI 3.1 document of the API (no
authentication, no policy: it describes the API, not any data)."""

from __future__ import annotations

from collections.abc import Callable

import webob

from placement import openapi, wsgi_util


def document_handler(routes: openapi.Routes) -> Callable[[webob.Request], webob.Response]:
    """The handler serving the document of the route table ``routes`` (the
    table that routes to it: it is read when the document is first asked for)."""

    def get_document(request: webob.Request) -> webob.Response:
        return wsgi_util.json_response(request, openapi.document(routes))

    return get_document
