"""Profile one request in-process with cProfile, without HTTP or load noise.

Point it at a database the benchmark seeded (``--keep-workdir`` keeps the
SQLite files) and at a request path:

    python -m placement.bench.profile_request \\
        sqlite:////tmp/placement-bench-x/placement_bench_y.sqlite \\
        '/allocation_candidates?resources=VCPU:2,MEMORY_MB:2048,DISK_GB:20&limit=1000'

It prints the mean time per request and the functions with the highest
cumulative and own times.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import webob

from placement import conf as placement_conf
from placement import deploy


def build_app(database_url: str):
    conf = placement_conf.build_conf(config_files=[])
    conf.set_override("connection", database_url, group="placement_database")
    conf.set_override("auth_strategy", "noauth2", group="api")
    app = deploy.build_app(conf)
    deploy.settle_memory()  # as the servers do
    return app


def call(app, method: str, path: str) -> int:
    request = webob.Request.blank(path, method=method, headers={
        "X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39",
        "Accept": "application/json"})
    return request.get_response(app).status_int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("database_url")
    parser.add_argument("path")
    parser.add_argument("--method", default="GET")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    app = build_app(args.database_url)
    status = call(app, args.method, args.path)  # warm caches, check it works
    print(f"status {status}")
    started = time.perf_counter()
    for _ in range(args.count):
        call(app, args.method, args.path)
    print(f"{1000 * (time.perf_counter() - started) / args.count:.1f} ms per request "
          "(no profiler)")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.count):
        call(app, args.method, args.path)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
