"""Assembling the WSGI application from a configuration."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Mapping

import webob.exc
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_middleware import cors, http_proxy_to_wsgi

from placement import conf as placement_conf
from placement import healthcheck, metrics, microversion, middleware, policies, router
from placement.candidates import follower
from placement.capacity import gauges, resource_gauges
from placement.db import api as db_api
from placement.db import migration
from placement.endpoint import Endpoint
from placement.handlers import capacity

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
    return db_api.Database(engine, max_retries=db_conf.db_max_retries,
                           replica=db_api.replica_engine(db_conf))


def _load_provider_copy(db: db_api.Database) -> None:
    """Read the provider copy (placement.candidates.provider_copy) before
    serving. Servers fork their workers from this process, or serve from
    it: each worker starts with the copy, and its first request reads only
    the providers changed since, not all of them (a second per 25 000
    providers). The copy is an earlier state like any other: every request
    still checks it against the change record."""
    try:
        with db.reader() as connection:
            follower.current(connection)
    except db_exc.DBConnectionError as error:  # the first request will read it
        LOG.warning("The provider copy was not read at start-up: %s", error)
    db.dispose()  # no connection may cross the fork (database_from_conf)


_AUTHTOKEN_GROUP = "keystone_authtoken"


def _keystone_section(conf: cfg.ConfigOpts) -> str:
    """Registers keystonemiddleware's options, with placement's defaults;
    the section naming the auth plugin (``auth_section``, else
    ``[keystone_authtoken]``)."""
    from keystonemiddleware import auth_token

    for group, options in auth_token.list_opts():
        conf.register_opts(options, group=group)
    conf.set_default("http_connect_timeout", placement_conf.IDENTITY_TIMEOUT_SECONDS,
                     group=_AUTHTOKEN_GROUP)
    conf.set_default("http_request_max_retries", placement_conf.IDENTITY_RETRIES,
                     group=_AUTHTOKEN_GROUP)
    return conf[_AUTHTOKEN_GROUP].auth_section or _AUTHTOKEN_GROUP


def authentication_problem(conf: cfg.ConfigOpts) -> str | None:
    """Why the configuration cannot authenticate any request, or None.

    ``[api] auth_strategy = keystone`` needs an auth plugin to validate
    tokens with; without one keystonemiddleware still starts and then fails
    every request."""
    if conf.api.auth_strategy != "keystone":
        return None
    from keystoneauth1 import exceptions as ksa_exceptions
    from keystoneauth1 import loading

    section = _keystone_section(conf)
    try:
        plugin = loading.load_auth_from_conf_options(conf, section)
    except ksa_exceptions.ClientException as error:
        reason = f"its auth plugin cannot be loaded: {error}"
    else:
        if plugin is not None:
            return None
        reason = "it sets no auth_type"
    return (f"[api] auth_strategy is keystone but the [{section}] section is not usable "
            f"({reason}): no token can be validated. Configure [{section}] (auth_type, "
            "auth_url and the service user's credentials), or, for local use only, set "
            "[api] auth_strategy = noauth2.")


def warn_of_noauth2(conf: cfg.ConfigOpts, listening_on: str) -> None:
    """Said at every start of a service with noauth2 reachable by others."""
    if conf.api.auth_strategy == "noauth2":
        LOG.warning("[api] auth_strategy = noauth2 and the service listens on %s: ANYONE "
                    "WHO CAN REACH IT IS TRUSTED AS WHOEVER ITS X-Auth-Token NAMES, an "
                    "administrator included. Use noauth2 on loopback only; configure "
                    "[api] auth_strategy = keystone otherwise.", listening_on)


def _authentication(application: Callable, conf: cfg.ConfigOpts,
                    problem: str | None) -> Callable:
    if conf.api.auth_strategy == "noauth2":
        return middleware.NoAuth(application)
    if problem is not None:
        authenticated: Callable = middleware.Refusing(problem)
    else:
        from keystoneauth1 import exceptions as ksa_exceptions
        from keystonemiddleware import auth_token

        authenticated = middleware.AuthenticationErrors(
            lambda inner: auth_token.AuthProtocol(inner, {"oslo_config_config": conf}),
            application, unavailable=(ksa_exceptions.ClientException,))
    # The version and OpenAPI documents are served without credentials.
    return middleware.ByPath(authenticated,
                             {path: application for path in middleware.ANONYMOUS_PATHS})


def _prepare_provider_copy(conf: cfg.ConfigOpts, db: db_api.Database, load: bool) -> None:
    """Bound what requests keep of the provider copy, which follows the
    database the readers read; with ``load``, read it now."""
    follower.keep_within(db.reader_engine,
                         conf.placement.allocation_candidates_cache_mb * 1024 * 1024)
    if load:
        _load_provider_copy(db)


def _capacity_gauges(conf: cfg.ConfigOpts, db: db_api.Database) -> list[object]:
    """The collectors of the capacity gauges: per resource class and
    aggregate (``[capacity] resource_gauges``), and of the shapes of
    ``[capacity] shapes`` (none when none is named); a shape the route
    would refuse stops the service."""
    collectors = resource_gauges.collectors(
        conf.capacity.resource_gauges, db, conf.capacity.aggregate_gauges_limit)
    shapes = []
    for entry in conf.capacity.shapes:
        name, _, text = entry.partition("=")
        try:
            shapes.append(gauges.Shape(name.strip(), *capacity.parse_shape(
                text.strip(), conf.placement)))
        except webob.exc.HTTPException as error:
            raise ValueError(f"[capacity] shapes: {entry!r}: {error.detail}") from None
    if shapes:
        collectors.append(gauges.CapacityCollector(db, shapes,
                                                   conf.capacity.scrape_cpu_seconds))
    return collectors


def build_app(conf: cfg.ConfigOpts, db: db_api.Database | None = None,
              load_provider_copy: bool = False,
              routes: Mapping[str, Mapping[str, Endpoint]] = router.ROUTES) -> Callable:
    """The whole service: middleware layers around the dispatcher.
    ``load_provider_copy``: servers ask for the provider copy to be read
    now (see _load_provider_copy) and followed in the background by each
    process that serves (follower.follow). ``routes``: the route table
    (the service's; a test may serve another). Built from the inside out;
    a request meets them in the reverse order: request metrics (when
    enabled), request id, fault wrapper, proxy headers, health check and
    metrics endpoint, body size limit, CORS (when configured),
    authentication, context, microversion, dispatcher.

    A configuration that cannot authenticate requests
    (authentication_problem) makes a service that answers 503 to every
    request needing a token, and whose health check says why."""
    problem = authentication_problem(conf)
    if problem is not None:
        LOG.error(problem)
    if conf.metrics.enabled:
        # before anything records (the database's first connections)
        metrics.enable(conf.metrics.multiprocess_dir)
    if db is None:
        db = database_from_conf(conf)
    _prepare_provider_copy(conf, db, load_provider_copy)
    services = {"db": db, "conf": conf, "enforcer": policies.build_enforcer(conf, routes)}
    dispatcher = router.Dispatcher(routes)
    application: Callable = microversion.MicroversionMiddleware(dispatcher)
    application = middleware.Context(
        application, require_user=conf.api.auth_strategy == "keystone", services=services)
    application = _authentication(application, conf, problem)
    if conf.cors.allowed_origin:
        application = cors.CORS(application, conf)
    application = middleware.BodyLimit(application,
                                       conf.oslo_middleware.max_request_body_size)
    # Load balancers probe without credentials: answered before auth. Only
    # its own path goes through the health check (an oslo.middleware layer
    # costs every request it sees). So are Prometheus scrapes.
    answered_before_auth = {healthcheck.PATH: healthcheck.Healthcheck(
        application, conf, db.engine.url, unservable=problem)}
    if conf.metrics.enabled:
        answered_before_auth[middleware.METRICS_PATH] = middleware.MetricsEndpoint(
            metrics.exposition_application(_capacity_gauges(conf, db)))
    application = middleware.ByPath(application, answered_before_auth)
    # Honours X-Forwarded-Proto/Host and Forwarded (so Location headers name
    # the proxy) when [oslo_middleware] enable_proxy_headers_parsing is set
    # (not a mutable option: it is read once, here).
    if conf.oslo_middleware.enable_proxy_headers_parsing:
        application = http_proxy_to_wsgi.HTTPProxyToWSGI(application, conf)
    # Outside authentication too: keystonemiddleware lets exceptions through.
    application = middleware.FaultWrapper(application)
    application = middleware.RequestId(application)
    if conf.metrics.enabled:
        application = middleware.RequestMetrics(application, dispatcher.route_of,
                                                fixed_paths=answered_before_auth)
    if load_provider_copy:
        application = middleware.InEachProcess(
            application, functools.partial(follower.follow, db.reader_engine))
    return application


# Allocations between collections of the youngest generation, then
# collections of a generation between collections of the next one. Python's
# defaults (700, 10, 10) collect a few times per candidates response, each
# time walking the objects the response and the provider copy
# (placement.candidates.provider_copy) hold: a third of the response's CPU
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
