"""The WSGI layers around the dispatcher, outermost first in ``deploy``:
(in each serving process, the start of its provider copy's follower),
(request metrics), request id and Accept default, fault, body size limit,
(CORS), authentication (noauth2, or keystonemiddleware inside its error
translation, or a refusal when it cannot be done), context.
They are plain WSGI callables working on the environ: each layer that
builds WebOb requests and responses adds to the cost of every request."""

from __future__ import annotations

import functools
import io
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator

import webob.exc
from oslo_context import context as oslo_context
from oslo_log import log as logging
from oslo_middleware import request_id

from placement import context as placement_context
from placement import errors, metrics

LOG = logging.getLogger(__name__)
# The request line goes to the standard logger under oslo.log's adapter:
# the adapter's keyword handling is of no use to it, and it is written once
# per request (oslo.log's formatters and handlers still do the rest).
_REQUEST_LOG = LOG.logger
_REQUEST_LINE = "%(method)s %(path)s status: %(status)s time: %(seconds).4f"


def _log_request_line(values: dict) -> None:
    """``_REQUEST_LOG.info(_REQUEST_LINE, values)``, with this function as
    the record's origin: Logger.info would walk the stack to find it, a
    twentieth of the line's cost."""
    if _REQUEST_LOG.isEnabledFor(logging.INFO):
        _REQUEST_LOG.handle(_REQUEST_LOG.makeRecord(
            _REQUEST_LOG.name, logging.INFO, __file__, _log_request_line.__code__.co_firstlineno,
            _REQUEST_LINE, (values,), None, func=_log_request_line.__name__))

ROOT_PATHS = ("", "/")
# The OpenAPI document describes the API, not its data: served to anyone.
OPENAPI_PATH = "/openapi.json"
ANONYMOUS_PATHS = (*ROOT_PATHS, OPENAPI_PATH)
# Prometheus metrics ([metrics] enabled), served before authentication like
# the health check.
METRICS_PATH = "/metrics"

_INBOUND_REQUEST_ID = "HTTP_" + request_id.INBOUND_HEADER.upper().replace("-", "_")
_GLOBAL_REQUEST_ID = re.compile(request_id.ID_FORMAT)


class InEachProcess:
    """Runs ``start`` at the first request each process serves, and again
    in a process forked after it ran: servers fork their workers from the
    process that built the application, and a thread does not cross a
    fork."""

    def __init__(self, application: Callable, start: Callable[[], None]) -> None:
        self._application = application
        self._start = start
        self._started_in: int | None = None
        self._lock = threading.Lock()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if self._started_in != os.getpid():
            with self._lock:
                if self._started_in != os.getpid():
                    self._start()
                    self._started_in = os.getpid()
        return self._application(environ, start_response)


class RequestId:
    """Gives each request a ``req-<uuid>`` id, returned in
    ``x-openstack-request-id`` (a valid inbound one is kept as the global
    request id, as oslo.middleware does); makes JSON the default error
    format; and logs one line per request, once the answer is sent."""

    def __init__(self, application: Callable):
        self.application = application

    def __call__(self, environ: dict, start_response: Callable):
        if environ.get("HTTP_ACCEPT", "") in ("", "*/*"):
            environ["HTTP_ACCEPT"] = "application/json"
        inbound = environ.get(_INBOUND_REQUEST_ID, "")
        if _GLOBAL_REQUEST_ID.match(inbound):
            environ[request_id.GLOBAL_REQ_ID] = inbound
        environ[request_id.ENV_REQUEST_ID] = req_id = oslo_context.generate_request_id()
        started = time.monotonic()
        captured = {}

        def stamp_request_id(status, headers, exc_info=None):
            captured["status"] = status
            if not any(name.lower() == request_id.HTTP_RESP_HEADER_REQUEST_ID
                       for name, _ in headers):
                headers = [*headers, (request_id.HTTP_RESP_HEADER_REQUEST_ID, req_id)]
            return start_response(status, headers, exc_info)

        answer = self.application(environ, stamp_request_id)
        # logged once the answer is sent (under uwsgi, once the router was
        # let go: HangUpBeforeClose)
        return _ClosedWith(answer, after=functools.partial(_log_request_line, {
            "method": environ.get("REQUEST_METHOD"), "path": environ.get("PATH_INFO"),
            "status": captured.get("status", "-").split(" ")[0],
            "seconds": time.monotonic() - started}))


