"""``placement-manage``: database administration."""

from __future__ import annotations

import sys

import sqlalchemy as sa
from oslo_config import cfg

from placement import conf as placement_conf
from placement.db import api as db_api
from placement.db import migration


def database_engine(conf: cfg.ConfigOpts) -> sa.engine.Engine:
    """The engine of the configured database (the embedded one by default),
    once it can be reached (as the service waits for it at start-up)."""
    db_conf = conf.placement_database
    url = db_conf.connection or placement_conf.default_database_url()
    engine = db_api.create_engine(url, db_conf)
    db_api.wait_until_reachable(engine, db_conf.max_retries, db_conf.retry_interval)
    return engine


def db_sync(conf: cfg.ConfigOpts) -> int:
    migration.upgrade(database_engine(conf))
    return 0


def db_version(conf: cfg.ConfigOpts) -> int:
    print(migration.current_revision(database_engine(conf)))
    return 0


def db_stamp(conf: cfg.ConfigOpts) -> int:
    migration.stamp(database_engine(conf), conf.command.version)
    return 0


def _add_commands(subparsers) -> None:
    db = subparsers.add_parser("db", help="Database schema commands.")
    db_commands = db.add_subparsers(dest="db_command")
    db_commands.required = True
    sync = db_commands.add_parser("sync", help="Create or upgrade the schema to the newest.")
    sync.set_defaults(func=db_sync)
    version = db_commands.add_parser("version", help="Print the schema revision.")
    version.set_defaults(func=db_version)
    stamp = db_commands.add_parser("stamp", help="Record a revision without migrating.")
    stamp.add_argument("version", help="Revision to record (e.g. head).")
    stamp.set_defaults(func=db_stamp)


def main(argv: list[str] | None = None) -> int:
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf.register_cli_opt(cfg.SubCommandOpt("command", handler=_add_commands))
    conf(sys.argv[1:] if argv is None else argv, project="placement",
         default_config_files=placement_conf.default_config_files())
    return conf.command.func(conf)


if __name__ == "__main__":
    sys.exit(main())
