"""``python -m placement.bench.capacity``: the CPU one capacity count costs
at N computes, half of them claimed, and that of a scrape of 20 shapes.

It seeds the bench's ``cloud`` (``placement.bench.seed``: flat and nested
computes, sharing disks) through a service of its own, claims half of the
computes, then counts in this process, on the same database: the first
count reads the provider copy (not measured), the next ones are what a
warm service spends, measured with ``time.process_time`` (CPU, steadier
than wall time on a shared machine). ``--database-url`` counts on a
database seeded before (``--keep`` keeps the one seeded)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from placement.bench import seed
from placement.bench.server import DEFAULT_SERVER_CMD, FreshDatabase, Server
from placement.capacity import count, gauges
from placement.conf import build_conf
from placement.db import api as db_api
from placement.handlers.capacity import parse_shape

PLAIN = "resources=VCPU:2,MEMORY_MB:4096"
# a flavor with a disk: sharing providers serve half the computes, their
# trees are counted by simulated claims (a lower bound)
WITH_SHARED_DISK = "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20"
_SIZES = [(1, 2048), (2, 4096), (4, 8192), (8, 16384), (16, 65536)]
_FILTERS = ["", "&required=HW_CPU_X86_AVX2", "&required=CUSTOM_GOLD",
            "&required=!CUSTOM_GOLD"]
# what a scrape counts: 5 sizes x 4 filters
SCRAPE_SHAPES = [f"resources=VCPU:{vcpu},MEMORY_MB:{memory}{extra}"
                 for vcpu, memory in _SIZES for extra in _FILTERS]
# what each claimed compute (or NUMA node of a nested one) takes
CLAIM = {"VCPU": 32, "MEMORY_MB": 65536}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m placement.bench.capacity",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20000, help="computes (default 20000)")
    parser.add_argument("--backend", default="sqlite", help="sqlite, mysql or postgresql")
    parser.add_argument("--database-url", help="count on this database, seeded before")
    parser.add_argument("--keep", action="store_true",
                        help="keep the database seeded (its URL is printed)")
    parser.add_argument("--repeat", type=int, default=7, help="counts per figure")
    parser.add_argument("--concurrency", type=int, default=8, help="seeding clients")
    return parser.parse_args(argv)


def seed_claimed(args: argparse.Namespace, workdir: str) -> tuple[str, dict]:
    """A database with the cloud of ``args.n`` computes, every other one
    claimed; its URL and the seeding figures."""
    database = FreshDatabase(args.backend, workdir)
    server = Server(DEFAULT_SERVER_CMD, database.url, workdir)
    try:
        started = time.perf_counter()
        cloud = seed.seed_cloud(server.host, server.port, args.n, args.concurrency)
        seeder = seed.Seeder(server.host, server.port, args.concurrency)
        try:
            seeder.run_all([lambda target=target: seeder.call(
                "PUT", f"/allocations/{seeder.new_uuid()}", {
                    "allocations": {target: {"resources": CLAIM}},
                    "consumer_generation": None, "consumer_type": "INSTANCE",
                    "project_id": seeder.new_uuid(), "user_id": seeder.new_uuid()},
                status=204)
                for target in (cloud.flat_computes + cloud.numa_nodes[::2])[::2]])
        finally:
            seeder.close()
        figures = {"seed_seconds": round(time.perf_counter() - started, 1),
                   "providers": len(cloud.all_providers)}
    finally:
        server.stop()
    return database.url, figures


def cpu_ms(work: Callable[[], object], repeat: int) -> float:
    """The median CPU milliseconds of ``work``, after one run not measured."""
    work()
    runs = []
    for _ in range(repeat):
        started = time.process_time()
        work()
        runs.append((time.process_time() - started) * 1000)
    return round(statistics.median(runs), 1)


def measure(url: str, repeat: int) -> dict:
    conf = build_conf([])
    database = db_api.Database(db_api.create_engine(url))
    plain = parse_shape(PLAIN, conf.placement)
    disk = parse_shape(WITH_SHARED_DISK, conf.placement)

    def one(shape: tuple) -> Callable[[], count.Counted]:
        def counted() -> count.Counted:
            with database.reader() as connection:
                return count.count(connection, *shape)
        return counted

    collector = gauges.CapacityCollector(database, [
        gauges.Shape(text, *parse_shape(text, conf.placement)) for text in SCRAPE_SHAPES], 0)
    plain_answer = one(plain)()
    disk_answer = one(disk)()
    return {
        "plain_count_cpu_ms": cpu_ms(one(plain), repeat),
        "plain_total": plain_answer.total, "plain_exact": plain_answer.exact,
        "scrape_20_shapes_cpu_ms": cpu_ms(collector.counts, repeat),
        "shared_disk_count_cpu_ms": cpu_ms(one(disk), max(1, repeat // 3)),
        "shared_disk_total": disk_answer.total, "shared_disk_exact": disk_answer.exact,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report: dict = {"n": args.n}
    url = args.database_url
    if url is None:
        workdir = tempfile.mkdtemp(prefix="placement-capacity-bench-")
        url, report["seeding"] = seed_claimed(args, workdir)
        if args.keep:
            print(f"database kept: {url}", file=sys.stderr)
    report.update(measure(url, args.repeat))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
