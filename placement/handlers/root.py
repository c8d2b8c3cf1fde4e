"""``GET /``: the version document."""

from __future__ import annotations

import webob

from placement import versions, wsgi_util


def home(request: webob.Request) -> webob.Response:
    body = {
        "versions": [{
            "id": "v1.0",
            "max_version": str(versions.MAX_VERSION),
            "min_version": str(versions.MIN_VERSION),
            "status": "CURRENT",
            "links": [{"rel": "self", "href": ""}],
        }]
    }
    return wsgi_util.json_response(request, body, cache_headers=True)
