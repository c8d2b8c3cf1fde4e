"""Configuration options and how the service finds its configuration.

Options come from config files and from environment variables of the form
``OS_<GROUP>__<OPTION>`` (oslo.config reads those by itself).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

from oslo_config import cfg
from oslo_log import log as logging
from oslo_log import versionutils
from oslo_middleware import cors, http_proxy_to_wsgi, sizelimit
from oslo_middleware import opts as middleware_opts
from oslo_policy import opts as policy_opts

LOG = logging.getLogger(__name__)

DEFAULT_INCOMPLETE_CONSUMER_ID = "00000000-0000-0000-0000-000000000000"
# Placement's default of [oslo_middleware] max_request_body_size (the
# library's, 112 KiB, is too small): a consumer's allocations in POST
# /allocations or /reshaper are some 300 bytes, so a reshape of a host
# holding a thousand consumers is some 300 kB. 1 MiB holds 3 500 of them
# and is decoded in about 30 ms.
MAX_REQUEST_BODY_BYTES = 1024 * 1024

# Placement's defaults of keystonemiddleware's [keystone_authtoken]
# http_connect_timeout and http_request_max_retries, kept unless the
# configuration sets them: its own wait without limit for an answer (no
# timeout, 3 retries), and an identity service that accepts connections
# and never answers held every request with a token for minutes. With
# these, such a request gets its 503 after one or two timeouts (measured:
# 6.0 s for the first, whose service user's authentication times out too,
# 3.0 s for the next ones); a validation that times out is tried once more
# (6.5 s).
IDENTITY_TIMEOUT_SECONDS = 3
IDENTITY_RETRIES = 1

api_opts = [
    cfg.StrOpt(
        "auth_strategy",
        default="keystone",
        choices=[
            ("keystone", "Use keystonemiddleware's auth_token to authenticate."),
            ("noauth2", "Trust the X-Auth-Token header (testing and local use only)."),
        ],
        help="How incoming requests are authenticated.",
    ),
]

database_opts = [
    cfg.StrOpt(
        "connection",
        secret=True,
        help="SQLAlchemy URL of the placement database. When unset, an embedded "
        "SQLite file in the user's state directory is used and migrated at start-up.",
    ),
    cfg.BoolOpt(
        "sync_on_startup",
        default=False,
        help="Create or upgrade the database schema when the service starts.",
    ),
    cfg.IntOpt("max_pool_size", default=5, help="Connections kept open in the pool."),
    cfg.IntOpt("max_overflow", default=50, help="Connections allowed beyond the pool size."),
    cfg.IntOpt("pool_timeout", default=30, help="Seconds to wait for a pooled connection."),
    cfg.IntOpt(
        "connection_recycle_time",
        default=3600,
        help="Seconds after which a pooled connection is replaced.",
    ),
    cfg.BoolOpt(
        "pool_pre_ping",
        default=True,
        help="Test pooled connections before use so that a restarted database "
        "server is survived without errors (not on SQLite, which has no server).",
    ),
    cfg.IntOpt(
        "max_retries",
        default=10,
        min=-1,
        help="Attempts to connect to the database when the service starts, "
        "retry_interval seconds apart, before it gives up (-1: until it succeeds). "
        "The service waits so for a database server that is not up yet, logging "
        "each failed attempt.",
    ),
    cfg.IntOpt("retry_interval", default=1, min=0,
               help="Seconds between connection attempts at start-up."),
    cfg.IntOpt(
        "db_max_retries",
        default=5,
        help="Retries of a transaction that failed on a deadlock or a lost connection.",
    ),
    cfg.StrOpt(
        "slave_connection",
        secret=True,
        help="SQLAlchemy URL of a read replica of the database. Read-only "
        "transactions (what GET requests read) go to it; writes, and what "
        "they read, go to ``connection``. A replica lags behind its primary: "
        "a read right after a write may not see it yet. Unset: everything "
        "goes to ``connection``.",
    ),
    cfg.StrOpt(
        "connection_parameters",
        default="",
        help="Parameters added to the query string of the connection URLs "
        "(``connection`` and ``slave_connection``), as "
        "``param1=value1&param2=value2``: the database driver's options, e.g. "
        "``connect_timeout=5``.",
    ),
    cfg.StrOpt(
        "mysql_sql_mode",
        default="TRADITIONAL",
        help="SQL mode of the MariaDB/MySQL sessions. TRADITIONAL rejects "
        "out-of-range or truncated values rather than storing something else; "
        "an empty value leaves the server's own mode.",
    ),
    cfg.IntOpt(
        "connection_debug",
        default=0,
        min=0,
        max=100,
        help="Log the SQL statements run (logger sqlalchemy.engine): 50 and "
        "above at INFO, 100 with the rows they return, at DEBUG.",
    ),
    cfg.BoolOpt(
        "connection_trace",
        default=False,
        help="Append to each SQL statement a comment naming the placement code "
        "that ran it (file, line, function), as the database's own logs then "
        "show it.",
    ),
    cfg.BoolOpt(
        "sqlite_synchronous",
        default=True,
        help="SQLite: wait for each commit to reach the disk. False is faster "
        "and may lose the last commits on a power failure or a crash of the "
        "operating system (not on a crash of the service).",
    ),
]

# [DEFAULT] options of the original service that an operator's
# placement.conf may set: accepted so that it starts placement unchanged.
compatibility_opts = [
    cfg.StrOpt(
        "pybasedir",
        help="Accepted for compatibility with the original service's "
        "configuration; placement reads nothing from it.",
    ),
    cfg.StrOpt(
        "state_path",
        help="Accepted for compatibility with the original service's "
        "configuration; placement keeps no files there (the embedded SQLite "
        "database is under $XDG_STATE_HOME/placement).",
    ),
    cfg.StrOpt(
        "tempdir",
        help="Accepted for compatibility with the original service's "
        "configuration; placement writes no temporary files.",
    ),
]

placement_opts = [
    cfg.StrOpt(
        "incomplete_consumer_project_id",
        default=DEFAULT_INCOMPLETE_CONSUMER_ID,
        help="Project recorded for allocations written below microversion 1.8.",
    ),
    cfg.StrOpt(
        "incomplete_consumer_user_id",
        default=DEFAULT_INCOMPLETE_CONSUMER_ID,
        help="User recorded for allocations written below microversion 1.8.",
    ),
    cfg.IntOpt(
        "allocation_conflict_retry_count",
        default=10,
        min=0,
        help="Server-side retries of an allocation write that lost a race on a "
        "resource provider generation.",
    ),
    cfg.BoolOpt(
        "randomize_allocation_candidates",
        default=False,
        help="Return allocation candidates in random order (and sample randomly "
        "when a limit applies).",
    ),
    cfg.IntOpt(
        "max_allocation_candidates",
        default=-1,
        help="Stop generating allocation candidates after this many (-1: no limit).",
    ),
    cfg.StrOpt(
        "allocation_candidates_generation_strategy",
        default="depth-first",
        choices=[
            ("depth-first", "Exhaust one anchor tree before moving to the next."),
            ("breadth-first", "Take candidates from every anchor tree in turn."),
        ],
        help="Order in which the first max_allocation_candidates candidates are "
        "generated across provider trees (a limit alone takes candidates from the "
        "trees in turn, whatever this says).",
    ),
    cfg.IntOpt(
        "allocation_candidates_cache_mb",
        default=32,
        min=0,
        help="Memory, in MiB, each API process may use to keep allocation "
        "candidates found at each provider tree, with their JSON, for later "
        "requests of the same shape (the least recently used go first; 0 keeps "
        "nothing). Kept candidates are reused only while their providers and "
        "usages are unchanged. About 2.5 kB per candidate. Lists of providers "
        "asked with ``resources`` are kept there too (about 2 kB per provider "
        "listed), and so is what searches derive from each provider (its "
        "search record, its tree's members and its summary, about 1.8 kB), "
        "all emptied at once when it passes half of this bound or, in a "
        "cloud where that is more, 2 kB per provider. Each set of resource "
        "classes asked also keeps the trees its requests loaded, whatever "
        "their filters (about 0.5 kB per provider: 13 MB for a whole cloud of "
        "20 000 computes); in a large cloud asked for several sets of classes "
        "with filters, raise this bound so that each set's trees fit.",
    ),
]

workarounds_opts = [
    cfg.BoolOpt(
        "optimize_for_wide_provider_trees",
        default=False,
        help="Accepted for compatibility: partial candidates that cannot fit "
        "are always pruned early here.",
    ),
]

metrics_opts = [
    cfg.BoolOpt(
        "enabled",
        default=False,
        help="Record Prometheus metrics and serve them at GET /metrics, without "
        "authentication (restrict who may reach that path).",
    ),
    cfg.StrOpt(
        "multiprocess_dir",
        help="Directory of prometheus_client's multi-process mode, shared by the "
        "processes of a server (uwsgi, mod_wsgi): each writes its metrics there and "
        "a scrape of any adds them all up. Empty it before the server starts. "
        "Unset: the PROMETHEUS_MULTIPROC_DIR environment variable, and when that is "
        "unset too, each process serves its own metrics.",
    ),
]

# [capacity]: what GET /metrics says of the cloud's capacity, computed at
# each scrape by the process answering it: the placement_capacity_* gauges
# per resource class and aggregate (placement.capacity.resource_gauges), and the
# free slots of the shapes named here (placement.capacity.gauges).
capacity_opts = [
    cfg.BoolOpt(
        "resource_gauges",
        default=True,
        help="With [metrics] enabled, serve at GET /metrics, per resource class, the "
        "capacity ((total - reserved) * allocation_ratio), the amount used and the "
        "amount free of the whole cloud (aggregate=\"\") and of each aggregate "
        "(placement_capacity_total, _used and _free), computed by the process "
        "answering the scrape from its provider copy and one read of the usages.",
    ),
    cfg.IntOpt(
        "aggregate_gauges_limit",
        default=50,
        min=0,
        help="At most this many aggregates get their own placement_capacity_* series "
        "(those with the most providers, then by uuid); 0: the whole cloud only. "
        "Each aggregate adds three series per resource class to every scrape.",
    ),
    cfg.MultiStrOpt(
        "shapes",
        default=[],
        help="A named shape whose free slots GET /metrics reports as "
        "placement_capacity_free_slots{shape=NAME}, as NAME=QUERY where QUERY is "
        "written as the query of GET /allocation_candidates (repeat the option "
        "for several), e.g. "
        "small=resources=VCPU:1,MEMORY_MB:2048&required=!CUSTOM_GOLD. Counted by "
        "the process answering the scrape, with one read of the usages, as GET "
        "/capacity counts; needs [metrics] enabled.",
    ),
    cfg.FloatOpt(
        "scrape_cpu_seconds",
        default=0.5,
        min=0.0,
        help="CPU seconds a scrape may spend counting the shapes: once spent, the "
        "shapes not counted yet report the value of an earlier scrape (they are "
        "counted first at the next one) and placement_capacity_stale_shapes says "
        "how many did. 0: no bound.",
    ),
]

# oslo.policy 6 always enforces scope types and dropped this option; placement
# keeps accepting it (deployments and test suites set it) and honours it.
enforce_scope_opt = cfg.BoolOpt(
    "enforce_scope",
    default=True,
    help="Reject requests whose token scope (e.g. system) is not among the "
    "scope types of the rule checked. When False, the rule is evaluated anyway.",
)


def _oslo_policy_opts_missing() -> list[cfg.Opt]:
    """The [oslo_policy] options placement needs that oslo.policy lacks."""
    known = {opt.name for _, options in policy_opts.list_opts() for opt in options}
    return [opt for opt in (enforce_scope_opt,) if opt.name not in known]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(compatibility_opts)
    conf.register_opts(api_opts, group="api")
    conf.register_opts(database_opts, group="placement_database")
    conf.register_opts(placement_opts, group="placement")
    conf.register_opts(workarounds_opts, group="workarounds")
    conf.register_opts(metrics_opts, group="metrics")
    conf.register_opts(capacity_opts, group="capacity")
    # The options of the libraries the middleware stack is made of are
    # registered here too, so that they are known (config files,
    # OS_<GROUP>__<OPTION> variables, --help) before any middleware exists.
    conf.register_opts(cors.OPTS, group="cors")
    conf.register_opts(http_proxy_to_wsgi.OPTS, group="oslo_middleware")
    conf.register_opts(sizelimit.OPTS, group="oslo_middleware")
    conf.set_default("max_request_body_size", MAX_REQUEST_BODY_BYTES, group="oslo_middleware")
    for healthcheck_group, options in middleware_opts.list_opts_healthcheck():
        conf.register_opts(options, group=healthcheck_group)
    # Legacy RBAC unless configured otherwise, as the original service is
    # exercised (its admin may reshape); secure RBAC is one option away.
    policy_opts.set_defaults(conf, enforce_new_defaults=False)
    conf.register_opts(_oslo_policy_opts_missing(), group="oslo_policy")
    logging.register_options(conf)
    # oslo.log lists this one with its options (the sample shows it) but
    # registers it only where deprecations are reported through it: a file
    # that sets it, as the original's sample does, is not warned about.
    conf.register_opts(versionutils.deprecated_opts)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Entry point for oslo-config-generator."""
    return [
        ("DEFAULT", compatibility_opts),
        ("api", api_opts),
        ("placement_database", database_opts),
        ("placement", placement_opts),
        ("workarounds", workarounds_opts),
        ("metrics", metrics_opts),
        ("capacity", capacity_opts),
        ("oslo_policy", _oslo_policy_opts_missing()),
    ]


