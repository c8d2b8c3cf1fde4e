"""``placement-capacity``: how many more instances of a shape fit, read
from the database of the configuration (as ``placement-manage`` reads
it), printed as a table (``--json``: the answer of ``GET /capacity``),
with drains, and drawn as an SVG bar chart (``--chart FILE``)."""

from __future__ import annotations

import json
import sys

import sqlalchemy as sa
import webob.exc
from oslo_config import cfg

from placement import conf as placement_conf
from placement import exceptions
from placement.capacity import chart, report
from placement.cmd import text
from placement.cmd.manage import database_engine
from placement.db import api as db_api
from placement.db import tables
from placement.handlers.capacity import parse_shape

CLI_OPTS = [
    cfg.StrOpt("shape", positional=True, required=True,
               help="The shape, written as the query of GET /allocation_candidates, "
                    "e.g. 'resources=VCPU:2,MEMORY_MB:4096&required=HW_CPU_X86_AVX2'."),
    cfg.IntOpt("limit", default=10, min=0, help="Roots listed, those with most room."),
    cfg.BoolOpt("by-aggregate", default=False, help="Also count by aggregate."),
    cfg.MultiStrOpt("drain-provider", default=[],
                    help="Count without this provider (uuid) and its descendants, and "
                         "say whether its consumers could be placed elsewhere; "
                         "repeatable."),
    cfg.StrOpt("drain-aggregate", help="Count without the providers of this aggregate "
                                       "(uuid), and say whether theirs could be placed."),
    cfg.BoolOpt("json", default=False, help="Print the answer of GET /capacity as JSON."),
    cfg.StrOpt("chart", metavar="FILE", help="Also draw the answer as an SVG bar chart."),
]


def answer_of(conf: cfg.ConfigOpts) -> tuple[dict, dict[str, str]]:
    """The answer, and the names of the providers it lists."""
    groups, options = parse_shape(conf.shape, conf.placement)
    db = db_api.Database(database_engine(conf))
    try:
        with db.reader() as connection:
            answer = report.capacity_answer(
                connection, conf.shape, groups, options, conf.limit, conf.by_aggregate,
                conf.drain_provider, conf.drain_aggregate)
            uuids = [root["uuid"] for root in answer["roots"]]
            names = dict(connection.execute(
                sa.select(tables.resource_providers.c.uuid, tables.resource_providers.c.name)
                .where(tables.resource_providers.c.uuid.in_(uuids))).all())
    finally:
        db.dispose()
    return answer, names


def render(answer: dict, names: dict[str, str]) -> str:
    kind = "exact" if answer["exact"] else "a lower bound (simulated claims)"
    lines = [f"Shape: {answer['shape']}",
             f"Fit: {answer['total']} more ({kind}), on {answer['roots_with_room']} of "
             f"{answer['roots_counted']} roots counted", ""]
    rows = [["root", "uuid", "fit", "runs out first"]] + [
        [names.get(root["uuid"]) or "", root["uuid"], str(root["count"]),
         root["binding"] or ""] for root in answer["roots"]]
    lines += text.aligned(rows)
    lines += ["", "Runs out first: " + ", ".join(
        f"{name} on {roots} roots" for name, roots in answer["binding"].items())]
    if "aggregates" in answer:
        lines += ["", *text.aligned([["aggregate", "fit"]] + [
            [uuid, str(total)] for uuid, total in answer["aggregates"].items()])]
    if "drain" in answer:
        drain = answer["drain"]
        lines += ["", f"Drained: {len(drain['providers'])} providers; "
                      f"{drain['placed']} of {drain['consumers']} consumers could be "
                      "placed elsewhere"]
        lines += [f"  cannot place {item['consumer']} "
                  f"({','.join(f'{k}:{v}' for k, v in item['resources'].items())}): "
                  f"{item['reason']}" for item in drain["unplaced"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    conf = placement_conf.build_conf(sys.argv[1:] if argv is None else argv,
                                     cli_opts=CLI_OPTS)
    try:
        answer, names = answer_of(conf)
    except webob.exc.HTTPException as error:
        print(f"placement-capacity: {error.detail}", file=sys.stderr)
        return 2
    except exceptions.PlacementError as error:
        print(f"placement-capacity: {error}", file=sys.stderr)
        return 2
    print(json.dumps(answer, indent=2) if conf.json else render(answer, names))
    if conf.chart:
        with open(conf.chart, "w") as out:
            out.write(chart.svg(answer, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
