"""Microversions in HTTP: the WSGI layer that reads the request header and
stamps the answer (the versions themselves are data: ``placement.versions``;
the range of each endpoint is the route table's, enforced by the
dispatcher)."""

from __future__ import annotations

from collections.abc import Callable

import microversion_parse
import webob
import webob.exc

from placement import errors
from placement.versions import ENVIRON_KEY, MAX_VERSION, MIN_VERSION, Version, parse

SERVICE_TYPE = "placement"
HEADER = "openstack-api-version"
_ENVIRON_HEADER = "HTTP_" + HEADER.upper().replace("-", "_")


def version_of(request: webob.Request) -> Version:
    return request.environ[ENVIRON_KEY]


class MicroversionMiddleware:
    """Establishes the request's microversion and stamps it on the response."""

    def __init__(self, application: Callable):
        self.application = application

    def __call__(self, environ: dict, start_response: Callable):
        # Only the one header is handed to the parser (it folds every
        # header it is given).
        header = environ.get(_ENVIRON_HEADER)
        try:
            requested = (None if header is None
                         else microversion_parse.get_version({HEADER: header}, SERVICE_TYPE))
        except ValueError:
            requested = None
        if requested is None:
            version = MIN_VERSION
        elif requested.strip() == "latest":
            version = MAX_VERSION
        else:
            try:
                version = parse(requested)
            except ValueError as error:
                return errors.bad_request(f"Invalid microversion: {error}")(
                    environ, start_response)
            if not MIN_VERSION <= version <= MAX_VERSION or version.major != 1:
                return errors.http_error(
                    webob.exc.HTTPNotAcceptable,
                    f"Invalid microversion: Unacceptable version header: {requested}",
                    extra={"max_version": str(MAX_VERSION), "min_version": str(MIN_VERSION)},
                )(environ, start_response)
        environ[ENVIRON_KEY] = version

        def stamp_version(status, headers, exc_info=None):
            headers = [h for h in headers if h[0].lower() not in (HEADER, "vary")] + [
                (HEADER, f"{SERVICE_TYPE} {version}"),
                ("vary", HEADER),
            ]
            return start_response(status, headers, exc_info)

        return self.application(environ, stamp_version)