def set_library_defaults() -> None:
    """Placement's defaults of the libraries' options it sets otherwise
    (max_request_body_size, the identity service's timeout and retries),
    as the sample configuration shows them: oslo-config-generator's hook
    (entry point ``oslo.config.opts.defaults``)."""
    from keystonemiddleware import auth_token

    cfg.set_defaults(sizelimit.OPTS, max_request_body_size=MAX_REQUEST_BODY_BYTES)
    for _, options in auth_token.AUTH_TOKEN_OPTS:
        cfg.set_defaults(options, http_connect_timeout=IDENTITY_TIMEOUT_SECONDS,
                         http_request_max_retries=IDENTITY_RETRIES)


def default_config_files() -> list[str]:
    """Config files read when none is named on the command line."""
    config_dir = os.environ.get("OS_PLACEMENT_CONFIG_DIR")
    candidates = (
        [os.path.join(config_dir, "placement.conf")]
        if config_dir
        else ["/etc/placement/placement.conf"]
    )
    return [path for path in candidates if os.path.exists(path)]


def default_database_url() -> str:
    """The embedded SQLite database used when no connection is configured."""
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    directory = os.path.join(state_home, "placement")
    os.makedirs(directory, exist_ok=True)
    return "sqlite:///" + os.path.join(directory, "placement.sqlite")


