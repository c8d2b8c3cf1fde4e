"""``/healthcheck`` for load balancers: oslo.middleware's health check, always
with a backend that pings the database, answered before authentication.

200 while the database answers, 503 when it does not (a server that cannot
reach its database can serve nothing but the version document), and 503
always when the service is configured so that it cannot authenticate
requests. Further oslo.middleware backends (e.g. ``disable_by_file``) can
be named in ``[healthcheck] backends``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import sqlalchemy as sa
from oslo_config import cfg
from oslo_log import log as logging
from oslo_middleware import healthcheck
from oslo_middleware.healthcheck import pluginbase
from sqlalchemy import pool
from stevedore import extension

from placement.db import tables

LOG = logging.getLogger(__name__)

PATH = "/healthcheck"

# Seconds a probe waits for a database server to accept a connection: a load
# balancer's probe must get an answer before its own timeout.
CONNECT_TIMEOUT = 5


def ping_engine(url: str | sa.engine.URL) -> sa.engine.Engine:
    """An engine that opens a new connection for every ping.

    The service's pool would keep answering from connections it already
    holds (an open SQLite file survives its removal); a fresh connection
    shows whether the database can be reached now. SQLite is opened
    read-write without creating the file, so a missing database is reported
    instead of replaced by an empty one.
    """
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database

        def connect_existing_file():
            return sqlite3.connect(f"file:{path}?mode=rw", uri=True,
                                   check_same_thread=False)

        return sa.create_engine(parsed, poolclass=pool.NullPool, creator=connect_existing_file)
    return sa.create_engine(parsed, poolclass=pool.NullPool,
                            connect_args={"connect_timeout": CONNECT_TIMEOUT})


class DatabasePing(pluginbase.HealthcheckBaseExtension):
    """Healthy when the placement schema can be read."""

    NAME = "placement_database"

    def __init__(self, oslo_conf: cfg.ConfigOpts, conf: dict, engine: sa.engine.Engine):
        super().__init__(oslo_conf, conf)
        self.engine = engine

    def healthcheck(self, server_port: int) -> pluginbase.HealthcheckResult:
        try:
            with self.engine.connect() as connection:
                connection.execute(sa.text(
                    f"SELECT version_num FROM {tables.VERSION_TABLE}")).all()
        except Exception as error:
            LOG.warning("Health check: the database cannot be reached: %s", error)
            return pluginbase.HealthcheckResult(
                available=False, reason="The database cannot be reached.",
                details=type(error).__name__)
        return pluginbase.HealthcheckResult(available=True, reason="OK")


class Unservable(pluginbase.HealthcheckBaseExtension):
    """Never healthy: the service is configured so that it cannot serve the
    API (placement.deploy.authentication_problem)."""

    NAME = "placement_configuration"

    def __init__(self, oslo_conf: cfg.ConfigOpts, conf: dict, reason: str):
        super().__init__(oslo_conf, conf)
        self.reason = reason

    def healthcheck(self, server_port: int) -> pluginbase.HealthcheckResult:
        return pluginbase.HealthcheckResult(available=False, reason=self.reason)


class Healthcheck(healthcheck.Healthcheck):
    """Answers ``GET``/``HEAD /healthcheck``; passes every other request on.
    ``unservable``: why the service cannot serve the API, reported as the
    first reason of every probe."""

    def __init__(self, application: Callable, conf: cfg.ConfigOpts,
                 database_url: str | sa.engine.URL, unservable: str | None = None):
        super().__init__(application, conf)
        # Always on, so they are added here rather than named in the
        # ``backends`` option (which loads plugins through entry points).
        if unservable is not None:
            self._add(Unservable(conf, {}, unservable))
        self._add(DatabasePing(conf, {}, ping_engine(database_url)))

    def _add(self, backend: pluginbase.HealthcheckBaseExtension) -> None:
        self._backends.extensions.append(
            extension.Extension(backend.NAME, None, type(backend), backend))

    def process_request(self, req):
        if req.path_info != PATH or req.method not in ("GET", "HEAD"):
            return None
        return super().process_request(req)
