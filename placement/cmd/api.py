"""``placement-api``: serve the API with a multi-threaded WSGI server."""

from __future__ import annotations

import ipaddress
import logging as std_logging
import os
import signal
import sys
import threading
from collections.abc import Callable

from cheroot import server as cheroot_server
from cheroot import wsgi
from oslo_config import cfg
from oslo_log import log as logging

from placement import conf as placement_conf
from placement import deploy

LOG = logging.getLogger(__name__)

# Long enough for ordinary requests to finish, well within a supervisor's
# stop timeout (systemd's default is 90 s, Kubernetes' grace period 30 s).
SHUTDOWN_TIMEOUT_SECONDS = 5.0

cli_opts = [
    cfg.StrOpt("host", default="127.0.0.1", help="Address to listen on."),
    cfg.PortOpt("port", default=8778, help="Port to listen on."),
    cfg.IntOpt("threads", default=16, min=1, help="Threads serving requests."),
    cfg.FloatOpt("shutdown_timeout", default=SHUTDOWN_TIMEOUT_SECONDS, min=0,
                 help="Seconds the requests being served when SIGTERM (or SIGINT) "
                 "arrives are given to finish; the process then exits without them."),
]


# Seconds stop() waits for the worker threads before shutting down the
# reading side of their connections: a request being processed still
# completes and answers (its thread is then waited for until the shutdown
# timeout, see stop_within), but a client that sent half a request (or a
# body it never finishes) no longer holds the exit back for cheroot's
# default 5 s. Idle kept-alive connections hold no thread and never delay
# the exit.
SHUTDOWN_GRACE_SECONDS = 0.5

# cheroot answers a non-integer Content-Length itself, in plain text; the API
# answers it with its own JSON 400. The value travels to the application
# under this header instead.
_INVALID_CONTENT_LENGTH = b"X-Placement-Invalid-Content-Length"
_INVALID_CONTENT_LENGTH_ENVIRON = "HTTP_X_PLACEMENT_INVALID_CONTENT_LENGTH"


class _HeaderReader(cheroot_server.HeaderReader):
    def __call__(self, rfile, hdict=None):
        headers = super().__call__(rfile, hdict)
        content_length = headers.get(b"Content-Length")
        if content_length is not None and not content_length.strip().isdigit():
            headers[_INVALID_CONTENT_LENGTH] = headers.pop(b"Content-Length")
        return headers


class _Request(cheroot_server.HTTPRequest):
    header_reader = _HeaderReader()


class _Connection(cheroot_server.HTTPConnection):
    RequestHandlerClass = _Request


def serve_http_quirks(application: Callable) -> Callable:
    """Adapts the application to cheroot: restores an invalid Content-Length
    for the API to refuse (and closes that connection, whose body length is
    unknown), and reads the rest of a chunked body the application did not
    read, so that the next request on a kept-alive connection parses."""

    def adapted(environ: dict, start_response: Callable):
        invalid_length = environ.pop(_INVALID_CONTENT_LENGTH_ENVIRON, None)
        if invalid_length is not None:
            environ["CONTENT_LENGTH"] = invalid_length

            def closing_start_response(status, headers, exc_info=None):
                return start_response(status, headers + [("Connection", "close")], exc_info)

            return application(environ, closing_start_response)
        try:
            return application(environ, start_response)
        finally:
            if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
                environ["wsgi.input"].read()

    return adapted


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def choose_auth_strategy(conf: cfg.ConfigOpts) -> None:
    """With no auth strategy configured, a server listening on loopback only
    is a local one: run it without authentication and say so. noauth2
    beyond loopback is said loudly."""
    if not _is_loopback(conf.host):
        deploy.warn_of_noauth2(conf, conf.host)
    elif not placement_conf.is_explicitly_set(conf, "api", "auth_strategy"):
        conf.set_override("auth_strategy", "noauth2", group="api")
        LOG.warning("No [api] auth_strategy is configured and the service listens on "
                    "%s only: running with noauth2, which trusts any X-Auth-Token. "
                    "This is for local use only.", conf.host)


def main(argv: list[str] | None = None) -> int:
    conf = placement_conf.build_conf(sys.argv[1:] if argv is None else argv,
                                     cli_opts=cli_opts)
    logging.setup(conf, "placement")
    placement_conf.warn_of_unused_options(conf)
    choose_auth_strategy(conf)
    problem = deploy.authentication_problem(conf)
    if problem is not None:
        LOG.error("placement-api does not start: %s", problem)
        return 1
    application = deploy.build_app(conf, load_provider_copy=True)
    deploy.settle_memory()
    server = wsgi.Server((conf.host, conf.port), serve_http_quirks(application),
                         numthreads=conf.threads, server_name="placement-api")
    server.ConnectionClass = _Connection
    server.shutdown_timeout = SHUTDOWN_GRACE_SECONDS
    signal.signal(signal.SIGTERM, _terminate)
    LOG.info("placement-api listening on http://%s:%s/", conf.host, conf.port)
    try:
        server.start()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        stop_within(server, conf.shutdown_timeout)
    return 0


def _terminate(*_) -> None:
    raise SystemExit(0)


def stop_within(server: cheroot_server.HTTPServer, timeout: float) -> None:
    """Stops ``server``, giving the requests it is serving ``timeout``
    seconds to finish; past that, the process exits at once without them
    (cheroot would wait for them without limit: a request hung on the
    identity service, or a runaway search, held the exit for ever). A
    second SIGTERM or SIGINT meanwhile ends the process straight away."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    stopping = threading.Thread(target=server.stop, name="stop", daemon=True)
    stopping.start()
    stopping.join(timeout)
    if stopping.is_alive():
        LOG.warning("Requests still being served %s s after the server was told to stop: "
                    "exiting without them.", timeout)
        std_logging.shutdown()  # os._exit flushes nothing
        os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