def is_explicitly_set(conf: cfg.ConfigOpts, group: str, option: str) -> bool:
    """True when an option was given by a config file, the environment or code."""
    location = conf.get_location(option, group)
    return location is not None and location.location != cfg.Locations.opt_default


def build_conf(args: list[str] | None = None, config_files: list[str] | None = None,
               cli_opts: Sequence[cfg.Opt] = ()) -> cfg.ConfigOpts:
    """A fresh, loaded ConfigOpts: the service keeps no global configuration.
    ``cli_opts``: the command line options of a console script, parsed from
    ``args`` with the configuration's own (``--config-file``...)."""
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf.register_cli_opts(cli_opts)
    conf(
        args if args is not None else [],
        project="placement",
        default_config_files=(
            config_files if config_files is not None else default_config_files()
        ),
    )
    return conf


def _files_read(conf: cfg.ConfigOpts) -> list[str]:
    """The configuration files ``conf`` was loaded from, in order."""
    files = list(conf.config_file or [])
    if conf.config_dir:
        files += sorted(glob.glob(os.path.join(conf.config_dir, "*.conf")))
    return files


def _accepted_names(conf: cfg.ConfigOpts, sections: dict[str, dict]) -> set[tuple[str, str]]:
    """(group, name) of every option placement reads: registered ones and
    their deprecated names, keystonemiddleware's (registered only when its
    middleware is built) and the options of the identity plugin that
    ``[keystone_authtoken] auth_type`` names (loaded at the first request)."""
    # Imported here: the service imports them only with the keystone strategy.
    from keystoneauth1 import loading as ks_loading
    from keystonemiddleware import auth_token

    # oslo.config lists registered options only through this method.
    registered = [(group.name if group else "DEFAULT", info["opt"])
                  for info, group in conf._all_opt_infos()]
    registered += [(group, opt) for group, options in auth_token.list_opts()
                   for opt in options]
    authtoken = sections.get("keystone_authtoken", {})
    for auth_type in filter(None, authtoken.get("auth_type", [])):
        try:
            plugin_options = ks_loading.get_auth_plugin_conf_options(auth_type)
        except Exception:  # an unknown plugin: keystonemiddleware says so at start-up
            continue
        registered += [(group, opt) for group in ("keystone_authtoken",
                                                  *authtoken.get("auth_section", []))
                       for opt in plugin_options]
    return {name for group, opt in registered for name in _names(group, opt)}


