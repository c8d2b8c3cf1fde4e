"""``placement-api``: serve the API with a multi-threaded WSGI server."""

from __future__ import annotations

import ipaddress
import signal
import sys

from cheroot import wsgi
from oslo_config import cfg
from oslo_log import log as logging

from placement import conf as placement_conf
from placement import deploy

LOG = logging.getLogger(__name__)

cli_opts = [
    cfg.StrOpt("host", default="127.0.0.1", help="Address to listen on."),
    cfg.PortOpt("port", default=8778, help="Port to listen on."),
    cfg.IntOpt("threads", default=16, min=1, help="Threads serving requests."),
]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def choose_auth_strategy(conf: cfg.ConfigOpts) -> None:
    """With no auth strategy configured, a server listening on loopback only
    is a local one: run it without authentication and say so."""
    if placement_conf.is_explicitly_set(conf, "api", "auth_strategy"):
        return
    if _is_loopback(conf.host):
        conf.set_override("auth_strategy", "noauth2", group="api")
        LOG.warning("No [api] auth_strategy is configured and the service listens on "
                    "%s only: running with noauth2, which trusts any X-Auth-Token. "
                    "This is for local use only.", conf.host)


def main(argv: list[str] | None = None) -> int:
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf.register_cli_opts(cli_opts)
    conf(sys.argv[1:] if argv is None else argv, project="placement",
         default_config_files=placement_conf.default_config_files())
    logging.setup(conf, "placement")
    choose_auth_strategy(conf)
    application = deploy.build_app(conf)
    server = wsgi.Server((conf.host, conf.port), application, numthreads=conf.threads,
                         server_name="placement-api")
    signal.signal(signal.SIGTERM, _terminate)
    LOG.info("placement-api listening on http://%s:%s/", conf.host, conf.port)
    try:
        server.start()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.stop()
    return 0


def _terminate(*_) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main())
