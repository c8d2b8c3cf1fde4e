"""``g.soak``: a worker's memory under a long run of distinct candidate queries.

What requests keep for later ones is bounded in bytes
(``[placement] allocation_candidates_cache_mb``): however many distinct
queries come, a worker's memory must level off. The cell first sends one
query family (``a.basic``) for a quarter of the duration, the warm-up, and
takes the resident memory of the largest server process; then, for the
duration, queries each of a shape of its own, as schedulers send them for
many flavors (amounts, limits, required and forbidden traits, member_of,
granular groups), sampling the memory as it goes. The run is within bound
when no sample passes ``BOUND`` times the warm-up memory.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

from placement.bench.scenarios import (
    Limits,
    Target,
    Worker,
    candidates_query,
    cell_result,
    cloud_queries,
    run_closed_loop,
    timed_get,
)

BOUND = 1.5
CONCURRENCY = 2
SAMPLES = 20
TRAITS = ("HW_CPU_X86_AVX2", "!HW_CPU_X86_AVX2", "CUSTOM_GOLD", "!CUSTOM_GOLD")


def distinct_queries(aggregates: list[str], seed: int = 0) -> Iterator[str]:
    """Candidate queries, each of a shape no earlier one had."""
    rng = random.Random(seed)
    seen: set[str] = set()
    while True:
        params: dict[str, str] = {}
        amounts = (f"VCPU:{rng.randint(1, 32)},MEMORY_MB:{512 * rng.randint(1, 128)}")
        disk = f"DISK_GB:{rng.randint(1, 500)}"
        if rng.random() < 0.2:  # a NUMA-aware flavor: two granular groups
            params["resources1"] = amounts
            params["resources2"] = f"VCPU:{rng.randint(1, 8)}"
            params["resources"] = disk
            params["group_policy"] = rng.choice(["isolate", "none"])
        else:
            params["resources"] = f"{amounts},{disk}"
        if rng.random() < 0.4:
            params["required"] = rng.choice(TRAITS)
        if rng.random() < 0.3:
            params["member_of"] = "in:" + ",".join(rng.sample(aggregates, rng.randint(1, 3)))
        params["limit"] = str(rng.choice([10, 100, 1000]))
        query = candidates_query(**params)
        if query not in seen:
            seen.add(query)
            yield query


def soak_cell(target: Target, limits: Limits) -> dict[str, Any]:
    """The warm-up, then the distinct queries; the result's ``memory``
    gives the warm-up memory, the samples taken and whether they stayed
    within bound."""
    family = cloud_queries(target.cloud)["a.basic"]
    warm_up = Limits(limits.duration / 4, limits.requests)
    run_closed_loop(target, CONCURRENCY, warm_up, lambda worker: timed_get(worker, family))
    warm_mb = max(target.rss_mb())

    queries = distinct_queries(target.cloud.aggregates)
    queries_lock = threading.Lock()
    sent = [0]

    def next_query(worker: Worker) -> None:
        with queries_lock:
            query = next(queries)
            sent[0] += 1
        timed_get(worker, query)

    samples: list[list[float]] = []
    done = threading.Event()
    started = time.perf_counter()

    def sample_memory() -> None:
        while not done.wait(limits.duration / SAMPLES):
            samples.append([round(time.perf_counter() - started, 1), sent[0],
                            max(target.rss_mb())])

    sampler = threading.Thread(target=sample_memory)
    sampler.start()
    try:
        run = run_closed_loop(target, CONCURRENCY, limits, next_query)
    finally:
        done.set()
        sampler.join()
    last_mb = max(target.rss_mb())
    samples.append([round(time.perf_counter() - started, 1), sent[0], last_mb])
    peak_mb = max(mb for _, _, mb in samples)
    result = cell_result("g.soak", CONCURRENCY, run, "get")
    result["memory"] = {
        "warm_mb": warm_mb, "peak_mb": peak_mb, "last_mb": last_mb,
        "ratio": round(peak_mb / warm_mb, 2), "bound": BOUND,
        "within_bound": peak_mb <= BOUND * warm_mb,
        "distinct_queries": sent[0],
        "samples": samples,  # [seconds, queries sent, MB of the largest process]
    }
    result["notes"] = (f"{sent[0]} distinct queries; largest process {warm_mb:.0f} MB "
                       f"after warm-up, peak {peak_mb:.0f} MB ({result['memory']['ratio']}x)")
    return result


def format_soak(result: dict[str, Any]) -> str:
    """The memory samples of the soak, a line each."""
    memory = result["memory"]
    lines = [f"g.soak: {memory['distinct_queries']} distinct queries, largest process "
             f"{memory['warm_mb']:.0f} MB after warm-up, peak {memory['peak_mb']:.0f} MB "
             f"({memory['ratio']}x, bound {memory['bound']}x): "
             + ("within bound" if memory["within_bound"] else "OVER BOUND"),
             f"  {'s':>7} {'queries':>8} {'MB':>7}"]
    lines += [f"  {seconds:>7.1f} {queries:>8} {mb:>7.1f}"
              for seconds, queries, mb in memory["samples"]]
    return "\n".join(lines)
