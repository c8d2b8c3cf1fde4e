"""The benchmark still works: a tiny run of every scenario against SQLite
reports each scenario cell, with no error and no over-commit. Times are
not asserted (they are the benchmark's business, not the test suite's)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from placement.bench import cli, scenarios, soak

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_tiny_run_reports_every_scenario_without_errors(tmp_path):
    report_path = tmp_path / "report.json"
    environment = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run(
        [sys.executable, "-m", "placement.bench", "--n", "20", "--duration", "5", "--requests", "4",
         "--seed-concurrency", "2", "--backend", "sqlite", "--json", str(report_path)],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr

    report = json.loads(report_path.read_text())
    expected = {(cell.name, cell.concurrency) for cell in cli.CELLS}
    reported = {(result["name"], result["concurrency"]) for result in report["results"]}
    assert reported == expected
    assert set(report["seeding"]) == {"cloud", "trees"}
    assert all("failed" not in timing for timing in report["seeding"].values())
    for result in report["results"]:
        label = f"{result['name']} c={result['concurrency']}"
        assert "failed" not in result, label
        assert result["errors"] == 0, (label, result)
        assert result["count"] > 0, label
        if result["name"] in ("b.storm", "c.churn"):  # the cells that write
            verification = result["verification"]
            assert not scenarios.verification_failed(verification), (label, verification)
            assert verification["over_commits"] == 0, label
    storms = [result for result in report["results"] if result["name"] == "b.storm"]
    assert all(result["verification"]["checked_claims"] == result["claims"]
               for result in storms)
    assert sum(result["claims"] for result in storms) > 0
    soak = next(result for result in report["results"] if result["name"] == "g.soak")
    memory = soak["memory"]
    assert memory["distinct_queries"] == soak["count"] == memory["samples"][-1][1]
    assert 0 < memory["warm_mb"] and memory["within_bound"], memory


def test_soak_queries_are_distinct_and_answered():
    queries = list(itertools.islice(soak.distinct_queries([f"agg{index}" for index in range(10)]),
                                    2000))
    assert len(set(queries)) == 2000
    assert any("resources1=" in query for query in queries)
    assert any("member_of=" in query for query in queries)


def test_short_day_keeps_up_and_loses_nothing(tmp_path):
    """The day scenario's short form: 100 computes at 30 times their rates
    for 20 s. Every family's events start in time, nothing fails, and
    afterwards every instance holds what was last written for it, every
    deleted instance and finished migration nothing, and no provider is
    over capacity. No latency is asserted."""
    report_path = tmp_path / "day.json"
    run = subprocess.run(
        [sys.executable, "-m", "placement.bench", "--n", "100", "--duration", "20",
         "--day-speed", "30", "--scenarios", "f", "--backend", "sqlite",
         "--json", str(report_path)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
        timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    [result] = json.loads(report_path.read_text())["results"]
    assert result["name"] == "f.day"
    assert result["kept_up"], result["events"]
    assert result["errors"] == 0, result
    assert all(event["scheduled"] > 0 and event["unstarted"] == 0
               for event in result["events"].values()), result["events"]
    verification = result["verification"]
    assert not scenarios.verification_failed(verification), verification
    assert verification["checked_claims"] > 0 and verification["checked_rejected"] > 0
    for kind in ("tracker.allocations", "refresh.in_tree", "refresh.sharing", "boot.claim",
                 "delete", "migrate.move", "update.inventories", "update.traits"):
        assert result["requests"][kind]["count"] > 0, kind


def test_selection_by_letter_and_name():
    names = {cell.name for cell in cli.select(cli.CELLS, "a,b.storm")}
    assert names == {"a.basic", "a.traits-member-of", "a.nested-granular", "a.cold-plain",
                     "a.cold-filtered", "a.cold-claims", "b.storm"}


def test_the_capacity_bench_counts_a_tiny_cloud(tmp_path):
    """``python -m placement.bench.capacity`` seeds, claims half and
    reports its figures; the plain count is exact: 40 computes of 64 x 16
    VCPU and 392 448 MEMORY_MB, every other one with 32 VCPU and 64 GiB
    claimed (nested ones: on a NUMA node)."""
    environment = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run(
        [sys.executable, "-m", "placement.bench.capacity", "--n", "40", "--repeat", "1",
         "--concurrency", "2"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["plain_exact"] is True and report["shared_disk_exact"] is False
    assert 0 < report["shared_disk_total"] <= report["plain_total"]
    assert report["plain_count_cpu_ms"] > 0 and report["scrape_20_shapes_cpu_ms"] > 0
