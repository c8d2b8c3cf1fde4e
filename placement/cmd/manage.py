"""``placement-manage``: database administration and audit."""

from __future__ import annotations

import importlib.resources
import json
import sys

import sqlalchemy as sa
from oslo_config import cfg

from placement import conf as placement_conf
from placement.db import api as db_api
from placement.db import migration, provider_changes
from placement.objects import audit


def database_engine(conf: cfg.ConfigOpts) -> sa.engine.Engine:
    """The engine of the configured database (the embedded one by default),
    once it can be reached (as the service waits for it at start-up)."""
    db_conf = conf.placement_database
    url = db_conf.connection or placement_conf.default_database_url()
    engine = db_api.create_engine(url, db_conf)
    db_api.wait_until_reachable(engine, db_conf.max_retries, db_conf.retry_interval)
    return engine


def db_sync(conf: cfg.ConfigOpts) -> int:
    """Create, upgrade or take over the schema (``--check``: only say what
    that would do)."""
    engine = database_engine(conf)
    try:
        if conf.command.check:
            plan = migration.plan(engine)
            print(plan.report())
            return 1 if plan.refusals else 0
        migration.upgrade(engine)
    except migration.UnknownSchema as error:
        print(error, file=sys.stderr)
        return 2
    return 0


def db_handback(conf: cfg.ConfigOpts) -> int:
    """Leave the database ready for the original placement service."""
    try:
        done = migration.hand_back(database_engine(conf))
    except migration.UnknownSchema as error:
        print(error, file=sys.stderr)
        return 2
    print("\n".join(done))
    return 0


def reload(conf: cfg.ConfigOpts) -> int:
    """Make every placement process reload its provider copy at its next
    request (after SQL that the triggers did not see, e.g. a restore)."""
    with database_engine(conf).begin() as connection:
        provider_changes.request_reload(connection)
    print("Every placement process reloads its provider copy at its next request.")
    return 0


def db_version(conf: cfg.ConfigOpts) -> int:
    print(migration.current_revision(database_engine(conf)))
    return 0


def db_stamp(conf: cfg.ConfigOpts) -> int:
    migration.stamp(database_engine(conf), conf.command.version)
    return 0


# What each audit check reports, as the table headings say it.
AUDIT_TITLES = {
    "over_capacity": "Inventories whose allocations exceed their capacity, "
                     "(total - reserved) * allocation_ratio",
    "allocations_without_inventory": "Allocations of a class their provider has no inventory of",
    "empty_consumers": "Consumers without allocations",
    "incomplete_consumers": "Incomplete consumers (the configured placeholder project or user)",
    "inconsistent_providers": "Providers whose root or parent is inconsistent",
    "usage_mismatches": "Inventories whose kept usage (inventories.used) is not the sum "
                        "of their allocations",
    "project_usage_mismatches": "Project usages (kept for GET /usages) that are not what "
                                "the allocations make them",
}


