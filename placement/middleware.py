"""The WSGI layers around the dispatcher, outermost first in ``deploy``:
request id and Accept default, (CORS), authentication, context, fault."""

from __future__ import annotations

import time
from collections.abc import Callable

import webob
import webob.dec
import webob.exc
from oslo_log import log as logging
from oslo_middleware import request_id

from placement import context as placement_context
from placement import errors

LOG = logging.getLogger(__name__)

ROOT_PATHS = ("", "/")
# The OpenAPI document describes the API, not its data: served to anyone.
OPENAPI_PATH = "/openapi.json"
ANONYMOUS_PATHS = (*ROOT_PATHS, OPENAPI_PATH)


class RequestId(request_id.RequestId):
    """Gives each request a ``req-<uuid>`` id, returned in
    ``x-openstack-request-id``; makes JSON the default error format; and
    logs one line per request."""

    def __call__(self, environ: dict, start_response: Callable):
        if environ.get("HTTP_ACCEPT", "") in ("", "*/*"):
            environ["HTTP_ACCEPT"] = "application/json"
        started = time.monotonic()
        captured = {}

        def record_status(status, headers, exc_info=None):
            captured["status"] = status
            return start_response(status, headers, exc_info)

        result = super().__call__(environ, record_status)
        LOG.info('%(method)s %(path)s status: %(status)s time: %(seconds).4f',
                 {"method": environ.get("REQUEST_METHOD"),
                  "path": environ.get("PATH_INFO"),
                  "status": captured.get("status", "-").split(" ")[0],
                  "seconds": time.monotonic() - started})
        return result


class NoAuth:
    """``noauth2``: trust ``X-Auth-Token: user[:project]``; for tests and
    local use only."""

    def __init__(self, application: Callable):
        self.application = application

    @webob.dec.wsgify
    def __call__(self, request: webob.Request):
        if request.environ.get("PATH_INFO") in ("/", OPENAPI_PATH):
            return self.application
        token = request.headers.get("X-Auth-Token")
        if not token:  # an empty token is no credential either
            return webob.exc.HTTPUnauthorized()
        user_id, _, project_id = token.partition(":")
        project_id = project_id or user_id
        request.headers["X-User-Id"] = user_id
        if "OpenStack-System-Scope" not in request.headers:
            request.headers.setdefault("X-Project-Id", project_id)
        if "X-Roles" not in request.headers:
            request.headers["X-Roles"] = "admin" if user_id == "admin" else ""
        return self.application


class KeystoneRootBypass:
    """Keystone auth on every path but the anonymous version and OpenAPI
    documents."""

    def __init__(self, application: Callable, authenticated: Callable):
        self.application = application
        self.authenticated = authenticated

    def __call__(self, environ: dict, start_response: Callable):
        if environ.get("PATH_INFO", "") in ANONYMOUS_PATHS:
            return self.application(environ, start_response)
        return self.authenticated(environ, start_response)


class Context:
    """Builds the RequestContext from the identity headers."""

    def __init__(self, application: Callable, require_user: bool, services: dict):
        self.application = application
        self.require_user = require_user
        self.services = services

    @webob.dec.wsgify
    def __call__(self, request: webob.Request):
        context = placement_context.RequestContext.from_environ(request.environ)
        if (self.require_user and context.user_id is None
                and request.environ.get("PATH_INFO", "") not in ANONYMOUS_PATHS):
            return webob.exc.HTTPUnauthorized()
        for name, service in self.services.items():
            setattr(context, name, service)
        request.environ["placement.context"] = context
        return self.application


class FaultWrapper:
    """Turns any unexpected exception into a JSON 500 that leaks nothing."""

    def __init__(self, application: Callable):
        self.application = application

    def __call__(self, environ: dict, start_response: Callable):
        try:
            return self.application(environ, start_response)
        except Exception:
            LOG.exception("Unexpected error serving %s %s",
                          environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
            return errors.http_error(
                webob.exc.HTTPInternalServerError,
                "An unexpected error occurred; the request id names it in the service log.",
            )(environ, start_response)
