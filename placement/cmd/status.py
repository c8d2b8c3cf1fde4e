"""``placement-status upgrade check``: is this deployment ready to run the
installed code? Run it after ``placement-manage db sync``, before starting
the new API servers."""

from __future__ import annotations

import sys

import os_resource_classes
import os_traits
import sqlalchemy as sa
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_upgradecheck import common_checks, upgradecheck

from placement import conf as placement_conf
from placement.cmd import manage
from placement.db import migration, tables


class Checks(upgradecheck.UpgradeCommands):
    def __init__(self, conf: cfg.ConfigOpts):
        self.conf = conf

    def _engine(self) -> sa.engine.Engine:
        return manage.database_engine(self.conf)

    def _check_schema(self) -> upgradecheck.Result:
        current, head = migration.current_revision(self._engine()), migration.head_revision()
        if current == head:
            return upgradecheck.Result(upgradecheck.Code.SUCCESS)
        return upgradecheck.Result(
            upgradecheck.Code.FAILURE,
            f"The database schema is at revision {current}, the code needs {head}. "
            "Run 'placement-manage db sync'.")

    def _check_standard_data(self) -> upgradecheck.Result:
        with self._engine().connect() as connection:
            try:
                classes = set(connection.scalars(sa.select(tables.resource_classes.c.name)))
                traits = set(connection.scalars(sa.select(tables.traits.c.name)))
            except (sa.exc.DBAPIError, db_exc.DBError):
                return upgradecheck.Result(
                    upgradecheck.Code.FAILURE,
                    "The resource class and trait tables cannot be read. "
                    "Run 'placement-manage db sync'.")
        missing = (set(os_resource_classes.STANDARDS) - classes) | (
            set(os_traits.get_traits()) - traits)
        if not missing:
            return upgradecheck.Result(upgradecheck.Code.SUCCESS)
        # The API server adds them when it starts, so this is no failure.
        return upgradecheck.Result(
            upgradecheck.Code.WARNING,
            f"{len(missing)} standard resource classes or traits are missing "
            f"(e.g. {sorted(missing)[0]}); 'placement-manage db sync' or starting "
            "the API adds them.")

    def _check_policy_file(self) -> upgradecheck.Result:
        return common_checks.check_policy_json(self, self.conf)

    _upgrade_checks = (
        ("Database schema", _check_schema),
        ("Standard resource classes and traits", _check_standard_data),
        ("Policy File JSON to YAML Migration", _check_policy_file),
    )


def main(argv: list[str] | None = None) -> int:
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    return upgradecheck.main(
        conf, project="placement", upgrade_command=Checks(conf),
        argv=sys.argv[1:] if argv is None else argv,
        default_config_files=placement_conf.default_config_files())


if __name__ == "__main__":
    sys.exit(main())
