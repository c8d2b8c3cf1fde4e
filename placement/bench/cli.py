"""``placement-bench`` / ``python -m placement.bench``: start, seed, measure, report."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from placement.bench import day, scenarios, seed, soak
from placement.bench.scenarios import Ledger, Limits, Target
from placement.bench.server import BACKENDS, DEFAULT_SERVER_CMD, FreshDatabase, Server
from placement.bench.stats import format_table, write_json

CellRunner = Callable[[Target, Limits, Ledger], dict[str, Any]]


@dataclass
class Cell:
    """One measured line of the report."""

    name: str
    dataset: str  # "cloud" (a-d) or "trees" (e)
    concurrency: int
    run: CellRunner


def _read(name: str, concurrency: int, path_for: Callable[[Target], Callable]) -> Cell:
    dataset = "trees" if name.startswith("e.") else "cloud"
    return Cell(name, dataset, concurrency, lambda target, limits, ledger: scenarios.read_cell(
        name, concurrency, target, limits, path_for(target)))


def _cloud_query(name: str) -> Callable[[Target], Callable]:
    def paths(target: Target) -> Callable:
        path = scenarios.cloud_queries(target.cloud)[name]
        return lambda worker: path
    return paths


def _cold(name: str, concurrency: int) -> Cell:
    return Cell(name, "cloud", concurrency, lambda target, limits, ledger: scenarios.cold_cell(
        name, concurrency, target, limits, ledger))


def _random_usages(target: Target) -> Callable:
    providers = target.cloud.all_providers
    return lambda worker: f"/resource_providers/{worker.rng.choice(providers)}/usages"


def _fixed(path: str) -> Callable[[Target], Callable]:
    return lambda target: (lambda worker: path)


# Run in this order: reads before the storms fill providers up, churn after
# the storms' verification, the soak of distinct queries last of the cloud (its
# warm-up memory holds what the cells before kept), the trees on a database
# of their own.
CELLS = [
    *(_read(name, concurrency, _cloud_query(name))
      for name in ("a.basic", "a.traits-member-of", "a.nested-granular")
      for concurrency in (1, 4)),
    *(_cold(name, concurrency) for name in ("a.cold-plain", "a.cold-filtered")
      for concurrency in (1, 4)),
    _cold("a.cold-claims", 4),
    _read("d.providers-with-capacity", 1, _cloud_query("d.providers-with-capacity")),
    *(_read(name, 1, _cloud_query(name))
      for name in ("d.capacity-providers", "d.capacity-one-aggregate")),
    _read("d.usages", 1, _random_usages),
    _read("d.usages", 4, _random_usages),
    *(Cell("b.storm", "cloud", concurrency,
           lambda target, limits, ledger, concurrency=concurrency: scenarios.storm_cell(
               concurrency, target, limits, ledger))
      for concurrency in (1, 8, 32)),
    Cell("c.churn", "cloud", 8, lambda target, limits, ledger: scenarios.churn_cell(
        8, target, limits, ledger)),
    *(Cell("d.project-usages", "cloud", concurrency,
           lambda target, limits, ledger, concurrency=concurrency: scenarios.project_usages_cell(
               concurrency, target, limits, ledger))
      for concurrency in (1, 4)),
    Cell("f.day", "cloud", day.WORKERS, lambda target, limits, ledger: day.day_cell(
        target, limits, ledger, limits.day_speed)),
    Cell("g.soak", "cloud", soak.CONCURRENCY, lambda target, limits, ledger: soak.soak_cell(
        target, limits)),
    _read("e.wide-tree", 1, _fixed(scenarios.wide_tree_query())),
    _read("e.same-subtree", 1, _fixed(scenarios.subtree_query())),
]


def select(cells: list[Cell], selection: str) -> list[Cell]:
    """``a,b.storm,e`` selects every cell whose name is, or starts with, one
    of the comma-separated words followed by a dot."""
    if selection == "all":
        return list(cells)
    words = [word.strip() for word in selection.split(",") if word.strip()]
    chosen = [cell for cell in cells
              if any(cell.name == word or cell.name.startswith(word + ".") for word in words)]
    if not chosen:
        raise SystemExit(f"--scenarios {selection!r} selects nothing; names: "
                         + ", ".join(sorted({cell.name for cell in cells})))
    return chosen


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="placement-bench",
        description="Start the placement service on a fresh database, seed it over "
                    "HTTP and measure the scenarios of the benchmark.")
    parser.add_argument("--n", type=int, default=1000,
                        help="compute nodes in the cloud data set, and trees of 7 "
                             "providers in the trees data set (default 1000)")
    parser.add_argument("--duration", type=float, default=10.0,
                        help="seconds per scenario cell (default 10)")
    parser.add_argument("--requests", type=int, default=5000,
                        help="at most this many operations per scenario cell (default 5000)")
    parser.add_argument("--scenarios", default="all",
                        help="comma-separated scenario names or letters, e.g. a,b.storm,e "
                             "(default all): " + ", ".join(dict.fromkeys(c.name for c in CELLS)))
    parser.add_argument("--backend", choices=BACKENDS, default="sqlite",
                        help="database for the service (MariaDB as root and PostgreSQL as "
                             "postgres on 127.0.0.1; a new database is created and dropped)")
    parser.add_argument("--server-cmd", default=DEFAULT_SERVER_CMD,
                        help="command starting a WSGI server on 127.0.0.1:{port} "
                             "({workdir}: a scratch directory of the run), e.g. "
                             "'uwsgi --http 127.0.0.1:{port} --socket {workdir}/uwsgi-{port}.sock "
                             "--http-to {workdir}/uwsgi-{port}.sock --http-keepalive "
                             "--http-buffer-size 1048576 --master --processes 2 --enable-threads "
                             "--pythonpath . --module placement.wsgi:application --die-on-term' "
                             "(default: %(default)s)")
    parser.add_argument("--day-speed", type=float, default=1.0,
                        help="f.day: multiply the day's rates by this (default 1: the rates "
                             "of N computes)")
    parser.add_argument("--seed-concurrency", type=int, default=4,
                        help="clients seeding in parallel (default 4)")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON here")
    parser.add_argument("--profile", metavar="DIR",
                        help="sample the server with py-spy during seeding and each cell; "
                             "collapsed stacks go to DIR/<dataset or cell>.txt "
                             "(summarise them with python -m placement.bench.profile DIR/*.txt)")
    parser.add_argument("--keep-workdir", action="store_true",
                        help="keep the SQLite files and server logs")
    args = parser.parse_args(argv)
    if (args.n < 10 or args.duration <= 0 or args.requests < 1 or args.seed_concurrency < 1
            or args.day_speed <= 0):
        parser.error("--n must be >= 10; --duration, --requests, --seed-concurrency and "
                     "--day-speed > 0")
    return args


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo
                          if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except OSError:
        commit = ""
    return {"cpus": os.cpu_count(), "cpu_model": model, "platform": platform.platform(),
            "python": platform.python_version(), "commit": commit}


def failed_result(cell: Cell, reason: str) -> dict[str, Any]:
    return {"name": cell.name, "concurrency": cell.concurrency, "count": 0, "errors": 1,
            "rate": 0.0, "p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0,
            "failed": reason, "notes": "FAILED: " + reason.splitlines()[0][:70]}


def seed_dataset(dataset: str, target: Target, args: argparse.Namespace) -> seed.SeedTiming:
    if dataset == "cloud":
        target.cloud = seed.seed_cloud(target.host, target.port, args.n, args.seed_concurrency)
        return target.cloud.timing
    target.trees = seed.seed_trees(target.host, target.port, args.n, args.seed_concurrency)
    return target.trees.timing


def run_dataset(dataset: str, cells: list[Cell], args: argparse.Namespace, workdir: str,
                report: dict[str, Any]) -> None:
    database = FreshDatabase(args.backend, workdir)
    try:
        server = Server(args.server_cmd, database.url, workdir)
        try:
            target = Target(server.host, server.port, cpu_seconds=server.cpu_seconds,
                            rss_mb=server.rss_mb, seed_concurrency=args.seed_concurrency)
            try:
                with server.profiled(profile_path(args, "seed-" + dataset)):
                    timing = seed_dataset(dataset, target, args)
                report["seeding"][dataset] = timing.as_dict()
            except Exception as exc:  # the cells cannot run; say why in each
                report["seeding"][dataset] = {"failed": str(exc)}
                report["results"].extend(failed_result(cell, f"seeding: {exc}")
                                         for cell in cells)
                return
            limits = Limits(args.duration, args.requests, args.day_speed)
            ledger = Ledger()
            for cell in cells:
                print(f"  {cell.name} c={cell.concurrency} ...", file=sys.stderr, flush=True)
                try:
                    with server.profiled(profile_path(
                            args, f"{cell.name}-c{cell.concurrency}")):
                        result = cell.run(target, limits, ledger)
                except Exception as exc:
                    result = failed_result(cell, str(exc))
                result["server_rss_mb"] = server.rss_mb()  # after the cell
                report["results"].append(result)
        finally:
            report["server_logs"].append(server.log_path)
            server.stop()
    finally:
        database.drop()


def profile_path(args: argparse.Namespace, label: str) -> str | None:
    if not args.profile:
        return None
    os.makedirs(args.profile, exist_ok=True)
    return os.path.join(args.profile, label + ".txt")


def has_failures(report: dict[str, Any]) -> bool:
    return any(result["errors"] or result.get("failed") or result.get("kept_up") is False
               or scenarios.verification_failed(result.get("verification", {}))
               or result.get("memory", {}).get("within_bound") is False
               for result in report["results"])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cells = select(CELLS, args.scenarios)
    workdir = tempfile.mkdtemp(prefix="placement-bench-")
    report: dict[str, Any] = {
        "meta": {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "n": args.n, "duration": args.duration, "requests": args.requests,
                 "backend": args.backend, "server_cmd": args.server_cmd,
                 "api_version": "1.39", "machine": machine()},
        "seeding": {}, "results": [], "server_logs": [],
    }
    for dataset in ("cloud", "trees"):
        dataset_cells = [cell for cell in cells if cell.dataset == dataset]
        if dataset_cells:
            print(f"{dataset}: starting the server and seeding (n={args.n}) ...",
                  file=sys.stderr, flush=True)
            run_dataset(dataset, dataset_cells, args, workdir, report)
    failed = has_failures(report)
    print(format_seeding(report["seeding"]))
    print(format_table(report["results"]))
    for result in report["results"]:
        if "events" in result:
            print(day.format_day(result))
        if "memory" in result:
            print(soak.format_soak(result))
        if result.get("verification"):
            print(f"{result['name']} c={result['concurrency']} verification: "
                  + ", ".join(f"{key}={value}" for key, value in result["verification"].items()))
    if args.json:
        write_json(args.json, report)
    if failed or args.keep_workdir:
        print(f"server logs and databases kept in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


def format_seeding(seeding: dict[str, Any]) -> str:
    lines = []
    for dataset, timing in seeding.items():
        if "failed" in timing:
            lines.append(f"seed {dataset}: FAILED: {timing['failed']}")
        else:
            lines.append(f"seed {dataset}: {timing['providers']} providers, "
                         f"{timing['requests']} requests in {timing['seconds']:.1f} s "
                         f"({timing['requests_per_second']:.0f} req/s)")
    return "\n".join(lines)