def _table(rows: list[dict[str, object]]) -> str:
    """Rows of the same keys as aligned columns under a header."""
    header = list(rows[0])
    cells = [header, *([("-" if value is None else str(value)) for value in row.values()]
                       for row in rows)]
    widths = [max(len(line[column]) for line in cells) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
             .rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join("  " + line for line in lines)


def _print_report(report: audit.Report) -> None:
    if report.clean:
        print("No inconsistency found.")
        return
    for check, findings in report.checks().items():
        if findings:
            print(f"{AUDIT_TITLES[check]}: {len(findings)}")
            print(_table([audit.shown_fields(finding) for finding in findings]))
            print()


def _print_repairs(repairs: audit.Repairs) -> None:
    for consumer_uuid in repairs.removed_consumers:
        print(f"Removed consumer {consumer_uuid}, which had no allocations.")
    for usage in repairs.recomputed_usages:
        print(f"Recomputed the usage of {usage.resource_class} on provider "
              f"{usage.provider_uuid}: {usage.was} -> {usage.now} (derived data: "
              "the sum of its allocations).")
    if repairs.recomputed_project_usages:
        print(f"Recomputed the project usages: {repairs.recomputed_project_usages} "
              "differed (derived data: the sums of the allocations by project, user, "
              "consumer type and class).")
    if not (repairs.removed_consumers or repairs.recomputed_usages
            or repairs.recomputed_project_usages):
        print("Nothing to repair: --fix removes consumers without allocations and "
              "recomputes kept usages only.")


def audit_database(conf: cfg.ConfigOpts) -> int:
    """Report the inconsistencies of the database (exit code 1 when there
    are any, even when --fix repaired them); --fix repairs what is safe."""
    db = db_api.Database(database_engine(conf),
                         max_retries=conf.placement_database.db_max_retries)
    try:
        placement = conf.placement
        report = audit.run(db, placement.incomplete_consumer_project_id,
                           placement.incomplete_consumer_user_id)
        repairs = audit.repair(db, report) if conf.command.fix else None
    finally:
        db.dispose()
    if conf.command.json:
        document: dict[str, object] = {
            "clean": report.clean,
            "findings": {check: [audit.shown_fields(finding) for finding in findings]
                         for check, findings in report.checks().items()}}
        if repairs is not None:
            document["repairs"] = {
                "removed_consumers": repairs.removed_consumers,
                "recomputed_usages": [audit.shown_fields(usage)
                                      for usage in repairs.recomputed_usages],
                "recomputed_project_usages": repairs.recomputed_project_usages}
        print(json.dumps(document, indent=2))
    else:
        _print_report(report)
        if repairs is not None:
            _print_repairs(repairs)
    return 0 if report.clean else 1


# What ``placement-manage sample NAME`` prints: files installed with the
# package (placement/samples), which the documentation includes as they are.
SAMPLES = {
    "uwsgi": "uwsgi.ini",
    "systemd": "placement-api.service",
    "config": "placement.conf.sample",
    "policy": "policy.yaml.sample",
    # a Grafana dashboard over the capacity gauges of GET /metrics (also in
    # etc/placement/ of a checkout; a test keeps the two equal)
    "grafana": "grafana-capacity.json",
}


def sample_text(name: str) -> str:
    """The installed sample file called ``name`` in SAMPLES."""
    return importlib.resources.files("placement").joinpath("samples", SAMPLES[name]).read_text()


def print_sample(conf: cfg.ConfigOpts) -> int:
    """Print a deployment file installed with the package."""
    sys.stdout.write(sample_text(conf.command.file))
    return 0


def _add_commands(subparsers) -> None:
    db = subparsers.add_parser("db", help="Database schema commands.")
    db_commands = db.add_subparsers(dest="db_command")
    db_commands.required = True
    sync = db_commands.add_parser(
        "sync", help="Create or upgrade the schema to the newest; takes over a database of "
        "the original placement service in place.")
    sync.add_argument("--check", action="store_true",
                      help="Only say what it would change and how long it should take.")
    sync.set_defaults(func=db_sync)
    handback = db_commands.add_parser(
        "handback", help="Leave the database ready for the original placement service.")
    handback.set_defaults(func=db_handback)
    version = db_commands.add_parser("version", help="Print the schema revision.")
    version.set_defaults(func=db_version)
    stamp = db_commands.add_parser("stamp", help="Record a revision without migrating.")
    stamp.add_argument("version", help="Revision to record (e.g. head).")
    stamp.set_defaults(func=db_stamp)
    audit_parser = subparsers.add_parser(
        "audit", help="Report inconsistencies of the database (exit code 1 when any).")
    audit_parser.add_argument("--json", action="store_true", help="Print a JSON document.")
    audit_parser.add_argument(
        "--fix", action="store_true",
        help="Remove consumers without allocations and recompute kept usages (derived "
        "data); nothing else, allocations never.")
    audit_parser.set_defaults(func=audit_database)
    reload_parser = subparsers.add_parser(
        "reload", help="Make every placement process reload its provider copy.")
    reload_parser.set_defaults(func=reload)
    sample = subparsers.add_parser(
        "sample", help="Print a deployment file installed with placement: the uwsgi "
        "recipe, the systemd unit, the sample configuration, the sample policy or the "
        "Grafana dashboard of the capacity gauges.")
    sample.add_argument("file", choices=list(SAMPLES), help="Which file.")
    sample.set_defaults(func=print_sample)


def main(argv: list[str] | None = None) -> int:
    conf = placement_conf.build_conf(
        sys.argv[1:] if argv is None else argv,
        cli_opts=[cfg.SubCommandOpt("command", handler=_add_commands)])
    placement_conf.warn_of_unused_options(conf)
    return conf.command.func(conf)


if __name__ == "__main__":
    sys.exit(main())