def _names(group: str, opt: cfg.Opt) -> list[tuple[str, str]]:
    """(group, name) of ``opt`` in a configuration file, deprecated ones too."""
    return [(group, opt.dest), *((deprecated.group or group, deprecated.name.replace("-", "_"))
                                 for deprecated in opt.deprecated_opts if deprecated.name)]


def unused_options(conf: cfg.ConfigOpts) -> dict[str, list[str]]:
    """Configuration file -> the options it sets that placement does not
    read ("[group] name"), for the files ``conf`` was loaded from."""
    unused = {}
    for path in _files_read(conf):
        sections: dict[str, dict] = {}
        cfg.ConfigParser(path, sections).parse()
        accepted = _accepted_names(conf, sections)
        names = [f"[{group}] {name}" for group, options in sections.items()
                 for name in options if (group, name) not in accepted]
        if names:
            unused[path] = names
    return unused


def warn_of_unused_options(conf: cfg.ConfigOpts) -> None:
    """One warning naming every option of the configuration files that
    placement does not read (a typo, a group of another service, an option
    of the original service that placement has no use for): silently
    ignored, they would leave an operator believing they apply."""
    unused = unused_options(conf)
    if unused:
        LOG.warning("Options placement does not use, ignored: %s",
                    "; ".join(f"{path}: {', '.join(names)}" for path, names in unused.items()))