def _nothing() -> None:
    pass


class _ClosedWith:
    """An answer with ``before`` run before its own ``close`` and ``after``
    after it: WSGI servers call ``close`` once the body is sent."""

    __slots__ = ("answer", "before", "after")

    def __init__(self, answer: Iterable[bytes], before: Callable[[], None] = _nothing,
                 after: Callable[[], None] = _nothing):
        self.answer = answer
        self.before = before
        self.after = after

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.answer)

    def close(self) -> None:
        try:
            self.before()
        finally:
            try:
                close = getattr(self.answer, "close", None)
                if close is not None:
                    close()
            finally:
                self.after()


IDENTITY_UNAVAILABLE = ("The identity service cannot be reached to validate the token; "
                        "try again later.")
# Set on the environ of a request an authentication layer let through:
# its answer is the API's, not the authentication layer's.
_AUTHENTICATED = "placement.authenticated"


def _marked_authenticated(application: Callable, environ: dict, start_response: Callable):
    environ[_AUTHENTICATED] = True
    return application(environ, start_response)


def _discard_write(data: bytes) -> None:
    """The ``write`` callable of an answer that is replaced."""


class AuthenticationErrors:
    """Around an authentication layer that answers some requests itself
    (keystonemiddleware's auth_token: 401 for a missing or invalid token,
    503 when the identity service fails): those answers are replaced by the
    API's JSON errors (keeping ``WWW-Authenticate``), and an exception of
    ``unavailable`` escaping it (a timeout towards the identity service,
    which auth_token lets through) is a JSON 503.

    ``authenticate`` builds the authentication layer around the
    application it is given."""

    def __init__(self, authenticate: Callable[[Callable], Callable], application: Callable,
                 unavailable: tuple[type[Exception], ...]):
        self.authenticated = authenticate(
            functools.partial(_marked_authenticated, application))
        self.unavailable = unavailable

    def __call__(self, environ: dict, start_response: Callable):
        refused = []

        def capture_refusal(status, headers, exc_info=None):
            if environ.get(_AUTHENTICATED) or int(status[:3]) < 400:
                return start_response(status, headers, exc_info)
            refused.append((int(status[:3]), headers))
            return _discard_write

        try:
            answer = self.authenticated(environ, capture_refusal)
        except self.unavailable as error:
            LOG.warning("The identity service failed while authenticating %s %s: %s",
                        environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"), error)
            status, headers = 503, []
        else:
            if not refused:
                return answer
            close = getattr(answer, "close", None)
            if close is not None:
                close()
            status, headers = refused[0]
        kept = [(name, value) for name, value in headers if name.lower() == "www-authenticate"]
        if status == 401:
            error = errors.unauthorized(kept)
        else:  # any other refusal keeps the generic text of its status
            error = errors.http_error(webob.exc.status_map[status],
                                      IDENTITY_UNAVAILABLE if status == 503 else "",
                                      headers=kept)
        return error(environ, start_response)


class Refusing:
    """Answers every request 503 with ``reason``: a service configured so
    that it cannot authenticate requests serves none."""

    def __init__(self, reason: str):
        self.reason = reason

    def __call__(self, environ: dict, start_response: Callable):
        return errors.http_error(webob.exc.HTTPServiceUnavailable, self.reason)(
            environ, start_response)


class BodyLimit:
    """413 for a request body larger than ``max_bytes``, before anything
    reads it: by its Content-Length, or, for a chunked body (no
    Content-Length), by reading at most ``max_bytes`` + 1 bytes of it, kept
    for the application to read."""

    def __init__(self, application: Callable, max_bytes: int):
        self.application = application
        self.max_bytes = max_bytes

    def __call__(self, environ: dict, start_response: Callable):
        length = environ.get("CONTENT_LENGTH", "")
        if length.isdigit():  # anything else is the router's 400
            too_large = int(length) > self.max_bytes
        elif not length and environ.get("wsgi.input_terminated"):
            body = environ["wsgi.input"].read(self.max_bytes + 1)
            too_large = len(body) > self.max_bytes
            # What was read stands for the whole body from now on: past the
            # limit the rest stays unread (placement-api reads what the
            # application left of a chunked body from this copy, and
            # cheroot closes the connection after a 413).
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        else:
            too_large = False
        if too_large:
            return errors.http_error(
                webob.exc.HTTPRequestEntityTooLarge,
                f"The request body is larger than the {self.max_bytes} bytes accepted.",
            )(environ, start_response)
        return self.application(environ, start_response)


class NoAuth:
    """``noauth2``: trust ``X-Auth-Token: user[:project]``; for tests and
    local use only."""

    def __init__(self, application: Callable):
        self.application = application

    def __call__(self, environ: dict, start_response: Callable):
        if environ.get("PATH_INFO") in ("/", OPENAPI_PATH):
            return self.application(environ, start_response)
        token = environ.get("HTTP_X_AUTH_TOKEN")
        if not token:  # an empty token is no credential either
            return errors.unauthorized()(environ, start_response)
        user_id, _, project_id = token.partition(":")
        project_id = project_id or user_id
        environ["HTTP_X_USER_ID"] = user_id
        if "HTTP_OPENSTACK_SYSTEM_SCOPE" not in environ:
            environ.setdefault("HTTP_X_PROJECT_ID", project_id)
        if "HTTP_X_ROLES" not in environ:
            environ["HTTP_X_ROLES"] = "admin" if user_id == "admin" else ""
        return self.application(environ, start_response)


class ByPath:
    """Sends the requests for some paths to other applications (by
    ``PATH_INFO``), every other request to ``application``."""

    def __init__(self, application: Callable, routes: dict[str, Callable]):
        self.application = application
        self.routes = routes

    def __call__(self, environ: dict, start_response: Callable):
        application = self.routes.get(environ.get("PATH_INFO", ""), self.application)
        return application(environ, start_response)


# The methods of requests that read from the read replica, when there is one
# (``[placement_database] slave_connection``); the others read the primary.
_REPLICA_READERS = frozenset({"GET", "HEAD"})


class Context:
    """Builds the RequestContext from the identity headers, with the
    services (``db``: the database, on the primary only for a request that
    may write)."""

    def __init__(self, application: Callable, require_user: bool, services: dict):
        self.application = application
        self.require_user = require_user
        self.services = services

    def __call__(self, environ: dict, start_response: Callable):
        context = placement_context.RequestContext.from_environ(environ)
        if (self.require_user and context.user_id is None
                and environ.get("PATH_INFO", "") not in ANONYMOUS_PATHS):
            return errors.unauthorized()(environ, start_response)
        for name, service in self.services.items():
            setattr(context, name, service)
        if "db" in self.services and environ.get("REQUEST_METHOD") not in _REPLICA_READERS:
            # what a write reads, it reads from the primary: a replica lags
            context.db = context.db.primary_only()
        environ["placement.context"] = context
        return self.application(environ, start_response)


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


# The route label of requests for no known path.
UNMATCHED_ROUTE = "unmatched"
# Methods kept as labels; any other one is counted as "other" (a client
# chooses the method: the labels must stay few).
_METHOD_LABELS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# The allocation writes whose 409s are counted by error code.
CLAIM_ROUTES = frozenset({("PUT", "/allocations/{consumer_uuid}"), ("POST", "/allocations")})


class RequestMetrics:
    """Counts and times every request, by route template, method and
    status (placement.metrics), and the 409s of allocation writes by
    error code. The route label is the path for ``fixed_paths`` (served
    by middleware: health check, metrics), else ``route_of(environ)``
    (the dispatcher's route template), else ``unmatched``."""

    def __init__(self, application: Callable, route_of: Callable[[dict], str | None],
                 fixed_paths: Collection[str]):
        self.application = application
        self.route_of = route_of
        self.fixed_paths = frozenset(fixed_paths)

    def __call__(self, environ: dict, start_response: Callable):
        started = time.perf_counter()
        statuses = []

        def capture_status(status, headers, exc_info=None):
            statuses.append(status)
            return start_response(status, headers, exc_info)

        try:
            return self.application(environ, capture_status)
        finally:
            # an exception escaping every layer is a 500 of the server's
            status = statuses[-1].split(" ", 1)[0] if statuses else "500"
            method = environ.get("REQUEST_METHOD", "")
            method = method if method in _METHOD_LABELS else "other"
            path = environ.get("PATH_INFO", "")
            route = path if path in self.fixed_paths else (self.route_of(environ)
                                                           or UNMATCHED_ROUTE)
            metrics.observe_request(route, method, status, time.perf_counter() - started)
            if status == "409" and (method, route) in CLAIM_ROUTES:
                metrics.count_claim_conflict(environ.get(errors.CODE_ENVIRON, errors.DEFAULT))


class MetricsEndpoint:
    """``GET``/``HEAD /metrics``: the Prometheus text exposition."""

    def __init__(self, exposition: Callable):
        self.exposition = exposition

    def __call__(self, environ: dict, start_response: Callable):
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return errors.http_error(
                webob.exc.HTTPMethodNotAllowed,
                "The method specified is not allowed for this resource.",
                headers=[("Allow", "GET, HEAD")])(environ, start_response)
        return self.exposition(environ, start_response)


# Answers up to this size fit the default send buffer of a connection to
# uwsgi's router (net.core.wmem_default, 208 kB on Linux).
ROUTER_PIECE_BYTES = 200_000


class AnswerInOnePiece:
    """Under uwsgi's HTTP router: a large answer's connection to the router
    gets a send buffer as large as the answer (``connection_fd`` gives the
    request's socket), so that the whole answer reaches the router at once.
    The router writes each piece it reads to the client straight away, on a
    connection where it leaves Nagle's algorithm on: the last, partial
    segment of a piece then waits for the client's delayed acknowledgement
    of the previous piece's, about 40 ms. A list of 900 providers (670 kB)
    came in four pieces, and one answer in ten waited so. The kernel caps
    the buffer at net.core.wmem_max."""

    def __init__(self, application: Callable, connection_fd: Callable[[], int]):
        self.application = application
        self.connection_fd = connection_fd

    def __call__(self, environ: dict, start_response: Callable):
        def sized(status, headers, exc_info=None):
            length = next((value for name, value in headers
                           if name.lower() == "content-length"), "")
            if length.isdigit() and int(length) > ROUTER_PIECE_BYTES:
                _grow_send_buffer(self.connection_fd(), int(length))
            return start_response(status, headers, exc_info)

        return self.application(environ, sized)


class HangUpBeforeClose:
    """Under uwsgi's HTTP router: the worker closes its connection to the
    router (``disconnect``) as soon as the answer is sent, before the
    answer's ``close`` logs the request line. The router takes the next
    request of a kept-alive client connection only once the worker has
    closed the previous one's: the request line (about a fifth of a small
    request's work in a worker) is then written while the client's next
    request goes to another worker, no longer in the client's wait."""

    def __init__(self, application: Callable, disconnect: Callable[[], None]):
        self.application = application
        self.disconnect = disconnect

    def __call__(self, environ: dict, start_response: Callable):
        return _ClosedWith(self.application(environ, start_response), before=self.disconnect)


def _grow_send_buffer(fd: int, size: int) -> None:
    connection = socket.socket(fileno=fd)
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
    except OSError:  # only ever a wait saved: the answer goes out anyway
        pass
    finally:
        connection.detach()  # the server's socket: not ours to close
