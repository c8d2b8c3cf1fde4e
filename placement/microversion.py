"""Microversions: parsing the request header, the WSGI layer that does it,
and the version checks handlers use."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import microversion_parse
import webob
import webob.exc

from placement import errors

SERVICE_TYPE = "placement"
HEADER = "openstack-api-version"
ENVIRON_KEY = errors.MICROVERSION_ENVIRON
_ENVIRON_HEADER = "HTTP_" + HEADER.upper().replace("-", "_")


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def matches(self, min_version: str | None = None, max_version: str | None = None
                ) -> bool:
        """True when this version lies in [min_version, max_version]."""
        if min_version is not None and self < parse(min_version):
            return False
        return max_version is None or self <= parse(max_version)


MIN_VERSION = Version(1, 0)
MAX_VERSION = Version(1, 39)

# Versions where an operation changes shape, needed both by its handler and
# by the OpenAPI document describing it.
# From 1.7 PUT /resource_classes/{name} creates the class named in the path
# (no body) or verifies it exists; before, it renames a custom class to the
# name in the body.
CREATE_OR_VERIFY_FROM = Version(1, 7)
# From 1.38 project usages are grouped by consumer type and can be filtered
# by it.
CONSUMER_TYPES_FROM = Version(1, 38)


def parse(version_string: str) -> Version:
    """'1.12' -> Version(1, 12); ValueError with the client-facing text."""
    try:
        major, minor = version_string.split(".", 1)
        return Version(int(major), int(minor))
    except ValueError as error:
        raise ValueError(f"invalid version string: {version_string}; {error}") from None


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


def requires(min_version: str, max_version: str | None = None,
             status: type[webob.exc.HTTPException] = webob.exc.HTTPNotFound) -> Callable:
    """Decorator: the handler exists only for versions in the given range;
    outside it the request gets ``status`` (404 unless the spec says 405)."""

    def decorator(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def wrapper(request: webob.Request, *args, **kwargs):
            if not version_of(request).matches(min_version, max_version):
                # Only the generic text of the status, unlike routing's 405.
                headers = []
                if status is webob.exc.HTTPMethodNotAllowed:
                    headers = [("Allow", request.environ["placement.allowed_methods"])]
                raise errors.http_error(status, headers=headers)
            return handler(request, *args, **kwargs)

        return wrapper

    return decorator
