"""Assembling the WSGI application from a configuration."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable

from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_middleware import cors, http_proxy_to_wsgi

from placement import conf as placement_conf
from placement import healthcheck, metrics, microversion, middleware, policies, router
from placement.candidates import snapshot
from placement.db import api as db_api
from placement.db import migration

LOG = logging.getLogger(__name__)


def database_from_conf(conf: cfg.ConfigOpts) -> db_api.Database:
    """The database named by ``[placement_database] connection``, or the
    embedded SQLite file; migrated when ``sync_on_startup`` says so or when
    it is the embedded one. A database server that is not up yet is waited
    for (``max_retries`` attempts, ``retry_interval`` seconds apart)."""
    db_conf = conf.placement_database
    url = db_conf.connection
    embedded = not url
    if embedded:
        url = placement_conf.default_database_url()
        LOG.info("No [placement_database] connection configured; using %s", url)
    engine = db_api.create_engine(url, db_conf)
    db_api.wait_until_reachable(engine, db_conf.max_retries, db_conf.retry_interval)
    if embedded or db_conf.sync_on_startup:
        migration.upgrade(engine)
    else:
        migration.sync_standard_data(engine)
    # Servers fork their workers from the process that built the application
    # (uwsgi without lazy-apps, gunicorn --preload): no connection may be
    # open then, each worker opens its own.
    engine.dispose()
    return db_api.Database(engine, max_retries=db_conf.db_max_retries)


def _load_provider_copy(db: db_api.Database) -> None:
    """Read the provider copy (placement.candidates.snapshot) before
    serving. Servers fork their workers from this process, or serve from
    it: each worker starts with the copy, and its first request reads only
    the providers changed since, not all of them (a second per 25 000
    providers). The copy is an earlier state like any other: every request
    still checks it against the change record."""
    try:
        with db.reader() as connection:
            snapshot.snapshot(connection)
    except db_exc.DBConnectionError as error:  # the first request will read it
        LOG.warning("The provider copy was not read at start-up: %s", error)
    db.engine.dispose()  # no connection may cross the fork (database_from_conf)


def _authentication(application: Callable, conf: cfg.ConfigOpts) -> Callable:
    if conf.api.auth_strategy == "noauth2":
        return middleware.NoAuth(application)
    from keystonemiddleware import auth_token

    authenticated = auth_token.AuthProtocol(application, {"oslo_config_config": conf})
    # The version and OpenAPI documents are served without credentials.
    return middleware.ByPath(authenticated,
                             {path: application for path in middleware.ANONYMOUS_PATHS})


def build_app(conf: cfg.ConfigOpts, db: db_api.Database | None = None,
              load_provider_copy: bool = False) -> Callable:
    """The whole service: middleware layers around the dispatcher.
    ``load_provider_copy``: servers ask for the provider copy to be read
    now (see _load_provider_copy) and followed in the background by each
    process that serves (snapshot.follow).

    Built from the inside out; a request meets them in the reverse order:
    request metrics (when enabled), request id, proxy headers, health check
    and metrics endpoint, CORS (when configured), authentication, context,
    fault wrapper, microversion, dispatcher.
    """
    if conf.metrics.enabled:
        # before anything records (the database's first connections)
        metrics.enable(conf.metrics.multiprocess_dir)
    if db is None:
        db = database_from_conf(conf)
    snapshot.keep_within(db.engine, conf.placement.allocation_candidates_cache_mb * 1024 * 1024)
    if load_provider_copy:
        _load_provider_copy(db)
    services = {"db": db, "conf": conf, "enforcer": policies.build_enforcer(conf)}
    dispatcher = router.Dispatcher()
    application: Callable = microversion.MicroversionMiddleware(dispatcher)
    application = middleware.FaultWrapper(application)
    application = middleware.Context(
        application, require_user=conf.api.auth_strategy == "keystone", services=services)
    application = _authentication(application, conf)
    if conf.cors.allowed_origin:
        application = cors.CORS(application, conf)
    # Load balancers probe without credentials: answered before auth. Only
    # its own path goes through the health check (an oslo.middleware layer
    # costs every request it sees). So are Prometheus scrapes.
    answered_before_auth = {
        healthcheck.PATH: healthcheck.Healthcheck(application, conf, db.engine.url)}
    if conf.metrics.enabled:
        answered_before_auth[middleware.METRICS_PATH] = middleware.MetricsEndpoint(
            metrics.exposition_application())
    application = middleware.ByPath(application, answered_before_auth)
    # Honours X-Forwarded-Proto/Host and Forwarded (so Location headers name
    # the proxy) when [oslo_middleware] enable_proxy_headers_parsing is set
    # (not a mutable option: it is read once, here).
    if conf.oslo_middleware.enable_proxy_headers_parsing:
        application = http_proxy_to_wsgi.HTTPProxyToWSGI(application, conf)
    application = middleware.RequestId(application)
    if conf.metrics.enabled:
        application = middleware.RequestMetrics(application, dispatcher.route_of,
                                                fixed_paths=answered_before_auth)
    if load_provider_copy:
        application = middleware.InEachProcess(
            application, functools.partial(snapshot.follow, db.engine))
    return application


# Allocations between collections of the youngest generation, then
# collections of a generation between collections of the next one. Python's
# defaults (700, 10, 10) collect a few times per candidates response, each
# time walking the objects the response and the provider copy
# (placement.candidates.snapshot) hold: a third of the response's CPU
# time. Almost all garbage here is freed by reference counting; cycles wait
# a little longer.
GC_THRESHOLDS = (50_000, 20, 100)


def settle_memory() -> None:
    """Call once the application is built, before serving. Everything built
    so far lives as long as the process; freezing it keeps the garbage
    collector from walking it again and again; the thresholds keep it from
    walking what requests build and keep (see GC_THRESHOLDS)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
