"""The one place HTTP errors are built and formatted.

Every error body is ``{"errors": [{status, title, detail, request_id, code}]}``
(``code`` from microversion 1.23 on), produced by WebOb's exceptions with
``json_error_formatter``.
"""

from __future__ import annotations

import functools
import reprlib

import webob.exc

from placement import exceptions, versions

DEFAULT = "placement.undefined_code"
# The codes of domain errors, which their exception classes carry.
INVENTORY_INUSE = exceptions.INVENTORY_INUSE
CONCURRENT_UPDATE = exceptions.CONCURRENT_UPDATE
DUPLICATE_NAME = exceptions.DUPLICATE_NAME
PROVIDER_IN_USE = exceptions.PROVIDER_IN_USE
PROVIDER_CANNOT_DELETE_PARENT = exceptions.PROVIDER_CANNOT_DELETE_PARENT
RESOURCE_PROVIDER_NOT_FOUND = exceptions.RESOURCE_PROVIDER_NOT_FOUND
QUERY_DUPLICATE_KEY = "placement.query.duplicate_key"
QUERY_BAD_VALUE = "placement.query.bad_value"
QUERY_MISSING_VALUE = "placement.query.missing_value"
DATABASE_UNAVAILABLE = "placement.database.unavailable"

# Seconds a client is asked to wait before trying again while the database
# cannot be reached (a restarting server is back within seconds; a longer
# outage takes the node out of its load balancer by /healthcheck).
RETRY_AFTER_SECONDS = 1

REQUEST_ID_ENVIRON = "openstack.request_id"
# Where the code of an error response is left, whatever the microversion,
# for the request metrics (placement.middleware.RequestMetrics).
CODE_ENVIRON = "placement.error_code"

# Messages name the values a request got wrong, and a request can make those
# as long as itself: a message keeps its first MAX_MESSAGE characters, and
# values shown with ``shown`` are cut much shorter.
MAX_MESSAGE = 4096
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxdict, _SHOWN.maxlist = 2, 5, 5
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 60, 60, 40


def shown(value: object) -> str:
    """``repr(value)`` cut to a bounded size, however large or deep the value."""
    return _SHOWN.repr(value)


def _bounded(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[:MAX_MESSAGE]}... ({len(message) - MAX_MESSAGE} more characters)"


def json_error_formatter(body: str, status: str, title: str, environ: dict,
                         code: str | None = None, extra: dict | None = None) -> dict:
    error = {
        "status": int(status.split(None, 1)[0]),
        "title": title,
        "detail": webob.exc.strip_tags(body),
        "request_id": environ.get(REQUEST_ID_ENVIRON),
    }
    environ[CODE_ENVIRON] = code or DEFAULT
    # set by the microversion layer: ``code`` is shown from 1.23
    version = environ.get(versions.ENVIRON_KEY)
    if version is not None and version >= versions.ERROR_CODES:
        error["code"] = code or DEFAULT
    if extra:
        error.update(extra)
    return {"errors": [error]}


def http_error(exception_class: type[webob.exc.HTTPException], message: str = "",
               code: str | None = None, extra: dict | None = None,
               **kwargs) -> webob.exc.HTTPException:
    """An HTTP error whose body is the placement JSON error document."""
    return exception_class(
        _bounded(message),
        json_formatter=functools.partial(json_error_formatter, code=code, extra=extra),
        **kwargs,
    )


def bad_request(message: str, code: str | None = None) -> webob.exc.HTTPException:
    return http_error(webob.exc.HTTPBadRequest, message, code)


def not_found(message: str = "", code: str | None = None) -> webob.exc.HTTPException:
    return http_error(webob.exc.HTTPNotFound, message, code)


def conflict(message: str, code: str | None = None) -> webob.exc.HTTPException:
    return http_error(webob.exc.HTTPConflict, message, code)


def unauthorized(headers: list[tuple[str, str]] | None = None) -> webob.exc.HTTPException:
    """401: the request names no one (no token, an empty or invalid one),
    whichever layer found it. WebOb's own text for the status speaks of
    bad passwords and browsers; this one names the header."""
    error = http_error(webob.exc.HTTPUnauthorized,
                       "Send a valid token in the X-Auth-Token header.", headers=headers or [])
    error.explanation = "Authentication required."
    return error


def database_unavailable(message: str) -> webob.exc.HTTPException:
    """503 with Retry-After: the database cannot be reached for now."""
    return http_error(webob.exc.HTTPServiceUnavailable, message, DATABASE_UNAVAILABLE,
                      headers=[("Retry-After", str(RETRY_AFTER_SECONDS))])


def from_domain_error(error: exceptions.PlacementError) -> webob.exc.HTTPException:
    """The response for a domain error no handler chose to answer itself,
    with the code its class carries."""
    if isinstance(error, exceptions.PolicyNotAuthorized):
        return http_error(webob.exc.HTTPForbidden, str(error), error.code)
    if isinstance(error, exceptions.NotFound):
        return not_found(str(error), error.code)
    if isinstance(error, exceptions.Conflict):
        return conflict(str(error), error.code)
    return bad_request(str(error), error.code)
